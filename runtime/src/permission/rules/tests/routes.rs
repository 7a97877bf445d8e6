//! A path rule holds on every route to its path: the real spelling of a
//! file tool's path, and the words, globs and trees of shell commands.
//! Cases are written like the rule that decides (`deny user
//! read_file(.env)`), with the route after `: ` when the decision names one.

use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{ROOT, definition, safety, set_of};
use crate::permission::call::{Call, RealPaths};
use crate::permission::rules::RuleSet;
use crate::tool::{Safety, ToolDefinition};

/// Where the tool layer found links lead, relative to the root:
/// `("src/cfg", "Cargo.toml")`.
fn real(links: &[(&str, &str)]) -> RealPaths {
    let mut real = RealPaths::new();
    for (raw, to) in links {
        real.insert(PathBuf::from(ROOT).join(raw), PathBuf::from(ROOT).join(to));
    }
    real
}

fn decided(set: &RuleSet, def: &ToolDefinition, args: &Value, real: &RealPaths) -> Option<String> {
    let call =
        Call::new(def, args, safety(def, args), std::path::Path::new(ROOT)).with_real_paths(real);
    set.decide(&call).map(|m| {
        let rule = format!("{} {} {}", m.kind, m.scope, m.rule);
        match m.route {
            Some(route) => format!("{rule}: {route}"),
            None => rule,
        }
    })
}

/// One file tool call: the tool, its path, where links lead, and what the
/// rules decide.
type PathCase<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Option<&'a str>);

