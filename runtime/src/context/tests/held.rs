//! What an agent holds: the view folded message by message is the view of
//! everything stored, and the trail says what a scan of every stored
//! message says, in bounded memory.

use std::collections::HashMap;

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;
use crate::tool::TodoItem;

/// A generated exchange: rounds of calls to `names[i]` on `paths[j]`,
/// answered (in any order) with an error or not.
fn calling() -> impl Strategy<Value = Vec<Vec<(usize, usize, bool)>>> {
    // (tool, path, failed) per call; rounds of 0..4 calls.
    proptest::collection::vec(
        proptest::collection::vec((0usize..5, 0usize..40, any::<bool>()), 0..4),
        1..60,
    )
}

const NAMES: [&str; 5] = ["bash", "write_file", "edit_file", "todo_write", "read_file"];

fn conversation_of(rounds: Vec<Vec<(usize, usize, bool)>>, reversed: bool) -> Vec<Arc<Message>> {
    let mut out = vec![user("start")];
    let mut n = 0;
    for (round, made) in rounds.into_iter().enumerate() {
        if round % 7 == 6 {
            out.push(user(&format!("message {round}")));
        }
        if made.is_empty() {
            out.push(said("thinking"));
            continue;
        }
        let made: Vec<(String, &str, String, bool)> = made
            .into_iter()
            .map(|(name, path, failed)| {
                n += 1;
                let name = NAMES[name];
                let args = match name {
                    "bash" => format!(r#"{{"command":"make t{path}"}}"#),
                    "todo_write" => {
                        format!(r#"{{"todos":[{{"content":"step {path}","status":"pending"}}]}}"#)
                    }
                    _ => format!(r#"{{"path":"src/f{path}.rs"}}"#),
                };
                (format!("c{n}"), name, args, failed)
            })
            .collect();
        let borrowed: Vec<(&str, &str, &str)> = made
            .iter()
            .map(|(id, name, args, _)| (id.as_str(), *name, args.as_str()))
            .collect();
        out.push(calls(&borrowed));
        let mut answers: Vec<Arc<Message>> = made
            .iter()
            .map(|(id, _, _, failed)| match failed {
                true => result(id, "error (failed): no"),
                false => result(id, "exit code: 0\nok"),
            })
            .collect();
        if reversed {
            answers.reverse();
        }
        out.extend(answers);
    }
    out
}

/// Records at valid cuts of what is sent, the way the turn makes them.
fn compacted(conv: Vec<Arc<Message>>, every: usize, keep_tokens: u64) -> Vec<Arc<Message>> {
    let mut raw = Vec::new();
    for (i, message) in conv.into_iter().enumerate() {
        raw.push(message);
        if i % every == every - 1 {
            let sent = view(&raw);
            let first = usize::from(matches!(
                sent.first().map(AsRef::as_ref),
                Some(Message::Compaction(_))
            ));
            let cut = keep_from(&sent, keep_tokens).max(first);
            let stubbed: Vec<(String, String)> = fit_by_stubs(&sent[cut..], 0, keep_tokens / 2)
                .0
                .into_iter()
                .map(|s| (s.call_id, s.line))
                .collect();
            let stubs: Vec<(&str, &str)> = stubbed
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            if valid_cuts(&sent).contains(&cut) {
                raw.push(record(sent.len() - cut, &stubs));
            }
        }
    }
    raw
}

proptest! {
    #[test]
    fn the_held_conversation_is_the_view_of_every_stored_message(
        rounds in calling(),
        reversed in any::<bool>(),
        every in 3usize..20,
        keep in 0u64..40,
    ) {
        let raw = compacted(conversation_of(rounds, reversed), every, keep);
        let held = Conversation::of(&raw);
        prop_assert_eq!(held.stored(), raw.len());
        let sent = view(&raw);
        prop_assert_eq!(held.view(), sent.as_slice());
        prop_assert_eq!(held.since(0), sent);
        // After the last record, every stored message is sent as it is.
        let last = raw
            .iter()
            .rposition(|m| matches!(m.as_ref(), Message::Compaction(_)))
            .map_or(0, |at| at + 1);
        prop_assert_eq!(held.since(last), raw[last..].to_vec());
        prop_assert_eq!(held.trail(), &Trail::of(&raw));
    }

    #[test]
    fn the_trail_says_what_a_scan_of_every_stored_message_says(
        rounds in calling(),
        reversed in any::<bool>(),
    ) {
        let raw = conversation_of(rounds, reversed);
        let trail = Trail::of(&raw);
        prop_assert_eq!(trail.todo_list().map(<[TodoItem]>::to_vec), todo_list(&raw));
        prop_assert_eq!(trail.changed_files(), changed_files(&raw, CHANGED_FILES));
        prop_assert_eq!(trail.recent_commands(), recent_commands(&raw, RECENT_COMMANDS));
        let latest = raw.iter().rev().find_map(|m| match m.as_ref() {
            Message::User { content } => Some(content.as_str()),
            Message::Assistant { .. } | Message::Tool { .. } | Message::Compaction(_) => None,
        });
        prop_assert_eq!(trail.latest_user(), latest);
    }
}

#[test]
fn the_trail_stays_bounded_however_many_calls_it_sees() {
    let mut trail = Trail::default();
    for n in 0..20_000 {
        let (name, args) = match n % 3 {
            0 => ("bash", format!(r#"{{"command":"make t{n}"}}"#)),
            1 => ("write_file", format!(r#"{{"path":"src/f{n}.rs"}}"#)),
            _ => (
                "todo_write",
                format!(r#"{{"todos":[{{"content":"step {n}","status":"pending"}}]}}"#),
            ),
        };
        let id = format!("c{n}");
        trail.push(&calls(&[(id.as_str(), name, args.as_str())]));
        trail.push(&result(&id, "exit code: 0"));
    }
    assert_eq!(trail.recent_commands().len(), RECENT_COMMANDS);
    assert_eq!(trail.recent_commands()[9], "`make t19998` → exit code: 0");
    assert_eq!(trail.changed_files().len(), CHANGED_FILES);
    assert_eq!(trail.changed_files()[29], "src/f19999.rs");
    assert_eq!(
        trail.todo_list().map(|l| l[0].content.as_str()),
        Some("step 19997")
    );
    // Nothing waits: every call was answered.
    let answered = trail.clone();
    trail.push(&result("c0", "late"));
    assert_eq!(trail, answered);
}

// What the trail replaces: scans of every stored message, kept here as
// the oracle it must agree with.

/// The list the last successful `todo_write` set; `None` when it never ran.
fn todo_list(raw: &[Arc<Message>]) -> Option<Vec<TodoItem>> {
    let answers = answers(raw);
    raw.iter()
        .rev()
        .filter_map(|m| match m.as_ref() {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.iter().rev()),
            Message::User { .. } | Message::Tool { .. } | Message::Compaction(_) => None,
        })
        .flatten()
        .filter(|c| c.name == "todo_write")
        .filter(|c| answers.get(c.id.as_str()).is_some_and(|a| !is_error(a)))
        .find_map(|c| {
            let args: serde_json::Value = serde_json::from_str(&c.arguments).ok()?;
            serde_json::from_value(args.get("todos")?.clone()).ok()
        })
}

/// The last `n` `bash` commands and how they ended, oldest first.
fn recent_commands(raw: &[Arc<Message>], n: usize) -> Vec<String> {
    let answers = answers(raw);
    let mut lines: Vec<String> = raw
        .iter()
        .filter_map(|m| match m.as_ref() {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.iter()),
            Message::User { .. } | Message::Tool { .. } | Message::Compaction(_) => None,
        })
        .flatten()
        .filter(|c| c.name == "bash")
        .map(|c| {
            let command = serde_json::from_str::<serde_json::Value>(&c.arguments)
                .ok()
                .and_then(|v| {
                    v.get("command")
                        .and_then(|s| s.as_str())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| c.arguments.clone());
            let command = crate::tool::truncate_middle(&command.replace('\n', " "), 200);
            let ended = match answers.get(c.id.as_str()) {
                Some(a) if is_error(a) => a.lines().next().unwrap_or("error").to_string(),
                Some(a) => a
                    .lines()
                    .next()
                    .filter(|l| l.starts_with("exit code"))
                    .unwrap_or("ran")
                    .to_string(),
                None => "no result".to_string(),
            };
            format!("`{command}` → {ended}")
        })
        .collect();
    let skip = lines.len().saturating_sub(n);
    lines.drain(..skip);
    lines
}

/// The paths `write_file` and `edit_file` calls changed (answered without
/// an error), each once, the last `n` in the order last changed.
fn changed_files(raw: &[Arc<Message>], n: usize) -> Vec<String> {
    let answers = answers(raw);
    let mut paths: Vec<String> = Vec::new();
    let calls = raw
        .iter()
        .filter_map(|m| match m.as_ref() {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.iter()),
            Message::User { .. } | Message::Tool { .. } | Message::Compaction(_) => None,
        })
        .flatten()
        .filter(|c| c.name == "write_file" || c.name == "edit_file")
        .filter(|c| answers.get(c.id.as_str()).is_some_and(|a| !is_error(a)));
    for call in calls {
        let path = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|v| v.get("path").and_then(|p| p.as_str()).map(str::to_string));
        if let Some(path) = path {
            paths.retain(|p| *p != path);
            paths.push(path);
        }
    }
    let skip = paths.len().saturating_sub(n);
    paths.drain(..skip);
    paths
}

/// Each call's answer, by call id.
fn answers(raw: &[Arc<Message>]) -> HashMap<&str, &str> {
    raw.iter()
        .filter_map(|m| match m.as_ref() {
            Message::Tool { call_id, content } => Some((call_id.as_str(), content.as_str())),
            Message::User { .. } | Message::Assistant { .. } | Message::Compaction(_) => None,
        })
        .collect()
}

/// A result the turn machine wrote for a failed call (`error (code): …`).
fn is_error(answer: &str) -> bool {
    answer.starts_with("error (")
}
