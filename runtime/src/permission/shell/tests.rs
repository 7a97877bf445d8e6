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

/// What the reader makes of the one word after `X `: its best reading and
/// flags, written `text [expands] [globs] [tilde] [subs=N] [fields=a|b]
/// [opaque: why]`.
fn word_reading(src: &str) -> String {
    let script = match parse(&format!("X {src}")) {
        Ok(script) => script,
        Err(e) => return format!("unparsed: {e}"),
    };
    let Some(word) = script.commands.first().and_then(|c| c.words.get(1)) else {
        return "no word".into();
    };
    let mut out = word.text.clone();
    for (flag, name) in [
        (word.expands, "expands"),
        (word.globs, "globs"),
        (word.tilde, "tilde"),
    ] {
        if flag {
            out.push_str(&format!(" [{name}]"));
        }
    }
    if !word.substitutions.is_empty() {
        out.push_str(&format!(" [subs={}]", word.substitutions.len()));
    }
    if let Some(fields) = &word.fields {
        out.push_str(&format!(" [fields={}]", fields.join("|")));
    }
    if let Some(why) = &word.opaque {
        out.push_str(&format!(" [opaque: {why}]"));
    }
    out
}

fn check_words(cases: &[(&str, &str)]) {
    let got: Vec<(&str, String)> = cases.iter().map(|(s, _)| (*s, word_reading(s))).collect();
    let expected: Vec<(&str, String)> = cases.iter().map(|(s, w)| (*s, w.to_string())).collect();
    pretty_assertions::assert_eq!(got, expected);
}

#[test]
fn every_dollar_form_is_delimited_and_flagged() {
    check_words(&[
        ("$x", "$x [expands]"),
        ("\"${x}\"", "${x} [expands]"),
        ("$1$?$#", "$1$?$# [expands]"),
        (
            "${x:-$(touch F)}",
            "${x:-$(touch F)} [expands] [subs=1] [opaque: a parameter expansion with an operator]",
        ),
        (
            "\"${x:-'}'}\"",
            "${x:-'}'} [expands] [opaque: a parameter expansion with an operator]",
        ),
        (
            "${x:-{a}}b",
            "${x:-{a}}b [expands] [opaque: a parameter expansion with an operator]",
        ),
        (
            "${x@P}",
            "${x@P} [expands] [opaque: a parameter expansion with an operator]",
        ),
        (
            "$((1+$(id)))",
            "$((1+$(id))) [expands] [subs=1] [opaque: arithmetic expansion evaluates variables as expressions, which can run commands]",
        ),
        (
            "$[y]",
            "$[y] [expands] [opaque: arithmetic expansion $[…] evaluates variables as expressions, which can run commands]",
        ),
        ("$'\\x2d\\055\\n'", "--\n [opaque: ANSI-C quoting $'…']"),
        (
            "$\"-o\"",
            "-o [opaque: locale quoting $\"…\", which bash may translate]",
        ),
        ("\"$'x'\"", "$'x'"),
        ("\"a$\"", "a$"),
        ("a$/$:$=", "a$/$:$="),
        ("`echo \\`id\\``", "`…` [subs=1]"),
        ("a<(ls)", "a<(…) [subs=1]"),
    ]);
}

#[test]
fn braces_globs_and_tilde_are_flagged() {
    check_words(&[
        ("{a,b}c", "{a,b}c [globs] [fields=ac|bc]"),
        ("{a,b}{1..2}", "{a,b}{1..2} [globs] [fields=a1|a2|b1|b2]"),
        ("{a{b,c}}", "{a{b,c}} [globs] [fields={ab}|{ac}]"),
        ("{x{a,b}", "{x{a,b} [globs] [fields={xa|{xb]"),
        ("{,a}", "{,a} [globs] [fields=a]"),
        ("{a}", "{a}"),
        ("{}", "{}"),
        ("{1..\"3\"}", "{1..3}"),
        (
            "{\"-o\",F}",
            "{-o,F} [globs] [fields=-o|F] [opaque: brace expansion in a word with quotes, escapes or expansions]",
        ),
        ("{~,x}", "{~,x} [globs] [tilde] [fields=~|x]"),
        ("*.rs", "*.rs [globs]"),
        ("'*.rs'", "*.rs"),
        ("~/x", "~/x [tilde]"),
        ("a=~", "a=~ [tilde]"),
        ("a~", "a~"),
        ("\\~", "~"),
    ]);
}

