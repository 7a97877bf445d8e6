//! What a step watches of its agent: the events it reads (the calls kept
//! as the evidence a check or a verifier is shown), the verifier it starts
//! on an accepted answer, and the events it passes outward under the
//! run's names.

use cadre_runtime::protocol::TurnEvent;

use super::*;

impl StepState {
    /// Starts the verifier on the accepted answer; its verdict comes back
    /// as [`StepMsg::Verdict`], within the step's timeout (else the
    /// default check timeout).
    pub(super) async fn verify(&mut self, myself: &ActorRef<StepMsg>, path: Option<AgentPath>) {
        let fail = |why: String| {
            let (passed, detail) = outcome(&Verdict::Unavailable(why));
            let _ = myself.cast(StepMsg::Checked(passed, detail));
        };
        let Some(path) = path else {
            return fail("no place in the run's tree was given to it".into());
        };
        let (spec, services) = match verifier(
            &self.args.spec,
            self.args.subagents.as_deref(),
            &self.args.services,
            path,
        ) {
            Ok(started) => started,
            Err(why) => return fail(why.to_string()),
        };
        let shown = Event::AgentSpawned {
            agent_id: format!("{}:{VERIFIER_ROLE}", self.args.prefix),
            role: VERIFIER_ROLE.into(),
            model: spec
                .model
                .clone()
                .unwrap_or_else(|| services.model.model().to_string()),
            posture: spec.authority.posture,
            depth: spec.path.depth() as u32,
        };
        let SpawnedAgent { actor, events, .. } =
            match spawn_agent(spec, services, Some(myself.get_cell())).await {
                Ok(spawned) => spawned,
                Err(e) => return fail(format!("it could not start: {e}")),
            };
        let calls: Vec<String> = self.calls.iter().map(|(_, c)| c.clone()).collect();
        let request = verifier_request(&self.args.prompt, &self.claim, &calls);
        if actor.cast(SessionMsg::Op(Op::user(request))).is_err() {
            return fail("it stopped at once".into());
        }
        self.supervisor(StepReport::Event(Box::new(shown)));
        self.verifier = Some(actor.clone());
        let limit = self.args.timeout.unwrap_or(DEFAULT_CHECK_TIMEOUT);
        let me = myself.clone();
        let (supervisor, id) = (self.args.supervisor.clone(), self.args.id);
        let agent = format!("{}:{VERIFIER_ROLE}", self.args.prefix);
        let shown = move |event| {
            let _ = supervisor.cast(SupervisorMsg::Step(id, StepReport::Event(Box::new(event))));
        };
        tokio::spawn(async move {
            let (verdict, usage) = tokio::time::timeout(limit, read_verdict(events, &agent, shown))
                .await
                .unwrap_or_else(|_| {
                    (
                        Verdict::Unavailable(format!("it did not answer within {}", human(limit))),
                        Usage::default(),
                    )
                });
            let _ = actor.cast(SessionMsg::Op(Op::Cancel));
            let _ = actor.cast(SessionMsg::Op(Op::Shutdown));
            let _ = me.cast(StepMsg::Verdict(verdict, usage));
        });
    }

    /// Where what the agent did stays.
    pub(super) fn transcript_note(&self) -> String {
        match &self.agent {
            Agent::Starting => "its agent had not started".to_string(),
            Agent::Local(_) => format!(
                "its partial transcript is kept under agent {}",
                self.args.spec.row_id()
            ),
            Agent::Remote(remote) => format!(
                "it ran on node {} as agent {}",
                remote.node,
                self.args.spec.row_id()
            ),
        }
    }

