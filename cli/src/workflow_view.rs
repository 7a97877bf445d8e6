//! The progress of a workflow run, with no I/O: events in, lines out.
//!
//! On a terminal `cadre workflow run` redraws [`Progress::lines`] in place
//! (each step with its state, elapsed time and tokens; a fan-out as
//! `done/total`); elsewhere it prints one plain line per change. Both end
//! with [`table`], one row per step.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cadre_runtime::protocol::Event;
use cadre_workflows::scheduler::{Report, State};

/// One step's progress.
#[derive(Debug, Clone, Default)]
struct StepLine {
    name: String,
    fan_out: bool,
    /// Each instance's state, by index (0 for a single step).
    states: BTreeMap<u64, State>,
    tokens: BTreeMap<u64, u64>,
    /// A state for the step as a whole (blocked before it had items).
    whole: Option<State>,
    started: Option<Instant>,
    ended: Option<Instant>,
}

impl StepLine {
    fn count(&self, states: &[State]) -> usize {
        self.states.values().filter(|s| states.contains(s)).count()
    }

    fn state(&self) -> String {
        if let Some(whole) = self.whole {
            return whole.to_string();
        }
        if !self.fan_out {
            return self
                .states
                .get(&0)
                .copied()
                .unwrap_or(State::Pending)
                .to_string();
        }
        let total = self.states.len();
        if total == 0 {
            return "waiting".into();
        }
        let done = self.count(&[State::Finalized, State::Verified]);
        let running = self.count(&[State::Dispatched]);
        let failed = self.count(&[State::Failed, State::Blocked, State::Cancelled]);
        let mut text = format!("{done}/{total} done");
        if running > 0 {
            text.push_str(&format!(" · {running} running"));
        }
        if failed > 0 {
            text.push_str(&format!(" · {failed} failed"));
        }
        text
    }
}

/// A run's progress.
#[derive(Debug, Default)]
pub struct Progress {
    run_id: String,
    workflow: String,
    steps: Vec<StepLine>,
}

/// `1.2k`, `3.4M`.
fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1_000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// `42s`, `3m05s`, `1h02m`.
fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

impl Progress {
    /// Takes one event at time `now`.
    pub fn apply(&mut self, event: &Event, now: Instant) {
        match event {
            Event::WorkflowStarted {
                run_id,
                workflow,
                steps,
            } => {
                self.run_id.clone_from(run_id);
                self.workflow.clone_from(workflow);
                self.steps = steps
                    .iter()
                    .map(|name| StepLine {
                        name: name.clone(),
                        ..StepLine::default()
                    })
                    .collect();
            }
            Event::StepState {
                step,
                index,
                state,
                tokens,
                ..
            } => {
                let Some(line) = self.steps.iter_mut().find(|l| &l.name == step) else {
                    return;
                };
                match index {
                    Some(i) => {
                        line.fan_out = true;
                        line.states.insert(*i, *state);
                        line.tokens.insert(*i, *tokens);
                    }
                    None if line.fan_out || *state == State::Blocked && line.states.is_empty() => {
                        line.whole = Some(*state);
                    }
                    None => {
                        line.states.insert(0, *state);
                        line.tokens.insert(0, *tokens);
                    }
                }
                if *state == State::Dispatched && line.started.is_none() {
                    line.started = Some(now);
                }
                let open = line
                    .states
                    .values()
                    .any(|s| matches!(s, State::Pending | State::Dispatched));
                line.ended = (!open).then_some(now);
            }
            _ => {}
        }
    }

    /// The live view at `now`: a header, then one line per step.
    pub fn lines(&self, now: Instant) -> Vec<String> {
        let width = self.steps.iter().map(|s| s.name.len()).max().unwrap_or(4);
        let mut out = vec![format!("workflow {} · run {}", self.workflow, self.run_id)];
        for step in &self.steps {
            let time = step
                .started
                .map(|start| elapsed(step.ended.unwrap_or(now).saturating_duration_since(start)))
                .unwrap_or_default();
            let spent: u64 = step.tokens.values().sum();
            out.push(format!(
                "  {:<width$}  {:<28} {:>7} {:>8}",
                step.name,
                step.state(),
                time,
                if spent > 0 {
                    format!("{} tok", tokens(spent))
                } else {
                    String::new()
                },
            ));
        }
        out
    }
}

