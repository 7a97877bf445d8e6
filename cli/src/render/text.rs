//! Short text forms the views share: a failure's category, the first line
//! of a message, a tool's output cut to some lines, arguments on one line.

use serde_json::Value;

use super::{VERBOSE_TOOL_OUTPUT_LINES, count};

pub(super) fn category_name(category: cadre_runtime::protocol::FailureCategory) -> &'static str {
    use cadre_runtime::protocol::FailureCategory;
    match category {
        FailureCategory::Infrastructure => "infrastructure",
        FailureCategory::Agent => "agent",
        FailureCategory::Cancelled => "cancelled",
        FailureCategory::PausedByDenials => "paused_by_denials",
    }
}

/// The first non-blank line, cut at 160 characters, with `…` when there is
/// more.
pub(super) fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let more = text.lines().filter(|l| !l.trim().is_empty()).count() > 1;
    let mut shown: String = line.chars().take(160).collect();
    if more || line.chars().count() > 160 {
        shown.push_str(" …");
    }
    shown
}

/// The first `max` non-blank lines of a tool's output, each cut at 160
/// characters, the later ones indented under the first, and how many more
/// there are.
pub(super) fn some_lines(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut shown = String::new();
    for (n, line) in lines.iter().take(max).enumerate() {
        if n > 0 {
            shown.push_str("\n      ");
        }
        shown.extend(line.chars().take(160));
        if line.chars().count() > 160 {
            shown.push_str(" …");
        }
    }
    if lines.len() > max {
        let more = count((lines.len() - max) as u64, "more line");
        shown.push_str(&format!("\n      … {more}"));
        if max < VERBOSE_TOOL_OUTPUT_LINES {
            shown.push_str(" (-v shows more)");
        }
    }
    shown
}

/// Arguments on one line, long strings shortened.
pub(crate) fn brief_arguments(arguments: &Value) -> String {
    fn shorten(value: &Value) -> Value {
        match value {
            Value::String(s) if s.chars().count() > 60 => {
                Value::String(format!("{}…", s.chars().take(60).collect::<String>()))
            }
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), shorten(v))).collect())
            }
            other => other.clone(),
        }
    }
    shorten(arguments).to_string()
}
