use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::tool::{Safety, builtin_definitions};

fn call_matches(matcher: Option<&str>, tool: &str, args: &Value) -> bool {
    let def = builtin_definitions()
        .iter()
        .find(|d| d.name == tool)
        .expect("a built-in tool");
    let call = Call::new(def, args, Safety::SideEffect, Path::new("/ws"));
    matches(matcher, &call).expect("a matcher")
}

fn check(matcher: Option<&str>, cases: &[(&str, Value, bool)]) {
    let got: Vec<(String, bool)> = cases
        .iter()
        .map(|(tool, args, _)| (format!("{tool} {args}"), call_matches(matcher, tool, args)))
        .collect();
    let want: Vec<(String, bool)> = cases
        .iter()
        .map(|(tool, args, m)| (format!("{tool} {args}"), *m))
        .collect();
    assert_eq!(got, want, "{matcher:?}");
}

#[test]
fn no_matcher_or_a_star_matches_every_call() {
    for matcher in [None, Some("*"), Some(" ")] {
        check(
            matcher,
            &[
                ("bash", json!({"command": "ls"}), true),
                ("read_file", json!({"path": "a"}), true),
            ],
        );
    }
}

#[test]
fn a_tool_name() {
    check(
        Some("bash"),
        &[
            ("bash", json!({"command": "ls"}), true),
            ("write_file", json!({"path": "a", "content": ""}), false),
        ],
    );
}

#[test]
fn a_path_rule_catches_every_spelling_and_route() {
    check(
        Some("write_file(migrations/**)"),
        &[
            (
                "write_file",
                json!({"path": "migrations/001.sql", "content": ""}),
                true,
            ),
            (
                "write_file",
                json!({"path": "./migrations/../migrations/2.sql", "content": ""}),
                true,
            ),
            (
                "write_file",
                json!({"path": "src/main.rs", "content": ""}),
                false,
            ),
        ],
    );
    check(
        Some("edit_file(migrations/**)"),
        &[(
            "edit_file",
            json!({"path": "migrations/1.sql", "old_string": "a", "new_string": "b"}),
            true,
        )],
    );
}

#[test]
fn a_command_rule() {
    check(
        Some("bash(cargo test:*)"),
        &[
            ("bash", json!({"command": "cargo test -p x"}), true),
            ("bash", json!({"command": "cd a && cargo test"}), true),
            ("bash", json!({"command": "cargo build"}), false),
        ],
    );
}

#[test]
fn a_matcher_that_is_not_a_rule_is_an_error() {
    let def = &builtin_definitions()[0];
    let args = json!({"path": "a"});
    let call = Call::new(def, &args, Safety::ReadOnly, Path::new("/ws"));
    assert!(matches(Some("bash(unclosed"), &call).is_err());
}
