//! Stop hooks: a final answer is put to them; a continuation keeps the
//! turn going with its message, at most `stop_checks` times.

use pretty_assertions::assert_eq;

use super::*;

fn machine(stop_checks: u32, max_iterations: u32) -> TurnMachine {
    let history: Arc<[Arc<Message>]> = Arc::from(vec![Arc::new(Message::user("hi"))]);
    let config = TurnConfig {
        stop_checks,
        ..config(Mode::Work, max_iterations)
    };
    TurnMachine::new(config, &Conversation::of(&history))
}

/// The effects that matter here, one line each.
fn lines(effects: Vec<TurnEffect>) -> Vec<String> {
    effects
        .into_iter()
        .filter_map(|e| match fx(e) {
            Fx::AskStop(text) => Some(format!("ask stop: {text}")),
            Fx::CallModel { iteration, .. } => Some(format!("model {iteration}")),
            Fx::Record(Message::User { content }) => Some(format!("user: {content}")),
            Fx::Finish(TurnOutcome::Completed { text }) => Some(format!("completed: {text}")),
            Fx::Finish(TurnOutcome::Failed { message, .. }) => Some(format!("failed: {message}")),
            Fx::Emit(_) | Fx::Record(_) | Fx::RunTool(_) => None,
        })
        .collect()
}

#[test]
fn without_stop_hooks_a_final_answer_ends_the_turn() {
    let mut m = machine(0, 10);
    m.step(TurnInput::Start);
    assert_eq!(lines(m.step(text("done"))), ["completed: done"]);
}

#[test]
fn a_continuation_keeps_the_turn_going_and_no_objection_ends_it() {
    let mut m = machine(3, 10);
    m.step(TurnInput::Start);
    assert_eq!(lines(m.step(text("done"))), ["ask stop: done"]);
    assert_eq!(
        lines(m.step(TurnInput::StopAnswered(Some("tests fail".into())))),
        ["user: tests fail", "model 2"]
    );
    assert_eq!(lines(m.step(text("fixed"))), ["ask stop: fixed"]);
    assert_eq!(
        lines(m.step(TurnInput::StopAnswered(None))),
        ["completed: fixed"]
    );
}

#[test]
fn the_breaker_bounds_the_continuations() {
    let mut m = machine(2, 10);
    m.step(TurnInput::Start);
    let mut seen = Vec::new();
    for n in 0..3 {
        seen.extend(lines(m.step(text(&format!("answer {n}")))));
        if !m.is_finished() {
            seen.extend(lines(m.step(TurnInput::StopAnswered(Some("again".into())))));
        }
    }
    assert_eq!(
        seen,
        [
            "ask stop: answer 0",
            "user: again",
            "model 2",
            "ask stop: answer 1",
            "user: again",
            "model 3",
            "completed: answer 2",
        ]
    );
}

#[test]
fn the_iteration_limit_bounds_them_too() {
    let mut m = machine(5, 2);
    m.step(TurnInput::Start);
    m.step(text("one"));
    m.step(TurnInput::StopAnswered(Some("again".into())));
    m.step(text("two"));
    let end = lines(m.step(TurnInput::StopAnswered(Some("again".into()))));
    assert_eq!(end.len(), 2, "{end:?}");
    assert!(
        end[1].starts_with("failed: the turn reached its limit of 2"),
        "{end:?}"
    );
}

#[test]
fn a_cancel_while_the_hooks_run_ends_the_turn() {
    let mut m = machine(1, 10);
    m.step(TurnInput::Start);
    m.step(text("done"));
    let end = lines(m.step(TurnInput::Cancel));
    assert_eq!(end, ["failed: the turn was cancelled"]);
    // A late answer changes nothing.
    assert!(m.step(TurnInput::StopAnswered(Some("x".into()))).is_empty());
}
