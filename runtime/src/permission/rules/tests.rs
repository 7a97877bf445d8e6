mod routes;

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::permission::call::Call;

const ROOT: &str = "/ws/proj";

/// Parses `"kind scope rule text"`, the form cases are written in.
fn written(line: &str) -> (RuleKind, Scope, &str) {
    let mut parts = line.splitn(3, ' ');
    let kind = match parts.next() {
        Some("allow") => RuleKind::Allow,
        Some("ask") => RuleKind::Ask,
        Some("deny") => RuleKind::Deny,
        other => panic!("no kind in {line:?}: {other:?}"),
    };
    let scope = match parts.next() {
        Some("user") => Scope::User,
        Some("project") => Scope::Project,
        Some("local") => Scope::Local,
        Some("session") => Scope::Session,
        other => panic!("no scope in {line:?}: {other:?}"),
    };
    (kind, scope, parts.next().unwrap_or_default())
}

pub(super) fn set_of(rules: &[&str]) -> RuleSet {
    let mut set = RuleSet::new();
    for line in rules {
        let (kind, scope, text) = written(line);
        set.add(kind, scope, text).unwrap_or_else(|e| panic!("{e}"));
    }
    set
}

/// The tool named `tool`: a built-in, or an unmarked tool (as an MCP tool
/// with no path argument would be).
pub(super) fn definition(tool: &str) -> ToolDefinition {
    crate::tool::builtin_definitions()
        .iter()
        .find(|def| def.name == tool)
        .cloned()
        .unwrap_or_else(|| ToolDefinition::new(tool, "", json!({}), Safety::SideEffect))
}

/// The call's safety as the runner classifies it.
pub(super) fn safety(def: &ToolDefinition, args: &Value) -> Safety {
    match args.get("command").and_then(Value::as_str) {
        Some(line) if def.shell => crate::permission::classify::classify_command(line).safety,
        _ => def.safety,
    }
}

/// The one check: what `set` decides for the call, written like a rule
/// (`"deny project bash(git push:*)"`), or `None`.
fn check_set(set: &RuleSet, tool: &str, args: &str, expected: Option<&str>) {
    let args: Value = serde_json::from_str(args).expect("arguments are JSON");
    let def = definition(tool);
    let call = Call::new(&def, &args, safety(&def, &args), Path::new(ROOT));
    let got = set
        .decide(&call)
        .map(|m| format!("{} {} {}", m.kind, m.scope, m.rule));
    assert_eq!(got.as_deref(), expected, "{tool} {args}");
}

fn check(rules: &[&str], tool: &str, args: &str, expected: Option<&str>) {
    check_set(&set_of(rules), tool, args, expected);
}

fn bash(rules: &[&str], command: &str, expected: Option<&str>) {
    check(
        rules,
        "bash",
        &json!({ "command": command }).to_string(),
        expected,
    );
}

fn file(rules: &[&str], tool: &str, path: &str, expected: Option<&str>) {
    check(rules, tool, &json!({ "path": path }).to_string(), expected);
}

fn check_error(text: &str, expected: &str) {
    let err = Rule::parse(RuleKind::Deny, Scope::User, text).expect_err(text);
    assert_eq!(err.to_string(), expected);
}

#[test]
fn tool_name_globs() {
    let mcp = ["allow user mcp_*"];
    check(&mcp, "mcp_github_search", "{}", Some("allow user mcp_*"));
    check(&mcp, "mcp_", "{}", Some("allow user mcp_*"));
    check(&mcp, "read_file", "{}", None);
    let every = ["deny user *"];
    check(&every, "todo_write", "{}", Some("deny user *"));
    bash(&every, "ls", Some("deny user *"));
    let middle = ["ask local mcp_*_delete"];
    check(
        &middle,
        "mcp_fs_delete",
        "{}",
        Some("ask local mcp_*_delete"),
    );
    check(&middle, "mcp_fs_deleted", "{}", None);
    let exact = ["allow project read_file"];
    file(&exact, "read_file", "x", Some("allow project read_file"));
    check(&exact, "read_file_extra", "{}", None);
    check(
        &["allow user todo_write(*)"],
        "todo_write",
        r#"{"items":[]}"#,
        Some("allow user todo_write(*)"),
    );
    bash(
        &["allow user bash"],
        "echo $(rm x)",
        Some("allow user bash"),
    );
    bash(
        &["allow user bash(*)"],
        "if x; then y; fi",
        Some("allow user bash(*)"),
    );
}

