//! Compaction's pure parts: the conversation a request sends, where it may
//! be cut, the fallback's stubs, and the summary request's text.
//!
//! **Invariant:** whatever these functions return, a request never carries
//! a tool result without its call, nor a call without its result: a cut
//! falls only where no call/result pair spans it, and a stub replaces a
//! result's text, never the result.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{Compaction, Stub, estimate, message_bytes, tokens_of};
use crate::message::{Message, ToolCall};
use crate::tool::truncate_middle;

/// The first line of a summary request, so a server (or a test's mock) can
/// tell it from the agent's own requests.
pub const SUMMARY_TAG: &str = "[cadre: compaction request]";

/// The system prompt of a summary request.
pub const SUMMARY_SYSTEM: &str = "You write the hand-over summary of a coding agent's \
     conversation, so the agent can continue the same task with only your summary and its \
     most recent messages. You never call tools; you answer with the summary only.";

/// The most bytes of one tool output a summary request's transcript shows.
const TRANSCRIPT_OUTPUT_BYTES: usize = 1_500;

/// The conversation a request sends, from the stored one: every message,
/// except that a [`Compaction`] replaces what came before it with itself
/// and the last `keep` messages (its stubs applied). Pure and repeatable,
/// so a resume sends what the running session sent.
pub fn view(raw: &[Arc<Message>]) -> Vec<Arc<Message>> {
    let mut out: Vec<Arc<Message>> = Vec::with_capacity(raw.len());
    for message in raw {
        match message.as_ref() {
            Message::Compaction(record) => {
                replace(&mut out, message, record);
            }
            Message::User { .. } | Message::Assistant { .. } | Message::Tool { .. } => {
                out.push(message.clone())
            }
        }
    }
    out
}

/// One step of [`view`]: the record `message` (holding `record`) replaces
/// what `out` holds with itself and the last `keep` messages of it, its
/// stubs applied. Returns how many messages it dropped from the front.
pub(super) fn replace(
    out: &mut Vec<Arc<Message>>,
    message: &Arc<Message>,
    record: &Compaction,
) -> usize {
    let keep = record.keep.min(out.len());
    let dropped = out.len() - keep;
    let kept = out.split_off(dropped);
    let stubs: HashMap<&str, &str> = record
        .stubs
        .iter()
        .map(|s| (s.call_id.as_str(), s.line.as_str()))
        .collect();
    out.clear();
    out.push(message.clone());
    out.extend(kept.into_iter().map(|m| match m.as_ref() {
        Message::Tool { call_id, .. } => match stubs.get(call_id.as_str()) {
            Some(line) => Arc::new(Message::Tool {
                call_id: call_id.clone(),
                content: (*line).to_string(),
            }),
            None => m,
        },
        Message::User { .. } | Message::Assistant { .. } | Message::Compaction(_) => m,
    }));
    dropped
}

/// The indices `i` (from 0 to `view.len()`) where `view[i..]` may be kept
/// alone: no call made before `i` is answered at or after it, and every
/// result at or after `i` answers a call there too.
pub fn valid_cuts(view: &[Arc<Message>]) -> Vec<usize> {
    let len = view.len();
    // `blocked[i]`: cutting at `i` would split a pair (or keep an orphan).
    let mut blocked = vec![false; len + 1];
    let mut made: HashMap<&str, usize> = HashMap::new();
    for (t, message) in view.iter().enumerate() {
        match message.as_ref() {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    made.insert(call.id.as_str(), t);
                }
            }
            Message::Tool { call_id, .. } => {
                let from = made.get(call_id.as_str()).map_or(0, |c| c + 1);
                for cut in blocked.iter_mut().take(t + 1).skip(from) {
                    *cut = true;
                }
            }
            Message::User { .. } | Message::Compaction(_) => {}
        }
    }
    (0..=len).filter(|&i| !blocked[i]).collect()
}

/// Where a model compaction cuts: the first valid cut whose suffix fits in
/// `keep_tokens` (the whole view when it fits, nothing when even the last
/// pair does not).
pub fn keep_from(view: &[Arc<Message>], keep_tokens: u64) -> usize {
    let cuts = valid_cuts(view);
    let mut suffix = vec![0usize; view.len() + 1];
    for i in (0..view.len()).rev() {
        suffix[i] = suffix[i + 1] + message_bytes(&view[i]);
    }
    cuts.into_iter()
        .find(|&i| tokens_of(suffix[i]) <= keep_tokens)
        .unwrap_or(view.len())
}

