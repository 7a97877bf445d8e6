//! The pure compaction decisions, on written and generated conversations.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;
use crate::message::ToolCall;

mod held;

fn user(text: &str) -> Arc<Message> {
    Arc::new(Message::user(text))
}

fn calls(ids: &[(&str, &str, &str)]) -> Arc<Message> {
    Arc::new(Message::Assistant {
        content: String::new(),
        tool_calls: ids
            .iter()
            .map(|(id, name, args)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*args).into(),
            })
            .collect(),
    })
}

fn result(id: &str, content: &str) -> Arc<Message> {
    Arc::new(Message::Tool {
        call_id: id.into(),
        content: content.into(),
    })
}

fn said(text: &str) -> Arc<Message> {
    Arc::new(Message::Assistant {
        content: text.into(),
        tool_calls: Vec::new(),
    })
}

fn record(keep: usize, stubs: &[(&str, &str)]) -> Arc<Message> {
    Arc::new(Message::Compaction(Box::new(Compaction {
        kind: CompactionKind::Model,
        summary: Some("earlier work".into()),
        pinned: "- Agent: role `main`, mode `work`.\n".into(),
        keep,
        stubs: stubs
            .iter()
            .map(|(id, line)| Stub {
                call_id: (*id).into(),
                line: (*line).into(),
            })
            .collect(),
        tokens_before: 100,
        tokens_after: 10,
    })))
}