#[test]
fn bash_prefix_exact_and_word_boundary() {
    let push = ["deny project bash(git push:*)"];
    let denied = Some("deny project bash(git push:*)");
    bash(&push, "git push origin main", denied);
    bash(&push, "git push", denied);
    bash(&push, "git   push   --force", denied);
    bash(&push, "git \"push\" origin", denied);
    bash(&push, "git pushx", None);
    bash(&push, "git pull", None);
    bash(&push, "git", None);
    bash(&push, "echo git push", None);
    let exact = ["allow user bash(npm run test)"];
    bash(
        &exact,
        "npm run test",
        Some("allow user bash(npm run test)"),
    );
    bash(&exact, "npm run test -- --watch", None);
    bash(&exact, "npm run", None);
    let prefix = ["allow user bash(npm run test:*)"];
    bash(
        &prefix,
        "npm run test -- --watch",
        Some("allow user bash(npm run test:*)"),
    );
    bash(&prefix, "npm run testing", None);
    // Words are compared as written, not as options would be understood.
    bash(&["deny user bash(rm -rf:*)"], "rm -r -f build", None);
}

#[test]
fn compound_commands_deny_on_any_allow_on_every() {
    let push = ["deny user bash(git push:*)"];
    let denied = Some("deny user bash(git push:*)");
    bash(&push, "ls && git push", denied);
    bash(&push, "cargo test; git push --force", denied);
    bash(&push, "echo hi | git push", denied);
    bash(&push, "git status || git push &", denied);
    let status = ["allow user bash(git status:*)"];
    bash(&status, "git status && rm -rf x", None);
    // A segment no rule names is covered when it is read-only on its own.
    bash(
        &status,
        "git status | head",
        Some("allow user bash(git status:*)"),
    );
    bash(
        &status,
        "git status; git status -s",
        Some("allow user bash(git status:*)"),
    );
    let two = ["allow user bash(git status:*)", "allow project bash(ls:*)"];
    bash(
        &two,
        "git status && ls -la",
        Some("allow project bash(ls:*)"),
    );
    bash(&two, "git status", Some("allow user bash(git status:*)"));
    bash(
        &two,
        "git status && ls && pwd",
        Some("allow project bash(ls:*)"),
    );
    bash(&two, "git status && ls && touch x", None);
}

#[test]
fn an_allow_rule_covers_a_pipeline_into_read_only_programs_and_names_what_it_does_not() {
    let cargo = ["allow user bash(cargo test:*)"];
    let allowed = Some("allow user bash(cargo test:*)");
    for line in [
        "cargo test 2>&1 | tail -15",
        "cargo test -q 2>&1 | grep -E 'FAILED|passed' | head -20",
        "cargo test && echo done",
        "cd sub && cargo test | wc -l",
    ] {
        bash(&cargo, line, allowed);
    }
    // Read-only segments alone are the floor's to allow, not a rule's; and
    // a segment that writes, or git after a cd, needs a rule of its own.
    for line in [
        "tail -15 log",
        "cargo test | tee out.txt",
        "cargo test > out.txt | cat",
        "cargo test | sh",
        "cargo test; rm -rf target",
        "cargo test $(cat x) | tail",
        "cd vendor && cargo test && git status",
    ] {
        bash(&cargo, line, None);
    }
    let uncovered = |line: &str| {
        let set = set_of(&cargo);
        let args = json!({ "command": line });
        let def = definition("bash");
        let call = Call::new(&def, &args, safety(&def, &args), Path::new(ROOT));
        set.uncovered(&call)
    };
    assert_eq!(
        uncovered("cargo test | tee out.txt").as_deref(),
        Some("tee out.txt")
    );
    assert_eq!(
        uncovered("cargo test; rm -rf target").as_deref(),
        Some("rm -rf target")
    );
    assert_eq!(uncovered("cargo test | tail"), None);
    assert_eq!(uncovered("rm -rf target"), None);
}

