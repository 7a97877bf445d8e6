//! Protected paths: every writer × every protected place × every posture
//! is blocked by the floor; the literal allow rule is the one way through
//! for the file tools; shell routes are blocked by what they name and by
//! the git commands that write config and hooks.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

mod runtime_paths;
use crate::permission::call::RealPaths;
use crate::permission::classify::classify_command;
use crate::permission::rules::{RuleKind, RuleSet, Scope};
use crate::permission::{Evaluation, Policy, Posture, Verdict, evaluate};
use crate::tool::{ToolDefinition, builtin_definitions};

const ROOT: &str = "/work/ws";
const DATA: &str = "/home/u/.local/share/cadre";
const CONFIG: &str = "/home/u/.config/cadre";
const SETTINGS: &str = "/etc/cadre/settings.toml";
const PLAN: &str = "/home/u/.local/share/cadre/sessions/s/artifacts/plan.md";

fn roots() -> ProtectedPaths {
    ProtectedPaths::new()
        .data_dir(DATA)
        .config_dir(CONFIG)
        .settings_file(SETTINGS)
        .home("/home/u")
}

fn builtin(name: &str) -> &'static ToolDefinition {
    builtin_definitions()
        .iter()
        .find(|def| def.name == name)
        .expect("a built-in")
}

/// Every place a file tool could write that is protected, as a call would
/// spell it.
const PROTECTED: &[&str] = &[
    ".cadre/config.local.toml",
    ".cadre/config.toml",
    "./.cadre/x/../config.local.toml",
    ".cadre",
    ".git/hooks/pre-commit",
    ".git/config",
    ".GIT/config",
    ".Cadre/config.toml",
    "vendor/lib/.git/hooks/post-checkout",
    "nested/.cadre/config.local.toml",
    "src/../.git/info/attributes",
    "/work/ws/.git/config",
    "/home/u/.local/share/cadre/cadre.db",
    "/home/u/.local/share/cadre/sessions/s/transcript.jsonl",
    "/home/u/.config/cadre/config.toml",
    "/home/u/.config/cadre/settings.toml",
    "/etc/cadre/settings.toml",
    "/elsewhere/repo/.git/hooks/pre-push",
];

/// Writers: the built-ins and a host tool with another path argument.
fn writers() -> Vec<(ToolDefinition, &'static str)> {
    vec![
        (builtin("write_file").clone(), "path"),
        (builtin("edit_file").clone(), "path"),
        (
            ToolDefinition::new("host_put", "", json!({}), Safety::SideEffect).taking_path("file"),
            "file",
        ),
    ]
}

fn rules(allow: &[&str]) -> RuleSet {
    let mut set = RuleSet::new();
    for rule in allow {
        set.add(RuleKind::Allow, Scope::Session, rule)
            .expect("rule");
    }
    set
}

/// What `evaluate` comes to: `<verdict> by <layer>`.
fn decided(
    posture: Posture,
    interactive: bool,
    rules: &RuleSet,
    def: &ToolDefinition,
    args: &Value,
    real: &RealPaths,
) -> String {
    let protected = roots();
    let policy = Policy {
        posture,
        rules,
        interactive,
        plan_file: Some(Path::new(PLAN)),
        protected: &protected,
    };
    let call = Call::new(def, args, Safety::SideEffect, Path::new(ROOT)).with_real_paths(real);
    match evaluate(&policy, &call) {
        Evaluation::Decided(d) => format!(
            "{} by {}",
            match d.verdict {
                Verdict::Allow => "allow",
                Verdict::Deny => "deny",
            },
            d.layer.label()
        ),
        Evaluation::AskPerson { .. } => "ask".into(),
        Evaluation::Review { .. } => "review".into(),
    }
}

const POSTURES: [Posture; 4] = [
    Posture::Never,
    Posture::Suggest,
    Posture::Auto,
    Posture::Bypass,
];

