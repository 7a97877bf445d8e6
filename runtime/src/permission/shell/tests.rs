use super::*;

/// Each simple command as its words, or the reason it did not parse.
fn shape(src: &str) -> Result<Vec<Vec<String>>, String> {
    parse(src)
        .map(|s| {
            s.all_commands()
                .iter()
                .map(|c| c.words.iter().map(|w| w.text.clone()).collect())
                .collect()
        })
        .map_err(|e| e.0)
}

fn check(src: &str, expected: &[&[&str]]) {
    let expected: Vec<Vec<String>> = expected
        .iter()
        .map(|c| c.iter().map(|w| w.to_string()).collect())
        .collect();
    assert_eq!(shape(src), Ok(expected), "{src}");
}

#[test]
fn words_quotes_and_operators() {
    check("ls -la", &[&["ls", "-la"]]);
    check("echo 'a | b' \"c && d\"", &[&["echo", "a | b", "c && d"]]);
    check(
        "a|b && c || d; e & f",
        &[&["a"], &["b"], &["c"], &["d"], &["e"], &["f"]],
    );
    check("echo a\\ b", &[&["echo", "a b"]]);
    check(
        "echo $(rm x) `touch y`",
        &[&["echo", "$(…)", "`…`"], &["rm", "x"], &["touch", "y"]],
    );
    check("cat <(git log)", &[&["cat", "<(…)"], &["git", "log"]]);
    check("FOO=1 git push", &[&["git", "push"]]);
    check("grep -c x f 2>/dev/null", &[&["grep", "-c", "x", "f"]]);
    check("ls # a comment; rm -rf /", &[&["ls"]]);
}

#[test]
fn joins_redirects_and_assignments_are_recorded() {
    let script = parse("FOO=1 BAR=\"x y\" cmd > out 2>&1 &").expect("parses");
    let command = &script.commands[0];
    let names: Vec<&str> = command
        .assignments
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["FOO", "BAR"]);
    let ops: Vec<(&str, Option<u32>, &str)> = command
        .redirects
        .iter()
        .map(|r| (r.op.as_str(), r.fd, r.target.text.as_str()))
        .collect();
    assert_eq!(ops, [(">", None, "out"), (">&", Some(2), "1")]);
    assert_eq!(script.joins, [Join::Background]);
    assert!(!command.redirects[0].is_harmless());
    assert!(command.redirects[1].is_harmless());
}

#[test]
fn what_cannot_be_proven_is_unparsed() {
    for src in [
        "(cd x && rm y)",
        "if true; then rm x; fi",
        "cat <<EOF\nx\nEOF",
        "echo 'open",
        "f() { rm x; }",
        "a &&",
        "| b",
    ] {
        assert!(parse(src).is_err(), "{src} parsed");
    }
    assert!(parse("'if' x").is_ok(), "a quoted keyword is a word");
}

#[test]
fn expansions_and_globs_are_flagged() {
    let script = parse("find $DIR *.rs {a,b} \"$x\" '$y'").expect("parses");
    let flags: Vec<(bool, bool)> = script.commands[0]
        .words
        .iter()
        .map(|w| (w.expands, w.globs))
        .collect();
    assert_eq!(
        flags,
        [
            (false, false),
            (true, false),
            (false, true),
            (false, true),
            (true, false),
            (false, false)
        ]
    );
}
