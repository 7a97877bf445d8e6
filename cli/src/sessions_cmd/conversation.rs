//! A stored conversation as `cadre sessions show` lists it: one line per
//! message, each compaction as a marker. By default the messages a
//! compaction replaced are one line saying how many; `--full` lists them
//! too, marked, since they stay stored (CX4).

use std::sync::Arc;

use cadre_runtime::context::{Fate, fates};
use cadre_runtime::message::Message;

use crate::printable::printable;

/// The lines listing `conversation`; `full` lists what compactions replaced.
pub fn lines(conversation: &[Arc<Message>], full: bool) -> Vec<String> {
    let fates = fates(conversation);
    let mut lines = Vec::new();
    let mut hidden = 0;
    for (at, (message, fate)) in conversation.iter().zip(&fates).enumerate() {
        let replaced = matches!(fate, Fate::Replaced(_));
        if replaced && !full {
            hidden += 1;
            continue;
        }
        if hidden > 0 {
            lines.push(format!(
                "  ⋯ {hidden} earlier message{} replaced by a compaction, still stored (--full lists them)",
                if hidden == 1 { "" } else { "s" }
            ));
            hidden = 0;
        }
        let mark = match fate {
            Fate::Sent => "",
            Fate::Stubbed => " (sent as a stub)",
            Fate::Replaced(_) => " (replaced)",
        };
        lines.push(format!("  #{at:<4} {}{mark}", one_line(message)));
    }
    lines
}

/// A message on one line: who, and the start of what.
fn one_line(message: &Message) -> String {
    let (who, text) = match message {
        Message::User { content } => ("user", content.clone()),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let calls: Vec<String> = tool_calls
                .iter()
                .map(|c| format!("→ {} {}", c.name, c.arguments))
                .collect();
            let text = [content.trim().to_string(), calls.join(" ")]
                .into_iter()
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            ("assistant", text)
        }
        Message::Tool { call_id, content } => {
            return format!("tool      {call_id}: {}", start(content));
        }
        Message::Compaction(record) => {
            let summary = record
                .summary
                .as_deref()
                .map(|s| format!(": {}", start(s)))
                .unwrap_or_default();
            return format!(
                "── compaction ({}, about {} → {} tokens, keeps {} message{}){summary}",
                record.kind.as_str(),
                record.tokens_before,
                record.tokens_after,
                record.keep,
                if record.keep == 1 { "" } else { "s" }
            );
        }
    };
    format!("{who:<9} {}", start(&text))
}

/// The first non-blank line, cut at 100 characters, printable.
fn start(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut shown: String = line.chars().take(100).collect();
    if line.chars().count() > 100 || text.trim().lines().count() > 1 {
        shown.push_str(" …");
    }
    printable(&shown).to_string()
}