/// Whether a request carrying `messages` answers every call it makes and
/// answers nothing it does not make.
fn pairs_intact(messages: &[Arc<Message>]) -> bool {
    let made: Vec<&str> = messages
        .iter()
        .filter_map(|m| match m.as_ref() {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.iter().map(|c| c.id.as_str())),
            _ => None,
        })
        .flatten()
        .collect();
    let answered: Vec<&str> = messages
        .iter()
        .filter_map(|m| match m.as_ref() {
            Message::Tool { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    made.iter().all(|id| answered.contains(id)) && answered.iter().all(|id| made.contains(id))
}

#[test]
fn the_window_comes_from_config_then_the_table_then_the_default() {
    let check = |configured, model, window| {
        assert_eq!(
            ContextBudget::resolve(configured, model, None).window,
            window,
            "{configured:?} {model:?}"
        );
    };
    check(Some(8_000), Some("gpt-4o"), 8_000);
    check(None, Some("gpt-4o-mini"), 128_000);
    check(None, Some("openai/gpt-4.1-mini"), 1_047_576);
    check(None, Some("gpt-4"), 8_192);
    check(None, Some("Qwen3-Coder-30B"), 262_144);
    check(None, Some("my-local-model"), DEFAULT_WINDOW);
    check(Some(0), None, DEFAULT_WINDOW);
    let budget = ContextBudget::resolve(Some(10_000), None, Some(99));
    assert_eq!((budget.threshold_percent, budget.threshold()), (95, 9_500));
    assert_eq!(ContextBudget::default().threshold(), 102_400);
    // `/model` to a known model takes its window; to an unknown one keeps it.
    let local = ContextBudget::resolve(Some(32_768), Some("local"), None);
    assert_eq!(local.for_model("gpt-4o").window, 128_000);
    assert_eq!(local.for_model("other-local").window, 32_768);
}

#[test]
fn a_view_without_a_record_is_the_conversation() {
    let raw = vec![user("go"), calls(&[("a", "bash", "{}")]), result("a", "ok")];
    assert_eq!(view(&raw), raw);
}

#[test]
fn a_record_keeps_its_last_messages_with_their_stubs_and_records_chain() {
    let raw = vec![
        user("go"),
        calls(&[("a", "read_file", "{}")]),
        result("a", "long output"),
        calls(&[("b", "bash", "{}")]),
        result("b", "exit code: 0\nmore"),
        record(2, &[("b", "[stub b]")]),
        said("next"),
    ];
    let got = view(&raw);
    assert_eq!(
        got,
        vec![
            raw[5].clone(),
            raw[3].clone(),
            result("b", "[stub b]"),
            raw[6].clone()
        ]
    );
    // A second record applies to the view the first one left.
    let mut more = raw.clone();
    more.push(record(1, &[]));
    assert_eq!(view(&more), vec![more[7].clone(), raw[6].clone()]);
}

#[test]
fn cuts_never_fall_between_a_call_and_its_results() {
    let conversation = vec![
        user("go"),                                         // 0
        calls(&[("a", "bash", "{}"), ("b", "bash", "{}")]), // 1
        result("b", "x"),                                   // 2
        result("a", "y"),                                   // 3
        said("done"),                                       // 4
    ];
    assert_eq!(valid_cuts(&conversation), vec![0, 1, 4, 5]);
}

#[test]
fn keep_from_keeps_the_newest_part_that_fits() {
    let big = "x".repeat(4_000);
    let conversation = vec![
        user("go"),
        calls(&[("a", "read_file", "{}")]),
        result("a", &big),
        calls(&[("b", "read_file", "{}")]),
        result("b", &big),
        said("done"),
    ];
    // Room for one read and the answer, not two.
    assert_eq!(keep_from(&conversation, 1_200), 3);
    assert_eq!(keep_from(&conversation, 10), 5);
    assert_eq!(keep_from(&conversation, 100_000), 0);
}

#[test]
fn stubs_replace_the_oldest_outputs_first_naming_the_call_and_exit_code() {
    let big = "y".repeat(8_000);
    let conversation = vec![
        user("go"),
        calls(&[("a", "bash", r#"{"command":"head -c 8000 f"}"#)]),
        result("a", &format!("exit code: 3\n{big}")),
        calls(&[("b", "read_file", r#"{"path":"f"}"#)]),
        result("b", &big),
    ];
    let whole = estimate(conversation.iter().map(AsRef::as_ref));
    let (stubs, fits) = fit_by_stubs(&conversation, 0, whole - 1_000);
    assert!(fits);
    assert_eq!(stubs.len(), 1);
    assert_eq!(stubs[0].call_id, "a");
    assert_eq!(
        stubs[0].line,
        "[output of bash({\"command\":\"head -c 8000 f\"}) removed by compaction, exit code 3; \
         it was 8013 bytes]"
    );
    let (stubs, fits) = fit_by_stubs(&conversation, 0, 10);
    assert!(!fits);
    assert_eq!(stubs.len(), 2);
}

#[test]
fn the_pinned_state_comes_from_the_calls_that_succeeded() {
    let raw = vec![
        user("build it"),
        calls(&[(
            "t1",
            "todo_write",
            r#"{"todos":[{"content":"write","status":"in_progress"}]}"#,
        )]),
        result("t1", "[>] write"),
        calls(&[(
            "t2",
            "todo_write",
            r#"{"todos":[{"content":"bad","status":"x"}]}"#,
        )]),
        result("t2", "error (invalid_arguments): status"),
        calls(&[("c1", "bash", r#"{"command":"cargo test"}"#)]),
        result("c1", "exit code: 101\nfailures"),
        calls(&[
            ("w1", "write_file", r#"{"path":"src/a.rs","content":"x"}"#),
            ("w2", "edit_file", r#"{"path":"src/b.rs"}"#),
            ("w3", "write_file", r#"{"path":"/etc/x"}"#),
        ]),
        result("w1", "wrote src/a.rs"),
        result("w2", "error (not_found): src/b.rs"),
        result("w3", "error (tool_not_allowed): outside"),
    ];
    let pinned = Pinned {
        role: "main".into(),
        mode: crate::mode::Mode::Work,
        goal: Some("- Session goal (active, none): ship\n".into()),
        plan: None,
        instructions: Some("/repo/AGENTS.md (SHA-256 ab12)".into()),
    };
    assert_eq!(
        pinned.render(&Trail::of(&raw)),
        "- Agent: role `main`, mode `work`.\n\
         - Session goal (active, none): ship\n\
         - Project instructions still in force (in the system prompt): /repo/AGENTS.md (SHA-256 ab12)\n\
         - Todo list (from your last todo_write):\n  - [in_progress] write\n\
         - Files your calls wrote or edited: src/a.rs\n\
         - Recent commands (oldest first):\n  - `cargo test` → exit code: 101\n\
         - The latest user message, verbatim:\nbuild it\n"
    );
}

#[test]
fn an_implementing_turn_pins_the_approved_plans_hash_and_file() {
    let snapshot = "## Summary\nDo it.";
    let raw = vec![user(&format!(
        "{}{snapshot}",
        crate::plan::lifecycle::IMPLEMENT_INSTRUCTION
    ))];
    let pinned = Pinned {
        plan: Some("/data/plan.md".into()),
        ..Pinned::default()
    };
    let text = pinned.render(&Trail::of(&raw));
    // sha256("## Summary\nDo it.")
    let sha: String = {
        use sha2::{Digest, Sha256};
        Sha256::digest(snapshot.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    assert!(
        text.contains(&format!(
            "approved plan (SHA-256 {sha}, frozen from /data/plan.md)"
        )),
        "{text}"
    );
    assert!(text.ends_with(&format!("{snapshot}\n")), "{text}");
}

#[test]
fn the_goal_state_names_objective_budgets_and_gaps() {
    let mut goal = crate::goal::Goal::new(
        "make the tests pass",
        crate::goal::Budgets {
            tokens: Some(5_000),
            ..Default::default()
        },
        crate::goal::GoalSettings::default(),
    );
    goal.gaps.gaps = vec!["tests/a.rs fails".into()];
    let text = goal_state(&goal);
    assert!(text.contains("make the tests pass"), "{text}");
    assert!(text.contains("tokens 0 of 5000"), "{text}");
    assert!(text.contains("- tests/a.rs fails"), "{text}");
}

/// One generated exchange: a user message, then rounds of calls (each
/// answered, in any order) and texts.
fn exchange() -> impl Strategy<Value = Vec<(u8, usize, bool)>> {
    // (calls in the round, output size, answers reversed)
    proptest::collection::vec((0u8..4, 0usize..3_000, any::<bool>()), 1..6)
}

fn conversation(rounds: Vec<Vec<(u8, usize, bool)>>) -> Vec<Arc<Message>> {
    let mut out = Vec::new();
    let mut n = 0;
    for (turn, rounds) in rounds.into_iter().enumerate() {
        out.push(user(&format!("turn {turn}")));
        for (count, size, reversed) in rounds {
            if count == 0 {
                out.push(said("thinking"));
                continue;
            }
            let ids: Vec<String> = (0..count)
                .map(|_| {
                    n += 1;
                    format!("c{n}")
                })
                .collect();
            let made: Vec<(&str, &str, &str)> =
                ids.iter().map(|id| (id.as_str(), "bash", "{}")).collect();
            out.push(calls(&made));
            let mut answers: Vec<Arc<Message>> =
                ids.iter().map(|id| result(id, &"z".repeat(size))).collect();
            if reversed {
                answers.reverse();
            }
            out.extend(answers);
        }
    }
    out
}

proptest! {
    #[test]
    fn generated_conversations_are_never_cut_or_stubbed_apart(
        rounds in proptest::collection::vec(exchange(), 1..5),
        keep in 0u64..4_000,
        target in 0u64..6_000,
    ) {
        let conv = conversation(rounds);
        for cut in valid_cuts(&conv) {
            prop_assert!(pairs_intact(&conv[cut..]), "cut {cut}");
            prop_assert!(pairs_intact(&conv[..cut]), "cut {cut}");
        }
        let from = keep_from(&conv, keep);
        prop_assert!(valid_cuts(&conv).contains(&from));
        // A record keeping the suffix, stubbed to a target: what a request
        // then sends still pairs every call with its result.
        let (stubs, _) = fit_by_stubs(&conv[from..], 0, target);
        let mut raw = conv.clone();
        let stubs: Vec<(String, String)> = stubs.into_iter().map(|s| (s.call_id, s.line)).collect();
        let borrowed: Vec<(&str, &str)> = stubs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        raw.push(record(conv.len() - from, &borrowed));
        let sent = view(&raw);
        prop_assert!(pairs_intact(&sent));
        prop_assert_eq!(sent.len(), conv.len() - from + 1);
        // A second record over the first: `fates` names exactly what
        // `view` sends, stubs included, and what each record replaced.
        raw.extend(conversation(vec![vec![(1, 10, false)]]));
        raw.push(record(2, &[]));
        // (The same messages; `view` puts the last record first.)
        let mut by_fates = sent_by_fates(&raw);
        let mut viewed = texts(&view(&raw));
        by_fates.sort();
        viewed.sort();
        prop_assert_eq!(by_fates, viewed);
    }
}

/// What `fates` says is sent, as text (a stub's line for a stubbed result).
fn sent_by_fates(raw: &[Arc<Message>]) -> Vec<String> {
    let fates = fates(raw);
    let mut stubs: std::collections::HashMap<String, String> = Default::default();
    for message in raw {
        if let Message::Compaction(record) = message.as_ref() {
            for stub in &record.stubs {
                stubs.insert(stub.call_id.clone(), stub.line.clone());
            }
        }
    }
    raw.iter()
        .zip(&fates)
        .filter_map(|(message, fate)| match (fate, message.as_ref()) {
            (Fate::Replaced(_), _) => None,
            (Fate::Stubbed, Message::Tool { call_id, .. }) => stubs.get(call_id).cloned(),
            (_, other) => Some(text_of(other)),
        })
        .collect()
}

fn texts(messages: &[Arc<Message>]) -> Vec<String> {
    messages.iter().map(|m| text_of(m)).collect()
}

fn text_of(message: &Message) -> String {
    match message {
        Message::Tool { content, .. } => content.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn fates_name_the_replaced_the_stubbed_and_the_sent() {
    let raw = vec![
        user("one"),
        calls(&[("c1", "bash", "{}")]),
        result("c1", "long output"),
        said("done"),
        record(3, &[("c1", "[stub]")]),
        user("two"),
        record(3, &[]),
    ];
    // The second record keeps the stubbed result, the text after it and
    // the new message; it replaces the first record and the call (which
    // leaves a result without its call: `view` does the same, and the
    // turn machine only cuts where `valid_cuts` allows).
    assert_eq!(
        fates(&raw),
        [
            Fate::Replaced(4),
            Fate::Replaced(6),
            Fate::Stubbed,
            Fate::Sent,
            Fate::Replaced(6),
            Fate::Sent,
            Fate::Sent,
        ]
    );
}