#[test]
fn substitutions_are_searched_and_never_allowed() {
    let push = ["deny user bash(git push:*)"];
    let denied = Some("deny user bash(git push:*)");
    bash(&push, "echo $(git push)", denied);
    bash(&push, "echo `git push`", denied);
    bash(&push, "cat <(git push)", denied);
    bash(&push, "echo \"$(ls $(git push))\"", denied);
    bash(&["allow user bash(echo:*)"], "echo $(date)", None);
    bash(
        &["allow user bash(echo:*)", "allow user bash(date)"],
        "echo $(date)",
        None,
    );
    // A program known only at run time could be any program.
    bash(
        &["deny user bash(rm:*)"],
        "$(echo rm) -rf /",
        Some("deny user bash(rm:*)"),
    );
    bash(&push, "git $SUB origin", denied);
    bash(&push, "git pu* origin", denied);
    bash(&push, "git pu?l origin", None);
}

#[test]
fn assignments_and_wrappers_are_looked_through() {
    let push = ["ask user bash(git push:*)"];
    let caught = Some("ask user bash(git push:*)");
    for command in [
        "FOO=1 git push",
        "sudo git push",
        "sudo -u deploy git push",
        "env X=1 git push",
        "env -u HOME X=1 git push",
        "nohup git push &",
        "command git push",
        "exec git push",
        "nice -n 10 git push",
        "sudo nice nohup git push",
        "timeout 10 git push",
        "/usr/bin/git push",
        "bash -c 'git push origin'",
        "sh -lc \"ls && git push\"",
        "eval git push",
        "time git push",
    ] {
        bash(&push, command, caught);
    }
    bash(&push, "sudo git pull", None);
    bash(&push, "bash -c 'git pull'", None);
    bash(&push, "bash -c \"$CMD\"", caught);
}

#[test]
fn allow_rules_look_through_only_what_keeps_authority() {
    let status = ["allow user bash(git status:*)"];
    let allowed = Some("allow user bash(git status:*)");
    bash(&status, "FOO=1 git status", allowed);
    bash(&status, "nohup git status", allowed);
    bash(&status, "env GIT_DIR=x git status", allowed);
    bash(&status, "sudo git status", None);
    bash(&status, "nice -n 5 git status", None);
    bash(&status, "PATH=/tmp git status", None);
    bash(&status, "env LD_PRELOAD=x.so git status", None);
    bash(&status, "/usr/bin/git status", None);
    let sudo = ["allow user bash(sudo git status:*)"];
    bash(
        &sudo,
        "sudo git status",
        Some("allow user bash(sudo git status:*)"),
    );
    let echo = ["allow user bash(echo:*)"];
    bash(&echo, "echo hi > out.txt", None);
    bash(&echo, "echo hi >> ~/.bashrc", None);
    bash(
        &echo,
        "echo hi > /dev/null 2>&1",
        Some("allow user bash(echo:*)"),
    );
}

