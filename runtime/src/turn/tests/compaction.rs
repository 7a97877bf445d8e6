//! Compaction inside the turn (CX2): the threshold, the summary request,
//! the fallback, a context-length error and its one retry, a request that
//! can never fit.

use std::sync::Weak;

use pretty_assertions::assert_eq;

use super::*;
use crate::context::{Compaction, CompactionKind, ContextBudget, SUMMARY_TAG};

/// A machine over a one-message history with a small window.
fn machine(window: u64, first: &str) -> TurnMachine {
    let mut config = config(Mode::Work, 20);
    config.context_budget = ContextBudget::default().with_window(window);
    let history: Arc<[Arc<Message>]> = Arc::from(vec![Arc::new(Message::user(first))]);
    TurnMachine::new(config, &Conversation::of(&history))
}

/// What one step asked for, reduced.
#[derive(Debug, PartialEq)]
enum Ask {
    Model { messages: Vec<Message> },
    Summary { text: String },
    Tool(String),
    Compacted(CompactionKind),
    Failed(FailureCategory, bool),
    Completed,
}

fn asks(effects: Vec<TurnEffect>) -> Vec<Ask> {
    effects
        .into_iter()
        .filter_map(|e| match e {
            TurnEffect::CallModel(r) => Some(Ask::Model {
                messages: r.messages().cloned().collect(),
            }),
            TurnEffect::Summarize(r) => {
                assert!(r.tools.is_empty(), "a summary request offers no tools");
                Some(Ask::Summary {
                    text: r.messages().map(|m| format!("{m:?}")).collect(),
                })
            }
            TurnEffect::RunTool(c) => Some(Ask::Tool(c.id)),
            TurnEffect::Emit(Event::ContextCompacted { kind, .. }) => Some(Ask::Compacted(kind)),
            TurnEffect::Finish(TurnOutcome::Failed {
                category,
                retryable,
                ..
            }) => Some(Ask::Failed(category, retryable)),
            TurnEffect::Finish(TurnOutcome::Completed { .. }) => Some(Ask::Completed),
            TurnEffect::Emit(_) | TurnEffect::Record(_) => None,
            TurnEffect::AskStop { .. } => panic!("no test here has stop hooks"),
        })
        .collect()
}