    pub(super) fn agent_event(&mut self, event: Event) {
        self.last_progress = Instant::now();
        match event.turn_event() {
            Some(TurnEvent::Answer(text)) => text.clone_into(&mut self.answer),
            Some(TurnEvent::Call {
                call_id,
                name,
                arguments,
            }) => {
                let subject = self.subject(name, arguments);
                self.calls
                    .push((call_id.to_string(), format!("{name}{subject}")));
            }
            Some(TurnEvent::Result {
                call_id,
                status,
                error_code,
                ..
            }) => {
                if let Some((_, call)) = self.calls.iter_mut().find(|(id, _)| id == call_id) {
                    match (status, error_code) {
                        (ToolStatus::Ok, _) => call.push_str(" → ok"),
                        (ToolStatus::Error, code) => {
                            call.push_str(&format!(" → {}", code.map_or("error", |c| c.as_str())))
                        }
                    }
                }
            }
            Some(TurnEvent::Completed { usage }) => {
                self.supervisor(StepReport::Tokens(spent(&usage)));
                self.supervisor(StepReport::Spent(usage));
                if !std::mem::replace(&mut self.reported, true) {
                    let output = std::mem::take(&mut self.answer);
                    self.claim.clone_from(&output);
                    let calls = self.calls.iter().map(|(_, c)| c.clone()).collect();
                    self.supervisor(StepReport::Answered { output, calls });
                }
                self.agent.op(Op::Shutdown);
            }
            Some(TurnEvent::Failed {
                category,
                message,
                retryable,
                usage,
            }) => {
                self.supervisor(StepReport::Tokens(spent(&usage)));
                self.supervisor(StepReport::Spent(usage));
                let infrastructure = category == FailureCategory::Infrastructure;
                let refused = infrastructure && !retryable && terminal(message);
                match &self.agent {
                    // The run's own endpoint refused: nothing more is sent.
                    Agent::Local(_) if refused => self.supervisor(StepReport::Halt(format!(
                        "the model endpoint refused {}: {message}",
                        self.args.prefix
                    ))),
                    // A node's endpoint (or a node saying so) is that node's
                    // matter: the attempt fails and is retried, the run goes on.
                    Agent::Remote(remote) if refused => {
                        self.report_failure(format!(
                            "the model endpoint of node {} refused: {message}",
                            remote.node
                        ));
                    }
                    Agent::Starting | Agent::Local(_) | Agent::Remote(_) => {}
                }
                if infrastructure && retryable {
                    self.report_once(StepReport::Requeue {
                        reason: message.to_string(),
                    });
                } else {
                    self.report_failure(message.to_string());
                }
                self.agent.op(Op::Shutdown);
            }
            // What else the agent does passes outward below, or stays
            // inside the step.
            None => {}
        }
        if let Some(shown) = self.outward(event) {
            self.supervisor(StepReport::Event(Box::new(shown)));
        }
    }

    /// What a call works on, from its tool's marks: a shell command, or
    /// the path argument.
    fn subject(&self, name: &str, arguments: &serde_json::Value) -> String {
        let registry = self.args.services.tools.registry();
        let Some(def) = registry.definitions().find(|d| d.name == name) else {
            return String::new();
        };
        let shown = if def.shell {
            arguments
                .get("command")
                .and_then(|c| c.as_str())
                .map(|c| format!(" `{c}`"))
        } else {
            def.path_in(arguments).map(|p| format!(" {p}"))
        };
        shown.unwrap_or_default()
    }

    /// The events the caller must see, with the step's ids: prompts,
    /// decisions, sub-agents, as [`Event::nested`] lists them. An event
    /// naming an agent or a prompt outside the step is dropped: it cannot
    /// come from the step's own agent, and a node must not be able to
    /// raise it.
    fn outward(&self, event: Event) -> Option<Event> {
        let prefix = &self.args.prefix;
        let agent = |inner: &str| outer_agent_id(prefix, &self.path, inner);
        let approval = |inner: &str| outer_approval_id(prefix, &self.path, inner);
        event.nested(&Nested {
            agent: &agent,
            approval: &approval,
            own: &self.path.to_string(),
            label: prefix,
        })
    }
}