#[test]
fn unparseable_commands_fail_closed() {
    let push = ["deny user bash(git push:*)"];
    let denied = Some("deny user bash(git push:*)");
    bash(&push, "if true; then git push; fi", denied);
    bash(&push, "(cd x && git push)", denied);
    bash(&push, "{ git push; }", denied);
    bash(&push, "echo 'unterminated git push", denied);
    bash(&push, "(cd x && /usr/bin/git 'push')", denied);
    bash(&push, "(cd x && git pull)", None);
    bash(&["allow user bash(ls:*)"], "(ls)", None);
    bash(&["allow user bash(ls:*)"], "", None);
    // No readable command: deny and ask catch it, allow does not.
    check(
        &["ask user bash(git push:*)"],
        "bash",
        "{}",
        Some("ask user bash(git push:*)"),
    );
    check(
        &["allow user bash(ls:*)"],
        "bash",
        r#"{"command": 1}"#,
        None,
    );
}

#[test]
fn path_globs_relative_to_the_root() {
    let src = ["allow user write_file(src/**)"];
    let allowed = Some("allow user write_file(src/**)");
    for path in [
        "src/main.rs",
        "src/a/b/c.rs",
        "./src/main.rs",
        "docs/../src/x.rs",
        "/ws/proj/src/main.rs",
        "/ws/proj/./src/../src/x.rs",
        "../proj/src/x.rs",
    ] {
        file(&src, "write_file", path, allowed);
    }
    for path in [
        "src",
        "src/../docs/x.md",
        "lib/src/x.rs",
        "/elsewhere/src/main.rs",
        "../other/src/x.rs",
        "/src/x.rs",
    ] {
        file(&src, "write_file", path, None);
    }
    file(&src, "read_file", "src/main.rs", None);
    let top_md = ["ask project edit_file(*.md)"];
    file(
        &top_md,
        "edit_file",
        "README.md",
        Some("ask project edit_file(*.md)"),
    );
    file(&top_md, "edit_file", "docs/x.md", None);
    let any_md = ["ask project edit_file(**/*.md)"];
    file(
        &any_md,
        "edit_file",
        "docs/x.md",
        Some("ask project edit_file(**/*.md)"),
    );
    file(
        &any_md,
        "edit_file",
        "README.md",
        Some("ask project edit_file(**/*.md)"),
    );
    let env = ["deny local read_file(./.env)"];
    file(
        &env,
        "read_file",
        ".env",
        Some("deny local read_file(./.env)"),
    );
    file(
        &env,
        "read_file",
        "/ws/proj/.env",
        Some("deny local read_file(./.env)"),
    );
    file(&env, "read_file", "sub/.env", None);
}

