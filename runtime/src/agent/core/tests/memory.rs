//! An agent's memory over a long run: the core keeps what its next request
//! sends (the latest compaction record and what follows it) and bounded
//! logs, whatever the number of messages stored.

use std::sync::{Arc, Weak};

use pretty_assertions::assert_eq;

use super::*;
use crate::context::{Compaction, CompactionKind};
use crate::message::ToolCall;

fn read_call(n: usize) -> Message {
    Message::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCall {
            id: format!("r{n}"),
            name: if n == 0 { "write_file" } else { "read_file" }.into(),
            arguments: match n {
                0 => r#"{"path":"notes.md","content":"x"}"#.into(),
                _ => r#"{"path":"big.txt"}"#.into(),
            },
        }],
    }
}

fn record(keep: usize) -> Message {
    Message::Compaction(Box::new(Compaction {
        kind: CompactionKind::Model,
        summary: Some("reads big.txt again and again".into()),
        pinned: String::new(),
        keep,
        stubs: Vec::new(),
        tokens_before: 9_000,
        tokens_after: 2_000,
    }))
}

#[test]
fn after_many_compactions_the_core_holds_only_the_latest_record_and_what_follows() {
    let (mut core, inputs) = running();
    run(&mut core, inputs);
    let now = Instant::now();
    let mut alive: Vec<Weak<Message>> = Vec::new();
    let mut seqs = Vec::new();
    let mut feed = |core: &mut AgentCore, alive: &mut Vec<Weak<Message>>, message: Message| {
        let message = Arc::new(message);
        alive.push(Arc::downgrade(&message));
        let effects = core.step(
            AgentInput::Recorded {
                turn_id: 1,
                message,
            },
            now,
        );
        for effect in effects {
            if let AgentEffect::Persist(Write::Append { seq, .. }) = effect {
                seqs.push(seq);
            }
        }
    };
    let mut most = 0;
    for n in 0..3_000 {
        feed(&mut core, &mut alive, read_call(n));
        feed(
            &mut core,
            &mut alive,
            Message::Tool {
                call_id: format!("r{n}"),
                content: "a line of a file read again and again.\n".repeat(100),
            },
        );
        if n % 20 == 19 {
            // The turn compacts, keeping the last call and its result.
            feed(&mut core, &mut alive, record(2));
        }
        let view = core.conversation().view().len();
        let held = alive.iter().filter(|w| w.strong_count() > 0).count();
        assert!(held <= view, "step {n}: {held} alive, the view has {view}");
        most = most.max(view);
    }
    // Every message went to the store, in order after the user's (0).
    assert_eq!(seqs, (1..=6_150).collect::<Vec<i64>>());
    assert_eq!(core.conversation().stored(), 6_151);
    // The record, the two messages it keeps, and at most 20 steps since.
    assert!(most <= 43, "{most} messages held at most");
    // What the next record re-states outlives the messages it came from.
    assert_eq!(core.conversation().trail().changed_files(), ["notes.md"]);
    assert_eq!(core.conversation().trail().latest_user(), Some("build it"));
    // The next turn starts from the same view, not the history.
    let ended = run(&mut core, vec![ended(1), finished()]);
    assert!(ended.contains("emit as"), "{ended}");
    let mut spawned = None;
    for effect in core.step(op_as("s2", Op::user("go on")), now) {
        assert!(!matches!(effect, AgentEffect::SpawnTurn(_)));
    }
    for effect in core.step(admitted(2), now) {
        if let AgentEffect::SpawnTurn(start) = effect {
            spawned = Some(start);
        }
    }
    let start = spawned.expect("the next turn");
    assert_eq!(start.conversation.stored(), 6_152);
    assert!(start.conversation.view().len() <= 44);
    assert!(matches!(
        start.conversation.view()[0].as_ref(),
        Message::Compaction(_)
    ));
}
