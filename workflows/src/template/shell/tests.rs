use std::path::Path;

use proptest::prelude::*;

use super::*;
use crate::template::{ITEM_VAR, Ref, Template};

/// Values full of what a shell would act on.
const NASTY: &[&str] = &[
    "a; touch PWNED",
    "$(touch PWNED)",
    "`touch PWNED`",
    "x\" ; touch PWNED; \"",
    "x' ; touch PWNED; '",
    "it's",
    "'",
    "\"",
    "\\",
    "\\'\\",
    "a\nb\n",
    "*",
    "two words",
    "  spaced  ",
    "",
    "$HOME ${PATH} $1",
    "-n",
    "# not a comment",
    "$'\\x41' \\n",
    "a)b(c",
    "~",
];

/// A command for each place a reference may sit, and what it must print
/// for the value `v`: every command calls `f`, which prints its argument
/// count and its first argument.
fn placements(v: &str) -> Vec<(&'static str, String)> {
    vec![
        ("f {{item}}", v.to_string()),
        ("f x{{item}}y", format!("x{v}y")),
        ("f \"{{item}}\"", v.to_string()),
        ("f \"src/{{item}}.rs\"", format!("src/{v}.rs")),
        ("f '{{item}}'", v.to_string()),
        ("f 'a {{item}} b'", format!("a {v} b")),
        ("f 'it'\\''s {{item}}'", format!("it's {v}")),
        ("f $'a\\t{{item}}\\x41'", format!("a\t{v}A")),
        ("f $'\\'{{item}}'", format!("'{v}")),
        ("f \\{{item}}", v.to_string()),
        ("f \"a\\{{item}}\"", format!("a{v}")),
        ("f $'a\\{{item}}'", format!("a\\{v}")),
        ("f \"$(printf %s {{item}}; printf .)\"", format!("{v}.")),
        (
            "f \"$( (printf %s \"{{item}}\"); printf .)\"",
            format!("{v}."),
        ),
        ("f \"`printf %s {{item}}; printf .`\"", format!("{v}.")),
        ("f {{item}} # and {{item}} ' \"", v.to_string()),
        ("# {{item}}\nf {{item}}", v.to_string()),
        ("f \"{{item}}\"'{{item}}'{{item}}", format!("{v}{v}{v}")),
    ]
}

/// Runs `template` rendered for `value` under real bash in `dir`; what it
/// printed.
fn run(template: &str, value: &str, dir: &Path) -> String {
    let parsed = Template::parse(template).expect("parses");
    let command = parsed.render_shell(|r| {
        assert_eq!(r, &Ref::Item);
        ITEM_VAR.to_string()
    });
    let script = format!("f() {{ printf '%s|%s' \"$#\" \"$1\"; }}\n{command}");
    let out = std::process::Command::new("bash")
        .arg("--noprofile")
        .arg("--norc")
        .arg("-c")
        .arg(&script)
        .current_dir(dir)
        .env(ITEM_VAR, value)
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "{template:?} as {command:?} for {value:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every placement of `value` is one argument holding exactly `value`,
/// and nothing in `value` runs.
fn value_is_taken_literally(value: &str) {
    let dir = tempfile::tempdir().expect("dir");
    // A file for an unquoted `*` to match, were it globbed.
    std::fs::write(dir.path().join("present"), "").expect("file");
    for (template, expected) in placements(value) {
        assert_eq!(
            run(template, value, dir.path()),
            format!("1|{expected}"),
            "{template:?} for {value:?}"
        );
    }
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["present"], "for {value:?}");
}

#[test]
fn a_value_is_one_literal_argument_in_every_quoting() {
    for value in NASTY {
        value_is_taken_literally(value);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn generated_values_are_one_literal_argument_in_every_quoting(
        pieces in prop::collection::vec(
            prop::sample::select(vec![
                "$(touch P)", "`touch Q`", "'", "\"", ";", "\n", "*", " ", "\\",
                "$", "a", "#", "&", "|", "(", ")", "{", "}", "\t", "$'", "~", "${", "!",
            ]),
            0..10,
        )
    ) {
        value_is_taken_literally(&pieces.concat());
    }
}

#[test]
fn the_lexer_knows_the_quoting_at_the_end_of_text() {
    let at = |text: &str| {
        let mut lexer = Lexer::default();
        lexer.feed(text);
        lexer.quoting()
    };
    assert_eq!(at("test -f "), (Quoting::Bare, false));
    assert_eq!(at("test -f \"src/"), (Quoting::Double, false));
    assert_eq!(at("echo 'a"), (Quoting::Single, false));
    assert_eq!(at("echo 'a' \"b\" "), (Quoting::Bare, false));
    assert_eq!(at("echo \\' "), (Quoting::Bare, false));
    assert_eq!(at("echo \"a\\\" "), (Quoting::Double, false));
    assert_eq!(at("echo $'a\\' "), (Quoting::AnsiC, false));
    assert_eq!(at("echo \\"), (Quoting::Bare, true));
    assert_eq!(at("echo \"$(x '"), (Quoting::Single, false));
    assert_eq!(at("echo \"$(x) "), (Quoting::Double, false));
    assert_eq!(at("echo a#b "), (Quoting::Bare, false));
    assert_eq!(at("echo # it's"), (Quoting::Comment, false));
    assert_eq!(at("echo # it's\n"), (Quoting::Bare, false));
    assert_eq!(at("echo `x \""), (Quoting::Double, false));
}

#[test]
fn each_quoting_has_its_expansion() {
    assert_eq!(expansion(Quoting::Bare, false, "V"), "\"${V}\"");
    assert_eq!(expansion(Quoting::Double, false, "V"), "${V}");
    assert_eq!(expansion(Quoting::Single, false, "V"), "'\"${V}\"'");
    assert_eq!(expansion(Quoting::AnsiC, false, "V"), "'\"${V}\"$'");
    assert_eq!(expansion(Quoting::Bare, true, "V"), "\n\"${V}\"");
}