#[test]
fn absolute_path_globs_and_unreadable_paths() {
    let etc = ["deny user read_file(/etc/**)"];
    let denied = Some("deny user read_file(/etc/**)");
    file(&etc, "read_file", "/etc/passwd", denied);
    file(&etc, "read_file", "../../../../etc/shadow", denied);
    file(&etc, "read_file", "/ws/proj/etc/x", None);
    let secrets = ["deny user read_file(/ws/proj/secrets/**)"];
    let denied = Some("deny user read_file(/ws/proj/secrets/**)");
    file(&secrets, "read_file", "secrets/key", denied);
    file(&secrets, "read_file", "./secrets/../secrets/key", denied);
    let root = ["allow user list_dir(.)"];
    check(&root, "list_dir", "{}", Some("allow user list_dir(.)"));
    file(&root, "list_dir", "./", Some("allow user list_dir(.)"));
    file(&root, "list_dir", "src", None);
    let grep = ["allow user grep(src/**)"];
    file(&grep, "grep", "src/lib", Some("allow user grep(src/**)"));
    check(&grep, "grep", r#"{"pattern":"x"}"#, None);
    // A `path` that is not a string: deny catches it, allow does not.
    let odd = r#"{"path": 42}"#;
    check(
        &["deny user write_file(src/**)"],
        "write_file",
        odd,
        Some("deny user write_file(src/**)"),
    );
    check(&["allow user write_file(src/**)"], "write_file", odd, None);
}

#[test]
fn deny_beats_ask_beats_allow_across_scopes() {
    let rules = [
        "allow session bash(git:*)",
        "ask project bash(git push:*)",
        "deny user bash(git push --force:*)",
    ];
    bash(
        &rules,
        "git push --force",
        Some("deny user bash(git push --force:*)"),
    );
    bash(&rules, "git push", Some("ask project bash(git push:*)"));
    bash(&rules, "git status", Some("allow session bash(git:*)"));
    bash(&rules, "cargo test", None);
    let files = ["allow session write_file", "deny user write_file(/etc/**)"];
    file(
        &files,
        "write_file",
        "/etc/hosts",
        Some("deny user write_file(/etc/**)"),
    );
    file(&files, "write_file", "x", Some("allow session write_file"));
}

#[test]
fn scope_precedence_picks_the_recorded_rule() {
    let all = [
        "deny user *",
        "deny project bash",
        "deny local bash(git:*)",
        "deny session bash(git push:*)",
    ];
    bash(&all, "git push", Some("deny session bash(git push:*)"));
    bash(&all[..3], "git push", Some("deny local bash(git:*)"));
    bash(&all[..2], "git push", Some("deny project bash"));
    bash(&all[..1], "git push", Some("deny user *"));
    let reversed = [
        "deny session bash(git push:*)",
        "deny local bash(git:*)",
        "deny user *",
    ];
    bash(&reversed, "git push", Some("deny session bash(git push:*)"));
    let same_scope = ["deny project bash(git:*)", "deny project bash(git push:*)"];
    bash(&same_scope, "git push", Some("deny project bash(git:*)"));
    let reads = ["allow user read_file", "allow project read_file(src/**)"];
    file(
        &reads,
        "read_file",
        "src/x.rs",
        Some("allow project read_file(src/**)"),
    );
    file(
        &reads,
        "read_file",
        "docs/x.md",
        Some("allow user read_file"),
    );
    let mixed = ["allow local bash", "allow session bash(ls:*)"];
    bash(&mixed, "ls && touch x", Some("allow local bash"));
    // `pwd` is read-only, so the narrower rule covers the line too.
    bash(&mixed, "ls && pwd", Some("allow session bash(ls:*)"));
    bash(&mixed, "ls", Some("allow session bash(ls:*)"));
}

#[test]
fn parse_errors_quote_the_rule() {
    check_error(
        "bash(git push:*",
        "permission rule 'bash(git push:*': unbalanced parenthesis",
    );
    check_error("bash)", "permission rule 'bash)': unbalanced parenthesis");
    check_error(
        "bash(a))",
        "permission rule 'bash(a))': unbalanced parenthesis",
    );
    check_error(
        "bash(x) y",
        "permission rule 'bash(x) y': unbalanced parenthesis",
    );
    check_error("", "permission rule '': empty tool name");
    check_error(
        "(git push)",
        "permission rule '(git push)': empty tool name",
    );
    check_error(
        "my tool",
        "permission rule 'my tool': invalid character ' ' in tool name 'my tool'",
    );
    check_error(
        "bash()",
        "permission rule 'bash()': empty argument pattern (write 'bash' to match every call)",
    );
    check_error(
        "todo_write(x)",
        "permission rule 'todo_write(x)': 'todo_write' takes no argument pattern other than '*' \
         (argument patterns are read for shell tools and for the tools with a path: read_file, \
         list_dir, glob, grep, write_file, edit_file, bash, process)",
    );
    let wildcard = Rule::parse(RuleKind::Deny, Scope::User, "*_file(src/**)");
    assert!(matches!(
        wildcard,
        Err(RuleError::ArgumentNotSupported { .. })
    ));
    check_error(
        "write_file(src/[)",
        "permission rule 'write_file(src/[)': bad glob: unclosed character class; missing ']'",
    );
    check_error(
        "read_file(~/.ssh/**)",
        "permission rule 'read_file(~/.ssh/**)': bad path pattern: '~' is not expanded; \
         write the absolute path",
    );
    check_error(
        "write_file(../x)",
        "permission rule 'write_file(../x)': bad path pattern: '..' never matches, since \
         paths are normalized first; write an absolute pattern",
    );
    check_error(
        "bash(git push && rm:*)",
        "permission rule 'bash(git push && rm:*)': bad command pattern: it is more than one \
         command; write one rule per command",
    );
    check_error(
        "bash(rm *)",
        "permission rule 'bash(rm *)': bad command pattern: only a trailing ':*' is a \
         wildcard; quote glob characters",
    );
    check_error(
        "bash(FOO=1 git push)",
        "permission rule 'bash(FOO=1 git push)': bad command pattern: leading assignments \
         are looked through; leave them out",
    );
    check_error(
        "bash(:*)",
        "permission rule 'bash(:*)': bad command pattern: it names no command",
    );
    check_error(
        "bash(echo 'x)",
        "permission rule 'bash(echo 'x)': bad command pattern: it does not parse (an \
         unterminated single quote)",
    );
}

#[test]
fn permissions_table_from_config() {
    let table: toml::Table = toml::from_str(
        r#"
        [permissions]
        allow = ["bash(cargo test:*)", "read_file"]
        deny = ["bash(git push:*)"]
        "#,
    )
    .expect("toml");
    let rules: PermissionRules = table["permissions"].clone().try_into().expect("rules");
    assert_eq!(
        rules,
        PermissionRules {
            allow: vec!["bash(cargo test:*)".into(), "read_file".into()],
            ask: vec![],
            deny: vec!["bash(git push:*)".into()],
        }
    );
    let mut set = RuleSet::new();
    set.extend_from(Scope::Project, &rules)
        .expect("rules parse");
    check_set(
        &set,
        "bash",
        r#"{"command":"cargo test -q"}"#,
        Some("allow project bash(cargo test:*)"),
    );
    check_set(
        &set,
        "bash",
        r#"{"command":"cargo test && git push"}"#,
        Some("deny project bash(git push:*)"),
    );
    let unknown = toml::from_str::<PermissionRules>("allowed = []");
    assert!(unknown.is_err(), "unknown keys are refused");
    let bad = PermissionRules {
        allow: vec!["read_file".into(), "bash(".into()],
        ..PermissionRules::default()
    };
    let err = set.extend_from(Scope::User, &bad).expect_err("bad rule");
    assert_eq!(
        err.to_string(),
        "permission rule 'bash(': unbalanced parenthesis"
    );
    assert_eq!(set.len(), 3, "nothing is added when a rule does not parse");
}

#[test]
fn child_rules_narrow_but_never_widen() {
    let parent = set_of(&["allow user bash(git:*)", "deny project bash(rm:*)"]);
    let child = PermissionRules {
        allow: vec!["bash(rm:*)".into(), "bash(curl:*)".into()],
        ask: vec!["bash(git commit:*)".into()],
        deny: vec!["bash(git push:*)".into()],
    };
    let narrowed = parent.with_child_rules(&child).expect("child rules parse");
    let cmd = |c: &str| json!({ "command": c }).to_string();
    check_set(
        &narrowed,
        "bash",
        &cmd("rm -rf x"),
        Some("deny project bash(rm:*)"),
    );
    check_set(&narrowed, "bash", &cmd("curl example.com"), None);
    check_set(
        &narrowed,
        "bash",
        &cmd("git push"),
        Some("deny session bash(git push:*)"),
    );
    check_set(
        &narrowed,
        "bash",
        &cmd("git commit -m x"),
        Some("ask session bash(git commit:*)"),
    );
    check_set(
        &narrowed,
        "bash",
        &cmd("git status"),
        Some("allow user bash(git:*)"),
    );
    let inherited = parent.inherited();
    check_set(
        &inherited,
        "bash",
        &cmd("rm x"),
        Some("deny project bash(rm:*)"),
    );
    check_set(
        &inherited,
        "bash",
        &cmd("git push"),
        Some("allow user bash(git:*)"),
    );
    let bad = PermissionRules {
        deny: vec!["todo_write(x)".into()],
        ..PermissionRules::default()
    };
    assert!(parent.with_child_rules(&bad).is_err());
}

#[test]
fn kinds_and_scopes_on_the_wire() {
    assert_eq!(
        serde_json::to_value(RuleKind::Deny).expect("json"),
        json!("deny")
    );
    assert_eq!(
        serde_json::to_value(Scope::Session).expect("json"),
        json!("session")
    );
    let matched = RuleMatch {
        kind: RuleKind::Ask,
        scope: Scope::Local,
        rule: "bash(git push:*)".into(),
        route: None,
    };
    assert_eq!(matched.to_string(), "ask rule 'bash(git push:*)' (local)");
    assert!(Scope::Session > Scope::Local && Scope::Local > Scope::Project);
    assert!(Scope::Project > Scope::User);
}

/// What `rules` decide for a call of an MCP tool whose definition takes a
/// `path` (`with_path`) or not.
fn host(rules: &[&str], with_path: bool, args: Value, expected: Option<&str>) {
    let mut def = crate::tool::ToolDefinition::new(
        "mcp_fs_write_file",
        "",
        json!({"type": "object"}),
        crate::tool::Safety::SideEffect,
    );
    if with_path {
        def = def.taking_path("path");
    }
    let call = crate::permission::Call::new(
        &def,
        &args,
        crate::tool::Safety::SideEffect,
        Path::new(ROOT),
    );
    let got = set_of(rules)
        .decide(&call)
        .map(|m| format!("{} {} {}", m.kind, m.scope, m.rule));
    assert_eq!(
        got.as_deref(),
        expected,
        "{args} (path argument: {with_path})"
    );
}

#[test]
fn path_rules_hold_on_mcp_tools_with_a_path() {
    let allow = ["allow user mcp_fs_write_file(src/**)"];
    let src = json!({"path": "src/a.rs"});
    let top = json!({"path": "Cargo.toml"});
    host(
        &allow,
        true,
        src.clone(),
        Some("allow user mcp_fs_write_file(src/**)"),
    );
    host(&allow, true, top.clone(), None);
    host(&allow, true, json!({"path": "src/../Cargo.toml"}), None);
    // A tool that takes no path is never allowed by a path pattern, and
    // deny and ask rules with one catch every call of it.
    host(&allow, false, src.clone(), None);
    let deny = ["deny user mcp_fs_write_file(secrets/**)"];
    host(&deny, true, top.clone(), None);
    host(
        &deny,
        true,
        json!({"path": "secrets/k"}),
        Some("deny user mcp_fs_write_file(secrets/**)"),
    );
    host(
        &deny,
        false,
        top,
        Some("deny user mcp_fs_write_file(secrets/**)"),
    );
    // Name globs still take no argument pattern.
    assert!(matches!(
        Rule::parse(RuleKind::Allow, Scope::User, "mcp_*(src/**)"),
        Err(RuleError::ArgumentNotSupported { .. })
    ));
}

#[test]
fn words_the_reader_does_not_evaluate_are_caught_and_never_covered() {
    let push = ["deny user bash(git push:*)"];
    let denied = Some("deny user bash(git push:*)");
    bash(&push, "git $'\\x70ush'", denied);
    bash(&push, "git $\"push\"", denied);
    bash(&push, "git {push,x}", denied);
    bash(&push, "git {\"push\",x}", denied);
    bash(&push, "git ${x:-push}", denied);
    let log = ["allow user bash(git log:*)"];
    bash(&log, "git $\"log\"", None);
    bash(&log, "git $'log'", None);
    bash(&log, "git log", Some("allow user bash(git log:*)"));
}