#[test]
fn every_writer_to_every_protected_path_is_blocked_in_every_posture_whatever_the_glob_rules() {
    let rule_sets = [
        rules(&[]),
        rules(&["write_file(**)", "edit_file(**)", "host_put(**)"]),
        rules(&["write_file(.cadre/*)", "edit_file(/**)", "host_put(**/*)"]),
        rules(&["*", "write_file", "host_put(*)"]),
    ];
    let mut wrong = Vec::new();
    let mut cases = 0;
    for (def, arg) in writers() {
        for path in PROTECTED {
            let args = json!({ arg: path, "content": "posture = \"bypass\"" });
            for posture in POSTURES {
                for interactive in [true, false] {
                    for set in &rule_sets {
                        cases += 1;
                        let got =
                            decided(posture, interactive, set, &def, &args, &RealPaths::new());
                        if got != "deny by deterministic floor" {
                            wrong.push(format!("{} {path} {posture}: {got}", def.name));
                        }
                    }
                }
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "of {cases} cases");
    assert!(cases > 800);
}

/// Shell routes that write a file, `{}` standing for its path.
const SHELL_WRITES: &[&str] = &[
    "echo x > {}",
    "printf x >> {}",
    "cp /tmp/x {}",
    "mv /tmp/x {}",
    "ln -sf /tmp/x {}",
    "install -m 644 /tmp/x {}",
    "echo x | tee {}",
    "touch {}",
    "sed -i s/a/b/ {}",
    "dd if=/tmp/x of={}",
    "sh -c 'cat /tmp/x > {}'",
    "sudo cp /tmp/x {}",
];

#[test]
fn every_shell_route_to_every_protected_path_is_blocked_in_every_posture() {
    let shells = [
        builtin("bash").clone(),
        ToolDefinition::new("host_sh", "", json!({}), Safety::SideEffect).as_shell(),
    ];
    let allow = rules(&["bash", "host_sh", "*"]);
    let mut wrong = Vec::new();
    let mut cases = 0;
    for def in &shells {
        for path in PROTECTED {
            for route in SHELL_WRITES {
                let args = json!({ "command": route.replace("{}", path) });
                for posture in POSTURES {
                    cases += 1;
                    let got = decided(posture, false, &allow, def, &args, &RealPaths::new());
                    if got != "deny by deterministic floor" {
                        wrong.push(format!(
                            "{} `{}` {posture}: {got}",
                            def.name, args["command"]
                        ));
                    }
                }
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "of {cases} cases");
    assert!(cases > 1500);
}

#[test]
fn a_symlink_into_a_protected_path_is_blocked_by_where_it_leads() {
    let mut real = RealPaths::new();
    real.insert(
        PathBuf::from("/work/ws/hook"),
        PathBuf::from("/work/ws/.git/hooks/pre-commit"),
    );
    real.insert(
        PathBuf::from("/work/ws/cfg/local.toml"),
        PathBuf::from("/work/ws/.cadre/config.local.toml"),
    );
    for path in ["hook", "cfg/local.toml"] {
        for posture in POSTURES {
            let args = json!({"path": path, "content": "x"});
            let got = decided(
                posture,
                true,
                &rules(&["write_file(**)"]),
                builtin("write_file"),
                &args,
                &real,
            );
            assert_eq!(got, "deny by deterministic floor", "{path} {posture}");
        }
    }
    let blocked = blocked(
        &Call::new(
            builtin("write_file"),
            &json!({"path": "hook", "content": "x"}),
            Safety::SideEffect,
            Path::new(ROOT),
        )
        .with_real_paths(&real),
        &roots(),
        Some(Path::new(PLAN)),
        |_| false,
    );
    assert_eq!(
        blocked.as_deref(),
        Some(
            "'write_file' would write '.git/hooks/pre-commit' (where 'hook' leads), in a .git \
             directory, where git's hooks and config run code: protected in every posture; \
             only an allow rule naming this path literally, such as \
             write_file(.git/hooks/pre-commit), lets a call write it"
        )
    );
}

#[test]
fn only_an_allow_rule_naming_the_path_literally_lets_a_file_tool_write_it() {
    let literal = rules(&[
        "write_file(.cadre/config.toml)",
        "edit_file(/etc/cadre/settings.toml)",
    ]);
    let write = |path: &str| json!({"path": path, "content": "x"});
    let check = |posture, def, args: Value, expected: &str| {
        let got = decided(
            posture,
            false,
            &literal,
            builtin(def),
            &args,
            &RealPaths::new(),
        );
        assert_eq!(got, expected, "{def} {args} {posture}");
    };
    check(
        Posture::Suggest,
        "write_file",
        write(".cadre/config.toml"),
        "allow by rule",
    );
    check(
        Posture::Bypass,
        "write_file",
        write("./.cadre/config.toml"),
        "allow by rule",
    );
    check(
        Posture::Never,
        "write_file",
        write(".cadre/config.toml"),
        "deny by posture",
    );
    check(
        Posture::Bypass,
        "write_file",
        write(".cadre/config.local.toml"),
        "deny by deterministic floor",
    );
    check(
        Posture::Bypass,
        "edit_file",
        write(".cadre/config.toml"),
        "deny by deterministic floor",
    );
    check(Posture::Auto, "edit_file", write(SETTINGS), "allow by rule");
    // A literal rule names the path it names, not where a link to it leads.
    let mut real = RealPaths::new();
    real.insert(
        PathBuf::from("/work/ws/link"),
        PathBuf::from("/work/ws/.git/config"),
    );
    let got = decided(
        Posture::Bypass,
        false,
        &rules(&["write_file(link)"]),
        builtin("write_file"),
        &write("link"),
        &real,
    );
    assert_eq!(got, "deny by deterministic floor");
}

#[test]
fn the_plan_file_in_the_data_directory_and_unprotected_lookalikes_stay_writable() {
    let none = rules(&[]);
    let write = |path: &str| json!({"path": path, "content": "x"});
    for (path, expected) in [
        (PLAN, "allow by deterministic floor"),
        (".gitignore", "allow by posture"),
        (".github/workflows/ci.yml", "allow by posture"),
        ("src/.cadre-notes", "allow by posture"),
        ("docs/git/config", "allow by posture"),
        ("/home/u/.local/share/cadre-other/x", "allow by posture"),
    ] {
        let got = decided(
            Posture::Bypass,
            false,
            &none,
            builtin("write_file"),
            &write(path),
            &RealPaths::new(),
        );
        assert_eq!(got, expected, "{path}");
    }
    // An ask rule skips the own-state shortcut; the plan file is still not protected.
    let mut ask = RuleSet::new();
    ask.add(RuleKind::Ask, Scope::User, "write_file(/home/**)")
        .expect("rule");
    let got = decided(
        Posture::Suggest,
        true,
        &ask,
        builtin("write_file"),
        &write(PLAN),
        &RealPaths::new(),
    );
    assert_eq!(got, "ask");
}

/// A shell call's verdict: `blocked: <fragment>` or `-`, with the call
/// classified as the runner would.
fn shell_verdict(command: &str, real: &RealPaths) -> String {
    let args = json!({ "command": command });
    let safety = classify_command(command).safety;
    let protected = roots();
    let call = Call::new(builtin("bash"), &args, safety, Path::new(ROOT))
        .with_real_paths(real)
        .with_home(protected.home_dir());
    match blocked(&call, &protected, Some(Path::new(PLAN)), |_| false) {
        Some(reason) => format!("blocked: {reason}"),
        None => "-".into(),
    }
}

/// Shell calls and the fragment their verdict must contain (`-` for none).
fn check(cases: &[(&str, &str)]) {
    let got: Vec<(&str, String)> = cases
        .iter()
        .map(|(command, want)| {
            let verdict = shell_verdict(command, &RealPaths::new());
            let shown = if *want != "-" && verdict.contains(want) {
                want.to_string()
            } else {
                verdict
            };
            (*command, shown)
        })
        .collect();
    let expected: Vec<(&str, String)> = cases.iter().map(|(c, w)| (*c, w.to_string())).collect();
    assert_eq!(got, expected);
}

const GIT: &str = "names '";
const CONFIG_WRITE: &str = "writes git's configuration or hooks";
const TREE: &str = "writes into ";

#[test]
fn shell_routes_that_name_a_protected_path_are_blocked() {
    check(&[
        ("cp x .git/hooks/pre-commit", GIT),
        ("echo x > .cadre/config.toml", GIT),
        (
            "echo 'posture = \"bypass\"' >> .cadre/config.local.toml",
            GIT,
        ),
        ("mv evil.toml .cadre/config.local.toml", GIT),
        ("ln -s ../x .git/hooks/pre-commit", GIT),
        ("install -m 755 x .git/hooks/pre-commit", GIT),
        ("tee .git/config < x", GIT),
        ("echo x | tee -a .cadre/config.toml", GIT),
        ("touch .cadre/config.local.toml", GIT),
        ("sed -i s/a/b/ .git/config", GIT),
        ("dd if=x of=.git/hooks/pre-push", GIT),
        ("cd .git && echo x > config", GIT),
        ("cd .git/hooks; cp ../../x pre-commit", GIT),
        ("cd src && cp x ../.git/hooks/pre-commit", GIT),
        ("cp x sub/.GIT/config", GIT),
        (
            "echo x > .g?t/config",
            "glob that may expand into '.g?t/config'",
        ),
        ("cp x .*/hooks/pre-commit", "glob that may expand into"),
        (
            "shopt -s dotglob; cp x */hooks/pre-commit",
            "glob that may expand into",
        ),
        ("echo x > ~/.config/cadre/config.toml", GIT),
        ("echo x > $HOME/.config/cadre/settings.toml", GIT),
        ("cp x /etc/cadre/settings.toml", GIT),
        (
            "sqlite3 /home/u/.local/share/cadre/cadre.db 'delete from audit'",
            GIT,
        ),
        ("bash -c 'echo x > .git/hooks/pre-commit'", GIT),
        ("(cd .git && echo x > config)", GIT),
        // Not proven read-only and naming .git: blocked, though it only reads there.
        ("grep -r x .git > out.txt", GIT),
        ("cp -r template/. .", TREE),
        ("sudo cp -r template/. .", TREE),
        ("rsync -a evil/ ./", TREE),
        ("tar xf evil.tar", TREE),
        ("unzip evil.zip", TREE),
        ("cp -r evil /home/u/.config", TREE),
    ]);
}

#[test]
fn git_config_and_hook_writers_are_blocked_without_naming_a_path() {
    check(&[
        ("git config core.pager x", CONFIG_WRITE),
        ("git config --global core.hooksPath /tmp/h", CONFIG_WRITE),
        ("git -C sub config alias.st '!sh x'", CONFIG_WRITE),
        ("git config --unset user.name", CONFIG_WRITE),
        ("git config set core.editor x", CONFIG_WRITE),
        ("git config --file .git/config a.b c", CONFIG_WRITE),
        ("sudo -u me git config a.b c", CONFIG_WRITE),
        ("env X=1 git config a.b c", CONFIG_WRITE),
        ("ls && git config a.b c", CONFIG_WRITE),
        ("echo $(git config a.b c)", CONFIG_WRITE),
        ("bash -c 'git config a.b c'", CONFIG_WRITE),
        ("eval git config a.b c", CONFIG_WRITE),
        ("sudo bash -c 'git config a.b c'", CONFIG_WRITE),
        ("git remote add origin https://example.com/x", CONFIG_WRITE),
        ("git remote set-url origin x", CONFIG_WRITE),
        ("git submodule add https://example.com/x", CONFIG_WRITE),
        ("git submodule update --init", CONFIG_WRITE),
        ("git lfs install", CONFIG_WRITE),
        ("git init --template=t", CONFIG_WRITE),
        ("git clone -c core.hooksPath=h url", CONFIG_WRITE),
        ("pre-commit install", CONFIG_WRITE),
        ("npx husky init", CONFIG_WRITE),
        ("if true; then git config a.b c; fi", CONFIG_WRITE),
    ]);
}

#[test]
fn git_at_work_reads_and_unprotected_writes_are_not_blocked() {
    check(&[
        ("git commit -am 'x'", "-"),
        ("git checkout -b topic", "-"),
        ("git merge main", "-"),
        ("git branch -u origin/main", "-"),
        ("git add .gitignore src", "-"),
        ("git config --get core.pager", "-"),
        ("git config user.name", "-"),
        ("git config --list", "-"),
        ("git remote -v", "-"),
        ("git submodule status", "-"),
        ("git init", "-"),
        ("cat .git/config", "-"),
        ("ls -la .cadre", "-"),
        ("echo x > .github/ci.yml", "-"),
        ("echo x > .gitignore", "-"),
        ("cp -r src dst", "-"),
        ("tar xf deps.tgz -C vendor", "-"),
        ("cp x *.rs", "-"),
        ("npm install husky", "-"),
        ("echo git config a b", "-"),
        ("cargo build", "-"),
    ]);
}

#[test]
fn a_shell_word_whose_link_leads_into_a_protected_path_is_blocked() {
    let mut real = RealPaths::new();
    real.insert(
        PathBuf::from("/work/ws/h/pre-commit"),
        PathBuf::from("/work/ws/.git/hooks/pre-commit"),
    );
    let verdict = shell_verdict("cp x h/pre-commit", &real);
    assert!(
        verdict.contains("names 'h/pre-commit', in a .git directory"),
        "{verdict}"
    );
    assert_eq!(shell_verdict("cp x h/pre-commit", &RealPaths::new()), "-");
}
