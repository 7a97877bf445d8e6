use pretty_assertions::assert_eq;

use super::*;

fn out(text: &str) -> Piece {
    Piece {
        stream: Stream::Out,
        text: text.into(),
    }
}

fn err(text: &str) -> Piece {
    Piece {
        stream: Stream::Err,
        text: text.into(),
    }
}

/// Pushes the pieces, then ends the held-back line; compares everything
/// that came out, in order.
#[track_caller]
fn check(pieces: Vec<Piece>, expected: Vec<Piece>) {
    let mut lines = WholeLines::default();
    let mut shown: Vec<Piece> = pieces.into_iter().flat_map(|p| lines.push(p)).collect();
    shown.extend(lines.end());
    assert_eq!(shown, expected);
}

#[test]
fn whole_lines_pass_at_once() {
    check(
        vec![err("a\n"), out("b\nc\n")],
        vec![err("a\n"), out("b\nc\n")],
    );
}

#[test]
fn streamed_text_waits_for_the_end_of_its_line() {
    check(
        vec![
            out("Hel"),
            out("lo, wor"),
            out("ld\nand "),
            out("more"),
            out("\n"),
        ],
        vec![out("Hello, world\n"), out("and more\n")],
    );
}

#[test]
fn another_stream_ends_a_streamed_line_first() {
    check(
        vec![out("half a line"), err("  → read_file {}\n"), out("rest")],
        vec![
            out("half a line\n"),
            err("  → read_file {}\n"),
            out("rest\n"),
        ],
    );
}

#[test]
fn nothing_held_back_ends_as_nothing() {
    check(vec![], vec![]);
}