#[test]
fn assignments_keep_their_kind() {
    let script = parse("A=1 B+=2 C[$(id)]=3 D='x y' ls").expect("parses");
    let command = &script.commands[0];
    let got: Vec<(String, String, Option<String>)> = command
        .assignments
        .iter()
        .map(|(n, v)| (n.clone(), v.text.clone(), v.opaque.clone()))
        .collect();
    pretty_assertions::assert_eq!(
        got,
        [
            ("A".to_string(), "1".to_string(), None),
            (
                "B".to_string(),
                "2".to_string(),
                Some("`+=` appends to the variable".to_string())
            ),
            (
                "C".to_string(),
                "3".to_string(),
                Some("an array subscript is evaluated as arithmetic".to_string())
            ),
            ("D".to_string(), "x y".to_string(), None),
        ]
    );
    assert_eq!(command.program(), Some("ls"));
    assert_eq!(command.assignments[2].1.substitutions.len(), 1);
}

#[test]
fn structure_the_reader_does_not_follow_is_unparsed() {
    for (src, why) in [
        ("ls\\\n-la", "a line continuation"),
        ("echo \"a\\\nb\"", "a line continuation"),
        ("ls &\\\n& pwd", "a line continuation"),
        ("ls {fd}>x", "assigns a descriptor to a variable"),
        ("ls;; x", "a case terminator"),
        ("; ls", "an operator without a command before it"),
        ("ls )", "an unmatched ')'"),
        ("echo $((ls) | wc)", "arithmetic or a subshell"),
        ("cat <<-EOF\nx\nEOF", "a here-document"),
        ("[[ -f x ]]", "the shell keyword '[['"),
    ] {
        let got = parse(src).map(|_| ()).map_err(|e| e.0);
        assert!(
            got.as_ref().is_err_and(|e| e.contains(why)),
            "{src:?}: {got:?}, wanted {why:?}"
        );
    }
    assert!(parse("ls \\\n -la").is_ok(), "a continuation between words");
    assert!(
        parse("ls &&\nls |\nwc").is_ok(),
        "a newline after an operator"
    );
    let deep = format!("echo {}x{}", "$(".repeat(40), ")".repeat(40));
    assert!(parse(&deep).is_err_and(|e| e.0.contains("nested too deeply")));
    let deep = format!("echo {}x{}", "${x:-".repeat(40), "}".repeat(40));
    assert!(parse(&deep).is_err_and(|e| e.0.contains("nested too deeply")));
}

#[test]
fn expanded_words_are_what_bash_hands_on() {
    let script = parse("git {push,x} pu{s,}h {a..b}").expect("parses");
    let words: Vec<String> = script.commands[0]
        .expanded_words()
        .into_iter()
        .map(|w| w.text)
        .collect();
    assert_eq!(words, ["git", "push", "x", "push", "puh", "a", "b"]);
}

#[test]
fn quoted_from_is_a_byte_offset_into_the_text() {
    let script = parse("é'x' A=é\"b\" ls").expect("parses");
    assert_eq!(script.commands[0].words[0].quoted_from, Some(2));
    let script = parse("A=é\"b\" ls").expect("parses");
    let (_, value) = &script.commands[0].assignments[0];
    assert_eq!((value.text.as_str(), value.quoted_from), ("éb", Some(2)));
}

/// Inside double quotes bash's parser read `"$$(x"` as `$` and an
/// unterminated command substitution (the line did not run), where the
/// reader saw `$$` and a plain `(x`: the argv oracle found it.
#[test]
fn double_dollar_paren_opened_a_command_substitution_in_bash() {
    for src in ["echo \"$$(x\"", "echo ${x:-$$(echo })}", "echo $$(id)"] {
        let got = parse(src).map(|_| ()).map_err(|e| e.0);
        assert!(
            got.as_ref().is_err_and(|e| e.contains("'$$('")),
            "{src:?}: {got:?}"
        );
    }
    check_words(&[
        ("\"$$\"", "$$ [expands]"),
        ("$$'x'", "$$x [expands]"),
        ("\"$$[x\"", "$$[x [expands]"),
    ]);
}
