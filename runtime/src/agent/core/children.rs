//! Sub-agents in the core (S1–S6): which children exist, who waits for
//! their reports, what their ends and crashes do.
//!
//! Starting a child (its role, its narrowed authority, its slot among the
//! tree's running sub-agents, its model, a node or here) is the actor's
//! mechanism; the core hears that it started ([`AgentInput::ChildStarted`])
//! and decides everything after: the `agent` tool's answer now or with the
//! report, follow-ups refused while a child works, every waiter answered
//! once, a crash failing its waiters.
//!
//! [`AgentInput::ChildStarted`]: super::AgentInput::ChildStarted

use super::{AgentCore, AgentEffect, ChildStart, Reply, Ticket, Write};
use crate::agent::{AgentPath, AgentReport, ChildRefusal, ChildState, Wait};
use crate::protocol::{Event, Op};
use crate::tool::{ErrorCode, ToolError};

/// A refusal as the `agent` tool reports it.
pub fn child_refusal(refusal: ChildRefusal) -> ToolError {
    let code = match refusal {
        ChildRefusal::NotFound(_) => ErrorCode::NotFound,
        ChildRefusal::Busy(_) | ChildRefusal::Crashed(_) => ErrorCode::Failed,
    };
    ToolError::new(code, refusal.to_string())
}

fn reply(ticket: Ticket, outcome: Result<String, ToolError>) -> AgentEffect {
    AgentEffect::Reply {
        ticket,
        reply: Reply::Tool(outcome),
    }
}

impl AgentCore {
    pub(super) fn child_started(&mut self, start: ChildStart, out: &mut Vec<AgentEffect>) {
        let ChildStart {
            ticket,
            path,
            role,
            model,
            posture,
            depth,
            prompt,
            background,
        } = start;
        out.push(AgentEffect::Emit(Event::AgentSpawned {
            agent_id: path.to_string(),
            role: role.clone(),
            model,
            posture,
            depth,
        }));
        if let Some(prompt) = prompt {
            out.push(AgentEffect::SendChild {
                path: path.clone(),
                op: Op::user(prompt),
            });
        }
        self.children.started(&path, path.clone(), role.clone());
        if background {
            out.push(reply(
                ticket,
                Ok(format!(
                    "started agent {path} (role {role}) in the background; \
                     collect its report with action=wait, agent_id={path}"
                )),
            ));
        } else {
            self.wait(ticket, &path.to_string(), out);
        }
    }

    /// A follow-up may start unless the child works, crashed, or is not
    /// there; when it may, the child is marked running.
    pub(super) fn follow_up(
        &mut self,
        ticket: Ticket,
        path: AgentPath,
        prompt: String,
        background: bool,
        out: &mut Vec<AgentEffect>,
    ) {
        match self.children.follow_up(&path) {
            Ok(child) => {
                let live = child.handle.is_some();
                out.push(AgentEffect::ResumeChild {
                    ticket,
                    path,
                    live,
                    prompt,
                    background,
                });
            }
            Err(refusal) => out.push(reply(ticket, Err(child_refusal(refusal)))),
        }
    }

    pub(super) fn child_resumed(
        &mut self,
        ticket: Ticket,
        path: AgentPath,
        prompt: String,
        background: bool,
        out: &mut Vec<AgentEffect>,
    ) {
        // A child read back from the store has an actor now.
        if let Some(child) = self.children.get_mut(&path) {
            child.handle = Some(path.clone());
        }
        out.push(AgentEffect::Persist(Write::Child {
            path: path.clone(),
            state: ChildState::Running,
            report: None,
        }));
        out.push(AgentEffect::SendChild {
            path: path.clone(),
            op: Op::user(prompt),
        });
        if background {
            out.push(reply(
                ticket,
                Ok(format!(
                    "agent {path} is working on the follow-up in the background"
                )),
            ));
        } else {
            self.wait(ticket, &path.to_string(), out);
        }
    }

    /// Nothing started: the child goes back to being idle.
    pub(super) fn child_not_resumed(
        &mut self,
        ticket: Ticket,
        path: &AgentPath,
        error: ToolError,
        out: &mut Vec<AgentEffect>,
    ) {
        if let Some(child) = self.children.get_mut(path) {
            child.state = ChildState::Idle;
        }
        out.push(reply(ticket, Err(error)));
    }

    pub(super) fn wait(&mut self, ticket: Ticket, agent_id: &str, out: &mut Vec<AgentEffect>) {
        let Ok(path) = agent_id.parse::<AgentPath>() else {
            return out.push(reply(
                ticket,
                Err(child_refusal(ChildRefusal::NotFound(agent_id.to_string()))),
            ));
        };
        match self.children.wait(&path, ticket) {
            Wait::Later => {}
            Wait::Report(report, ticket) => out.push(reply(ticket, Ok(report.render()))),
            Wait::NoReport(ticket) => out.push(reply(
                ticket,
                Err(ToolError::failed(format!(
                    "agent {agent_id} has no report: its run was interrupted; follow up with it"
                ))),
            )),
            Wait::Refused(why, ticket) => out.push(reply(ticket, Err(child_refusal(why)))),
        }
    }

    /// A child's run ended: its report goes to every waiter once.
    pub(super) fn child_done(
        &mut self,
        path: &AgentPath,
        report: AgentReport,
        out: &mut Vec<AgentEffect>,
    ) {
        let text = report.render();
        out.push(AgentEffect::Emit(Event::AgentCompleted {
            agent_id: path.to_string(),
            status: report.status.clone(),
            summary: report.summary.clone(),
            verified: report.verified,
        }));
        out.push(AgentEffect::Persist(Write::Child {
            path: path.clone(),
            state: ChildState::Idle,
            report: Some(Box::new(report.clone())),
        }));
        out.push(AgentEffect::FreeSlot(path.clone()));
        for waiter in self.children.run_done(path, report) {
            out.push(reply(waiter, Ok(text.clone())));
        }
    }

    /// A child's actor failed: its waiters get the failure.
    pub(super) fn child_crashed(
        &mut self,
        path: &AgentPath,
        error: &str,
        out: &mut Vec<AgentEffect>,
    ) {
        let Some((path, _role, waiters)) = self.children.crashed(|live| live == path) else {
            return;
        };
        for waiter in waiters {
            out.push(reply(
                waiter,
                Err(ToolError::failed(format!("agent {path} crashed: {error}"))),
            ));
        }
        out.push(AgentEffect::Persist(Write::Child {
            path: path.clone(),
            state: ChildState::Crashed,
            report: None,
        }));
        out.push(AgentEffect::Emit(Event::AgentCompleted {
            agent_id: path.to_string(),
            status: "failed".into(),
            summary: String::new(),
            verified: false,
        }));
    }
}