/// Calls `read_file` as call `id` and answers it with `size` bytes.
fn read(m: &mut TurnMachine, id: &str, size: usize) -> Vec<Ask> {
    let effects = m.step(calls(&[call(id, "read_file", r#"{"path":"big.txt"}"#)]));
    assert_eq!(asks(effects), vec![Ask::Tool(id.into())]);
    asks(m.step(finished(id, Ok("r".repeat(size)))))
}

fn the_record(messages: &[Message]) -> &Compaction {
    match messages.first() {
        Some(Message::Compaction(record)) => record,
        other => panic!("the request does not start with a record: {other:?}"),
    }
}

fn overflow() -> ModelError {
    ModelError::Http {
        status: 400,
        message: "This model's maximum context length is 2000 tokens. However, your messages \
                  resulted in 2600 tokens."
            .into(),
        retry_after: None,
        kind: Some("invalid_request_error".into()),
    }
}

fn text_input(text: &str) -> TurnInput {
    TurnInput::ModelResponded(ModelResponse {
        text: text.into(),
        ..ModelResponse::default()
    })
}

#[test]
fn past_the_threshold_the_model_summarises_and_the_recent_pair_stays_verbatim() {
    let mut m = machine(2_000, "read big.txt four times");
    assert!(matches!(
        asks(m.step(TurnInput::Start))[..],
        [Ask::Model { .. }]
    ));
    for id in ["r1", "r2", "r3"] {
        let next = read(&mut m, id, 1_500);
        assert!(matches!(next[..], [Ask::Model { .. }]), "{id}: {next:?}");
    }
    let next = read(&mut m, "r4", 1_500);
    let [Ask::Summary { text }] = &next[..] else {
        panic!("no summary request: {next:?}");
    };
    assert!(text.contains(SUMMARY_TAG), "{text}");
    let effects = asks(m.step(text_input("r1–r4 read big.txt; it holds r's")));
    let [
        Ask::Compacted(CompactionKind::Model),
        Ask::Model { messages },
    ] = &effects[..]
    else {
        panic!("not compacted: {effects:?}");
    };
    let record = the_record(messages);
    assert_eq!(
        record.summary.as_deref(),
        Some("r1–r4 read big.txt; it holds r's")
    );
    assert!(record.pinned.contains("read big.txt four times"));
    // The record, then r4's call and result.
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(matches!(&messages[2], Message::Tool { call_id, .. } if call_id == "r4"));
    // The turn goes on from the compacted form.
    assert_eq!(asks(m.step(text_input("done"))), vec![Ask::Completed]);
}

#[test]
fn a_failed_summary_falls_back_to_stubbing_the_oldest_outputs() {
    let mut m = machine(2_000, "go");
    m.step(TurnInput::Start);
    for id in ["r1", "r2", "r3"] {
        read(&mut m, id, 1_500);
    }
    let next = read(&mut m, "r4", 1_500);
    assert!(matches!(next[..], [Ask::Summary { .. }]), "{next:?}");
    let effects = asks(m.step(TurnInput::ModelFailed(http(500))));
    let [
        Ask::Compacted(CompactionKind::Fallback),
        Ask::Model { messages },
    ] = &effects[..]
    else {
        panic!("no fallback: {effects:?}");
    };
    let record = the_record(messages);
    assert_eq!(record.stubs[0].call_id, "r1");
    // Everything is kept; r1's output is a stub naming its call.
    let r1 = messages.iter().find_map(|m| match m {
        Message::Tool { call_id, content } if call_id == "r1" => Some(content.clone()),
        _ => None,
    });
    assert_eq!(
        r1.as_deref(),
        Some(
            "[output of read_file({\"path\":\"big.txt\"}) removed by compaction; it was 1500 \
             bytes]"
        )
    );
}

#[test]
fn a_context_length_error_compacts_and_retries_once_then_fails_as_the_agents() {
    let mut m = machine(100_000, "go");
    m.step(TurnInput::Start);
    read(&mut m, "r1", 3_000);
    read(&mut m, "r2", 3_000);
    // The server's window is smaller than configured: it says so.
    let effects = asks(m.step(TurnInput::ModelFailed(overflow())));
    let [
        Ask::Compacted(CompactionKind::Fallback),
        Ask::Model { messages },
    ] = &effects[..]
    else {
        panic!("no compaction and retry: {effects:?}");
    };
    assert!(!the_record(messages).stubs.is_empty());
    let again = asks(m.step(TurnInput::ModelFailed(overflow())));
    assert_eq!(again, vec![Ask::Failed(FailureCategory::Agent, false)]);
}

#[test]
fn a_request_that_can_never_fit_fails_as_the_agents_not_as_retryable() {
    // The user's message alone is past the window.
    let mut m = machine(200, &"x".repeat(4_000));
    let effects = m.step(TurnInput::Start);
    let message = effects.iter().find_map(|e| match e {
        TurnEffect::Finish(TurnOutcome::Failed { message, .. }) => Some(message.clone()),
        _ => None,
    });
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("does not fit the model's context window of 200 tokens")),
        "{message:?}"
    );
    assert_eq!(
        asks(effects),
        vec![Ask::Failed(FailureCategory::Agent, false)]
    );
}

#[test]
fn compact_on_demand_summarises_before_the_next_request() {
    let mut m = machine(100_000, "go");
    m.step(TurnInput::Start);
    m.step(TurnInput::Compact);
    let next = read(&mut m, "r1", 100);
    assert!(matches!(next[..], [Ask::Summary { .. }]), "{next:?}");
    let effects = asks(m.step(text_input("summary")));
    assert!(
        matches!(
            effects[..],
            [Ask::Compacted(CompactionKind::Model), Ask::Model { .. }]
        ),
        "{effects:?}"
    );
}

#[test]
fn past_an_assumed_window_the_request_is_sent_and_the_server_decides() {
    // No configured or known window: 128k is a guess, and a plan's
    // implementation message may be longer.
    let mut config = config(Mode::Work, 20);
    config.context_budget = ContextBudget::default();
    let history: Arc<[Arc<Message>]> =
        Arc::from(vec![Arc::new(Message::user("x".repeat(600_000)))]);
    let mut m = TurnMachine::new(config, &Conversation::of(&history));
    let effects = asks(m.step(TurnInput::Start));
    assert!(
        matches!(&effects[..], [Ask::Model { messages }] if messages.len() == 1),
        "{effects:?}"
    );
    // The server refuses and states its window: now it is known.
    let refused = ModelError::Http {
        status: 400,
        message: "This model's maximum context length is 131072 tokens.".into(),
        retry_after: None,
        kind: Some("context_length_exceeded".into()),
    };
    assert_eq!(
        asks(m.step(TurnInput::ModelFailed(refused))),
        vec![Ask::Failed(FailureCategory::Agent, false)]
    );
}

#[test]
fn a_compaction_that_stays_past_the_threshold_is_not_repeated_before_every_request() {
    // The system prompt alone is past the threshold (8000 of 10000).
    let mut config = config(Mode::Work, 20);
    config.system = Arc::from("s".repeat(34_000));
    config.context_budget = ContextBudget::default().with_window(10_000);
    let history: Arc<[Arc<Message>]> = Arc::from(vec![Arc::new(Message::user("go"))]);
    let mut m = TurnMachine::new(config, &Conversation::of(&history));
    // Nothing to compact: sent as it is.
    assert!(matches!(
        asks(m.step(TurnInput::Start))[..],
        [Ask::Model { .. }]
    ));
    // Past the window: r1's output becomes a stub.
    let next = read(&mut m, "r1", 12_000);
    assert!(
        matches!(
            next[..],
            [Ask::Compacted(CompactionKind::Fallback), Ask::Model { .. }]
        ),
        "{next:?}"
    );
    // Still past the threshold, but hardly grown since: no new compaction.
    let next = read(&mut m, "r2", 400);
    assert!(matches!(next[..], [Ask::Model { .. }]), "{next:?}");
}

/// Steps `m`, keeping a weak reference to each message it records.
fn step_noting(
    m: &mut TurnMachine,
    input: TurnInput,
    recorded: &mut Vec<Weak<Message>>,
) -> Vec<Ask> {
    let effects = m.step(input);
    for effect in &effects {
        if let TurnEffect::Record(message) = effect {
            recorded.push(Arc::downgrade(message));
        }
    }
    asks(effects)
}

#[test]
fn a_long_turn_holds_only_what_its_next_request_sends_however_many_compactions() {
    let mut config = config(Mode::Work, 2_000);
    config.context_budget = ContextBudget::default().with_window(2_000);
    let history: Arc<[Arc<Message>]> = Arc::from(vec![Arc::new(Message::user(
        "read big.txt again and again",
    ))]);
    let mut m = TurnMachine::new(config, &Conversation::of(&history));
    drop(history);
    let mut recorded = Vec::new();
    m.step(TurnInput::Start);
    // A write first: the records must go on naming it long after the
    // messages that made it were let go.
    let write = call("w", "write_file", r#"{"path":"notes.md","content":"x"}"#);
    step_noting(&mut m, calls(std::slice::from_ref(&write)), &mut recorded);
    step_noting(
        &mut m,
        finished("w", Ok("wrote notes.md".into())),
        &mut recorded,
    );
    let (mut compactions, mut most) = (0, 0);
    let mut last_record = None;
    for n in 0..1_000 {
        let id = format!("r{n}");
        let read = call(&id, "read_file", r#"{"path":"big.txt"}"#);
        step_noting(&mut m, calls(&[read]), &mut recorded);
        let mut next = step_noting(&mut m, finished(&id, Ok("r".repeat(1_500))), &mut recorded);
        if let [Ask::Summary { .. }] = &next[..] {
            let summary = text_input("reads big.txt, again and again");
            next = step_noting(&mut m, summary, &mut recorded);
            compactions += 1;
        }
        let [.., Ask::Model { messages }] = &next[..] else {
            panic!("step {n}: {next:?}");
        };
        if let Some(Message::Compaction(record)) = messages.first() {
            last_record = Some(record.clone());
        }
        // The messages still alive are those the next request sends: the
        // machine keeps no other.
        let alive = recorded.iter().filter(|w| w.strong_count() > 0).count();
        assert!(
            alive <= messages.len(),
            "step {n}: {alive} alive, {} sent",
            messages.len()
        );
        most = most.max(alive);
    }
    assert!(compactions > 100, "{compactions} compactions");
    assert_eq!(recorded.len(), 2 + 2_000 + compactions);
    assert!(most <= 10, "{most} messages held at most");
    let record = last_record.expect("a record");
    assert!(record.pinned.contains("notes.md"), "{}", record.pinned);
    assert!(record.pinned.contains("read big.txt again and again"));
}