/// The stubs that bring `view` (plus `fixed` tokens of system prompt and
/// tools) to `target` tokens or under, replacing tool outputs oldest first;
/// `None` when even every output stubbed does not get there (the stubs
/// then are all of them, for a caller that still wants the smallest form).
pub fn fit_by_stubs(view: &[Arc<Message>], fixed: u64, target: u64) -> (Vec<Stub>, bool) {
    let calls: HashMap<&str, &ToolCall> = view
        .iter()
        .filter_map(|m| match m.as_ref() {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.iter()),
            Message::User { .. } | Message::Tool { .. } | Message::Compaction(_) => None,
        })
        .flatten()
        .map(|c| (c.id.as_str(), c))
        .collect();
    let mut total = fixed + estimate(view.iter().map(AsRef::as_ref));
    let mut stubs = Vec::new();
    let mut seen = HashSet::new();
    for message in view {
        if total <= target {
            break;
        }
        let Message::Tool { call_id, content } = message.as_ref() else {
            continue;
        };
        let line = stub_line(calls.get(call_id.as_str()).copied(), content);
        if line.len() >= content.len() || !seen.insert(call_id.clone()) {
            continue;
        }
        total = total.saturating_sub(tokens_of(content.len()) - tokens_of(line.len()));
        stubs.push(Stub {
            call_id: call_id.clone(),
            line,
        });
    }
    (stubs, total <= target)
}

/// The one line that replaces an old output: the call, its exit code when
/// the output states one (`bash`'s first line), and the size dropped.
pub fn stub_line(call: Option<&ToolCall>, content: &str) -> String {
    let named = match call {
        Some(call) => format!("{}({})", call.name, clip(&call.arguments, 160)),
        None => "a tool call".to_string(),
    };
    let exit = content
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("exit code: "))
        .map(|code| format!(", exit code {}", code.trim()))
        .unwrap_or_default();
    format!(
        "[output of {named} removed by compaction{exit}; it was {} bytes]",
        content.len()
    )
}

fn clip(text: &str, max: usize) -> String {
    let line = text.replace('\n', " ");
    if line.len() <= max {
        return line;
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// The conversation as text for a summary request, tool outputs cut to
/// their head and tail and the whole to `max_bytes`: the request carries
/// no tool calls, so it needs no tools and cannot split a pair.
pub fn transcript(view: &[Arc<Message>], max_bytes: usize) -> String {
    let names: HashMap<&str, &str> = view
        .iter()
        .filter_map(|m| match m.as_ref() {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.iter()),
            Message::User { .. } | Message::Tool { .. } | Message::Compaction(_) => None,
        })
        .flatten()
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    let mut text = String::new();
    for message in view {
        match message.as_ref() {
            Message::User { content } => {
                text.push_str("### user\n");
                text.push_str(content);
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                text.push_str("### assistant\n");
                text.push_str(content);
                for call in tool_calls {
                    text.push_str(&format!(
                        "\n(call {}: {})",
                        call.name,
                        clip(&call.arguments, 400)
                    ));
                }
            }
            Message::Tool { call_id, content } => {
                let name = names.get(call_id.as_str()).copied().unwrap_or("tool");
                text.push_str(&format!("### result of {name}\n"));
                text.push_str(&truncate_middle(content, TRANSCRIPT_OUTPUT_BYTES));
            }
            Message::Compaction(record) => {
                text.push_str("### an earlier compaction\n");
                text.push_str(&render_for_summary(record));
            }
        }
        text.push_str("\n\n");
    }
    truncate_middle(&text, max_bytes)
}

fn render_for_summary(record: &Compaction) -> String {
    record.summary.clone().unwrap_or_default()
}

/// What a summary request asks, after the transcript.
pub fn summary_instruction(transcript: &str) -> String {
    format!(
        "{SUMMARY_TAG}\nHere is the conversation so far:\n\n{transcript}\n---\nWrite the \
         hand-over summary of the conversation above for the agent that continues it: what the \
         user asked, decisions made, files read and changed (with paths), commands run and \
         what they showed, what is done, what remains, and the next step. Be concrete and \
         brief: at most 400 words. Do not call tools."
    )
}