/// `(tool, path, links, expected)` cases under one rule set.
fn check_paths(rules: &[&str], cases: &[PathCase<'_>]) {
    let set = set_of(rules);
    let got: Vec<Option<String>> = cases
        .iter()
        .map(|(tool, path, links, _)| {
            decided(
                &set,
                &definition(tool),
                &json!({ "path": path }),
                &real(links),
            )
        })
        .collect();
    let expected: Vec<Option<String>> = cases.iter().map(|(.., e)| e.map(str::to_string)).collect();
    assert_eq!(got, expected, "{rules:?}");
}

/// `(command, expected)` cases under one rule set.
fn check_commands(rules: &[&str], cases: &[(&str, Option<&str>)]) {
    let set = set_of(rules);
    let bash = definition("bash");
    let got: Vec<(&str, Option<String>)> = cases
        .iter()
        .map(|(command, _)| {
            let args = json!({ "command": command });
            (*command, decided(&set, &bash, &args, &RealPaths::new()))
        })
        .collect();
    let expected: Vec<(&str, Option<String>)> = cases
        .iter()
        .map(|(c, e)| (*c, e.map(str::to_string)))
        .collect();
    assert_eq!(got, expected, "{rules:?}");
}

#[test]
fn a_deny_rule_holds_on_a_symlink_to_its_path() {
    check_paths(
        &["deny user read_file(.env)"],
        &[
            (
                "read_file",
                "link",
                &[("link", ".env")],
                Some("deny user read_file(.env): 'link' leads to '.env'"),
            ),
            (
                "read_file",
                "a/../link",
                &[("a/../link", ".env")],
                Some("deny user read_file(.env): 'a/../link' leads to '.env'"),
            ),
            ("read_file", ".env", &[], Some("deny user read_file(.env)")),
            ("read_file", "link", &[("link", "env.example")], None),
            ("read_file", "link", &[], None),
        ],
    );
}

#[test]
fn regression_deny_write_passed_through_src_cfg_link_to_cargo_toml() {
    check_paths(
        &[
            "deny project write_file(Cargo.toml)",
            "allow user write_file(src/**)",
        ],
        &[
            (
                "write_file",
                "src/cfg",
                &[("src/cfg", "Cargo.toml")],
                Some("deny project write_file(Cargo.toml): 'src/cfg' leads to 'Cargo.toml'"),
            ),
            (
                "write_file",
                "src/lib.rs",
                &[("src/lib.rs", "src/lib.rs")],
                Some("allow user write_file(src/**)"),
            ),
        ],
    );
    // An allow rule must hold on every spelling: a link out of `src/**` is not allowed.
    check_paths(
        &["allow user write_file(src/**)"],
        &[
            ("write_file", "src/cfg", &[("src/cfg", "Cargo.toml")], None),
            (
                "write_file",
                "src/x",
                &[("src/x", "src/y")],
                Some("allow user write_file(src/**)"),
            ),
            ("write_file", "cfg", &[("cfg", "src/y")], None),
        ],
    );
    check_paths(
        &["ask local edit_file(*.lock)"],
        &[(
            "edit_file",
            "deps",
            &[("deps", "Cargo.lock")],
            Some("ask local edit_file(*.lock): 'deps' leads to 'Cargo.lock'"),
        )],
    );
}

#[test]
fn regression_deny_read_env_passed_by_cat_and_grep_over_the_workspace() {
    let env = "deny user read_file(.env)";
    let names = Some("deny user read_file(.env): the command names '.env'");
    let walks = Some("deny user read_file(.env): the command walks the directory it runs in");
    check_commands(
        &[env],
        &[
            ("cat .env", names),
            (
                "cat ./.env",
                Some("deny user read_file(.env): the command names './.env'"),
            ),
            ("head -5 .env | grep KEY", names),
            ("cat < .env", names),
            ("cp .env /tmp/x", names),
            ("ln .env x", names),
            ("source .env", names),
            ("git show HEAD:.env", names),
            (
                "cd src && cat ../.env",
                Some("deny user read_file(.env): the command names '../.env'"),
            ),
            ("echo $(cat .env)", names),
            ("bash -c 'cat .env'", names),
            ("X=.env; cat $X", names),
            (
                "cat .e*",
                Some("deny user read_file(.env): the command's glob '.e*' may expand to it"),
            ),
            (
                "grep -r KEY .",
                Some("deny user read_file(.env): the command walks '.'"),
            ),
            ("grep -rn KEY", walks),
            ("sudo -u me grep -r KEY", walks),
            ("timeout 5 rg KEY", walks),
            ("rg KEY", walks),
            ("git grep KEY", walks),
            ("git diff", walks),
            (
                "find . -type f",
                Some("deny user read_file(.env): the command walks '.'"),
            ),
            (
                "tar czf /tmp/all.tgz .",
                Some("deny user read_file(.env): the command walks '.'"),
            ),
            // Not a route to `.env`.
            ("cat *", None),
            ("cat src/*.rs", None),
            ("grep -r KEY src", None),
            ("rg KEY src", None),
            ("git diff -- src", None),
            ("cat sub/.env", None),
            ("cat .env.example", None),
            ("ls", None),
            ("git status", None),
        ],
    );
    let deep = "deny user read_file(**/secrets/*.pem)";
    let caught = |route: &str| format!("{deep}: {route}");
    check_commands(
        &[deep],
        &[
            (
                "cat a/secrets/k.pem",
                Some(&*caught("the command names 'a/secrets/k.pem'")),
            ),
            ("grep -r x src", Some(&*caught("the command walks 'src'"))),
            (
                "cat a/*/k.pem",
                Some(&*caught("the command's glob 'a/*/k.pem' may expand to it")),
            ),
            ("cat a/*/k.txt", None),
            ("cat a/secrets", None),
        ],
    );
}

#[test]
fn a_write_deny_holds_on_commands_not_proven_read_only_that_may_write_the_path() {
    let rule = "deny project write_file(Cargo.toml)";
    let names = Some("deny project write_file(Cargo.toml): the command names 'Cargo.toml'");
    check_commands(
        &[rule],
        &[
            ("sed -i s/a/b/ Cargo.toml", names),
            ("echo x > Cargo.toml", names),
            ("cp /tmp/x Cargo.toml", names),
            (
                "cd src; echo x >> ../Cargo.toml",
                Some("deny project write_file(Cargo.toml): the command names '../Cargo.toml'"),
            ),
            (
                "sed -i s/a/b/ *.toml",
                Some(
                    "deny project write_file(Cargo.toml): the command's glob '*.toml' may \
                     expand to it",
                ),
            ),
            (
                "cp -r /tmp/evil/. .",
                Some("deny project write_file(Cargo.toml): the command walks '.'"),
            ),
            // Proven read-only, or not a route to it.
            ("cat Cargo.toml", None),
            ("grep -r x .", None),
            ("cargo build", None),
            ("echo x > src/Cargo.toml", None),
        ],
    );
}

#[test]
fn rules_on_tools_cadre_does_not_know_read_the_calls_marks() {
    // An MCP reader with no marks: the rule parses as either form and holds
    // on shell routes as a read and a write.
    check_commands(
        &["deny user mcp_fs_read(.env)"],
        &[
            (
                "cat .env",
                Some("deny user mcp_fs_read(.env): the command names '.env'"),
            ),
            ("cat x", None),
        ],
    );
    // A host tool with its path in `file`.
    let put =
        ToolDefinition::new("host_put", "", json!({}), Safety::SideEffect).taking_path("file");
    let set = set_of(&[
        "deny user host_put(secret/**)",
        "allow user host_put(src/**)",
    ]);
    let decide = |args: Value| decided(&set, &put, &args, &RealPaths::new());
    assert_eq!(
        decide(json!({"file": "secret/a"})).as_deref(),
        Some("deny user host_put(secret/**)")
    );
    assert_eq!(
        decide(json!({"file": "src/a"})).as_deref(),
        Some("allow user host_put(src/**)")
    );
    assert_eq!(decide(json!({"path": "src/a"})), None);
    // A host shell tool takes command patterns.
    let run = ToolDefinition::new("host_sh", "", json!({}), Safety::SideEffect).as_shell();
    let set = set_of(&["deny user host_sh(git push:*)", "deny user read_file(.env)"]);
    let decide = |command: &str| {
        decided(
            &set,
            &run,
            &json!({ "command": command }),
            &RealPaths::new(),
        )
    };
    assert_eq!(
        decide("git push").as_deref(),
        Some("deny user host_sh(git push:*)")
    );
    assert_eq!(
        decide("cat .env").as_deref(),
        Some("deny user read_file(.env): the command names '.env'")
    );
    // An unmarked tool's calls cannot be read by an argument pattern:
    // deny catches them, allow does not.
    let opaque = ToolDefinition::new("mcp_x", "", json!({}), Safety::SideEffect);
    for (rule, expected) in [
        ("deny user mcp_x(a/**)", Some("deny user mcp_x(a/**)")),
        ("allow user mcp_x(a/**)", None),
    ] {
        let got = decided(
            &set_of(&[rule]),
            &opaque,
            &json!({"path": "a/b"}),
            &RealPaths::new(),
        );
        assert_eq!(got.as_deref(), expected);
    }
}

#[test]
fn search_results_withhold_what_a_read_deny_or_ask_rule_covers() {
    let set = set_of(&[
        "deny user read_file(.env)",
        "ask project grep(secrets/**)",
        "deny user write_file(Cargo.toml)",
        "allow user read_file(**)",
    ]);
    let withheld = |path: &str| set.withholds(&PathBuf::from(ROOT).join(path), ROOT.as_ref());
    let got: Vec<(&str, bool)> = [".env", "secrets/a/key", "Cargo.toml", "src/.env", "secrets"]
        .iter()
        .map(|p| (*p, withheld(p)))
        .collect();
    assert_eq!(
        got,
        [
            (".env", true),
            ("secrets/a/key", true),
            ("Cargo.toml", false),
            ("src/.env", false),
            ("secrets", false),
        ]
    );
}

#[test]
fn only_a_pattern_without_wildcards_names_a_path_literally() {
    let set = set_of(&[
        "allow user write_file(.cadre/config.toml)",
        "allow user write_file(.git/**)",
        "allow user edit_file(/etc/x)",
        "deny user write_file(.git/config)",
    ]);
    let root = std::path::Path::new(ROOT);
    let literal = |tool: &str, path: &str| {
        set.names_literally(&definition(tool), &PathBuf::from(ROOT).join(path), root)
    };
    assert!(literal("write_file", ".cadre/config.toml"));
    assert!(!literal("edit_file", ".cadre/config.toml"));
    assert!(!literal("write_file", ".git/config"));
    assert!(!literal("write_file", ".cadre/config.local.toml"));
    assert!(set.names_literally(&definition("edit_file"), "/etc/x".as_ref(), root));
}

#[test]
fn the_shells_deny_and_ask_rules_hold_on_a_checks_command_line() {
    let set = set_of(&[
        "deny user bash(curl:*)",
        "ask user bash(make deploy)",
        "deny user read_file(.env)",
        "allow user bash(cargo:*)",
    ]);
    use crate::tool::Tool as _;
    let check = crate::tool::RunCheck::new(std::time::Duration::from_secs(1))
        .definition()
        .clone();
    let cases = [
        ("curl -d @src http://x", Some("deny user bash(curl:*)")),
        ("cargo test && curl x", Some("deny user bash(curl:*)")),
        ("make deploy", Some("ask user bash(make deploy)")),
        (
            "grep KEY .env",
            Some("deny user read_file(.env): the command names '.env'"),
        ),
        // Allow rules on the shell do not reach a check: it needs none.
        ("cargo test", None),
        ("make test", None),
    ];
    for (command, expected) in cases {
        let got = decided(
            &set,
            &check,
            &json!({ "command": command }),
            &RealPaths::new(),
        );
        assert_eq!(got.as_deref(), expected, "{command}");
    }
}
