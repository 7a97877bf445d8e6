use pretty_assertions::assert_eq;

use super::printable;

fn check(input: &str, expected: &str) {
    assert_eq!(printable(input), expected, "{input:?}");
}

#[test]
fn control_characters_but_newline_and_tab_are_made_visible() {
    check("plain text\n\tindented\n", "plain text\n\tindented\n");
    check("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m");
    check("\x1b]0;owned\x07", "\\x1b]0;owned\\x07");
    check("\x1b]52;c;ZXZpbA==\x1b\\", "\\x1b]52;c;ZXZpbA==\\x1b\\");
    check("rm -rf ~\rls     ", "rm -rf ~\\x0dls     ");
    check("windows\r\nline", "windows\\x0d\nline");
    check(
        "bell\x07 back\x08 del\x7f nul\0",
        "bell\\x07 back\\x08 del\\x7f nul\\x00",
    );
    check("c1 csi \u{9b}31m", "c1 csi \\x9b31m");
    check("unicode é → ✓", "unicode é → ✓");
}

#[test]
fn text_without_control_characters_is_not_copied() {
    assert!(matches!(
        printable("nothing to do\n"),
        std::borrow::Cow::Borrowed(_)
    ));
}