/// The final table: one row per step, its outcome, how many items
/// succeeded, and why it has no result.
pub fn table(report: &Report) -> String {
    let width = report
        .steps
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "{:<width$}  {:<10} {:>7}  NOTE\n",
        "STEP", "STATUS", "ITEMS"
    );
    for step in &report.steps {
        let total = step.instances.len();
        let ok = step
            .instances
            .iter()
            .filter(|i| matches!(i.state, State::Finalized | State::Verified))
            .count();
        let restored = step.instances.iter().filter(|i| i.restored).count();
        let mut note = step.reason.clone().unwrap_or_default();
        if restored > 0 {
            note = format!(
                "{restored} from an earlier run{}",
                if note.is_empty() {
                    String::new()
                } else {
                    format!("; {note}")
                }
            );
        }
        let note: String = note
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(100)
            .collect();
        out.push_str(&format!(
            "{:<width$}  {:<10} {:>7}  {note}\n",
            step.name,
            step.status,
            format!("{ok}/{total}")
        ));
    }
    let count = |state: State| report.counts.get(&state).copied().unwrap_or(0);
    out.push_str(&format!(
        "{}: {} verified, {} finalized, {} failed, {} blocked, {} cancelled · every step ran: {} · every check passed: {} · {} tokens\n",
        report.status,
        count(State::Verified),
        count(State::Finalized),
        count(State::Failed),
        count(State::Blocked),
        count(State::Cancelled),
        if report.all_ran { "yes" } else { "no" },
        if report.all_checks_passed { "yes" } else { "no" },
        tokens(report.tokens),
    ));
    let usage = &report.usage;
    if usage.cached_tokens > 0 || usage.reasoning_tokens > 0 || !usage.cost.is_zero() {
        // The details, on a line of their own so the one above stays as it was.
        let mut details = format!(
            "of which {} cached, {} reasoning",
            tokens(usage.cached_tokens),
            tokens(usage.reasoning_tokens)
        );
        if !usage.cost.is_zero() {
            details.push_str(&format!(" · cost {}", usage.cost));
        }
        out.push_str(&details);
        out.push('\n');
    }
    if let Some(why) = &report.halted {
        out.push_str(&format!(
            "stopped early: {why}
"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(step: &str, index: Option<u64>, state: State) -> Event {
        Event::StepState {
            run_id: "r".into(),
            step: step.into(),
            index,
            item: None,
            state,
            agent_id: None,
            node: None,
            reason: None,
            tokens: 1500,
        }
    }

    #[test]
    fn steps_show_their_state_and_fan_outs_done_over_total() {
        let t0 = Instant::now();
        let mut p = Progress::default();
        p.apply(
            &Event::WorkflowStarted {
                run_id: "r1".into(),
                workflow: "wf".into(),
                steps: vec!["list".into(), "review".into()],
            },
            t0,
        );
        p.apply(&state("list", None, State::Dispatched), t0);
        p.apply(
            &state("list", None, State::Finalized),
            t0 + Duration::from_secs(65),
        );
        for i in 0..3 {
            p.apply(
                &state("review", Some(i), State::Dispatched),
                t0 + Duration::from_secs(65),
            );
        }
        p.apply(
            &state("review", Some(0), State::Verified),
            t0 + Duration::from_secs(70),
        );
        p.apply(
            &state("review", Some(1), State::Failed),
            t0 + Duration::from_secs(70),
        );
        let lines = p.lines(t0 + Duration::from_secs(75));
        assert_eq!(
            lines,
            [
                "workflow wf · run r1",
                "  list    finalized                      1m05s 1.5k tok",
                "  review  1/3 done · 1 running · 1 failed     10s 4.5k tok",
            ]
        );
    }

    #[test]
    fn the_table_says_why_a_run_stopped_early() {
        let report = Report {
            status: cadre_runtime::store::RunStatus::Failed,
            counts: Default::default(),
            all_ran: false,
            all_checks_passed: true,
            halted: Some("the model endpoint refused step:x[0]: HTTP 401".into()),
            tokens: 0,
            usage: Default::default(),
            steps: Vec::new(),
        };
        assert_eq!(
            table(&report),
            "STEP  STATUS       ITEMS  NOTE
failed: 0 verified, 0 finalized, 0 failed, 0 blocked, 0 cancelled · every step ran: no · every check passed: yes · 0 tokens
stopped early: the model endpoint refused step:x[0]: HTTP 401
"
        );
    }
}
