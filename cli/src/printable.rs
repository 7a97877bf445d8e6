//! Text for a terminal: what a file, a command, a model or an MCP server
//! wrote, with its control characters made visible. A terminal obeys escape
//! sequences in what it prints (colours, cursor moves, a new window title,
//! on some terminals the clipboard), so text mode never passes one through:
//! every control character but newline and tab is shown as a `\xNN`
//! escape. Carriage returns go too: one could hide the start of a line.
//! The JSON formats need none of this; they escape control characters as
//! JSON does.

use std::borrow::Cow;

/// `text` with every control character but `\n` and `\t` written as `\xNN`.
/// Stateless per character, so streamed pieces can be filtered one by one
/// whatever splits an escape sequence.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(shown_escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if shown_escaped(c) {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// C0 controls, DEL and the C1 controls (`U+0080`–`U+009F`, among them the
/// single-character CSI), less newline and tab.
fn shown_escaped(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests;
