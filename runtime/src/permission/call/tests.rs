//! What a call names, as data: each case is a command line and the paths
//! it names, written `<reach> <access> <lexical path>` (a glob adds its
//! pattern after `~`). The workspace is `/ws`, the home `/home/u`.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

const ROOT: &str = "/ws";
const HOME: &str = "/home/u";

fn shown(named: &Named) -> String {
    let access = match named.access {
        Access::Read => "read",
        Access::Write => "write",
        Access::Any => "any",
    };
    let lexical = named.lexical.display();
    match &named.reach {
        Reach::Itself => format!("itself {access} {lexical}"),
        Reach::Below => format!("below {access} {lexical}"),
        Reach::Glob(pattern) => format!("glob {access} {lexical} ~ {pattern}"),
    }
}

fn shell() -> ToolDefinition {
    ToolDefinition::new("sh", "", json!({}), Safety::SideEffect).as_shell()
}

/// The paths `line` names, but for its program words (`/ws/cat`), which
/// every case would repeat.
fn check(line: &str, expected: &[&str]) {
    let def = shell();
    let args = json!({ "command": line });
    let programs: Vec<String> = match crate::permission::shell::parse(line) {
        Ok(script) => script
            .all_commands()
            .iter()
            .filter_map(|c| c.program().map(str::to_string))
            .collect(),
        Err(_) => Vec::new(),
    };
    let got: Vec<String> = names(
        &def,
        &args,
        Safety::SideEffect,
        Path::new(ROOT),
        Some(Path::new(HOME)),
    )
    .iter()
    .filter(|n| !(n.reach == Reach::Itself && programs.contains(&n.text)))
    .map(shown)
    .collect();
    assert_eq!(got, expected, "{line}");
}

#[test]
fn words_redirections_and_values_name_paths() {
    check("cat .env", &["itself any /ws/.env"]);
    check("cat ./a/../.env", &["itself any /ws/.env"]);
    check("cat < .env", &["itself any /ws/.env"]);
    check(
        "echo x > .cadre/config.toml",
        &["itself any /ws/x", "itself any /ws/.cadre/config.toml"],
    );
    check(
        "dd if=.env of=out",
        &[
            "itself any /ws/if=.env",
            "itself any /ws/.env",
            "itself any /ws/of=out",
            "itself any /ws/out",
        ],
    );
    check(
        "git show HEAD:.env",
        &[
            "itself any /ws/show",
            "itself any /ws/HEAD:.env",
            "itself any /ws/.env",
            "below read /ws",
        ],
    );
    check(
        "GIT_DIR=.git/x cat /etc/hosts",
        &["itself any /etc/hosts", "itself any /ws/.git/x"],
    );
    check("cat ~/.ssh/id", &["itself any /home/u/.ssh/id"]);
    check("cat $HOME/.ssh/id", &["itself any /home/u/.ssh/id"]);
    check("cat ~other/x $X \"$(pwd)/x\"", &[]);
    check("cat ../../..", &["itself any /"]);
}

#[test]
fn cd_moves_relative_words_and_an_unknown_cd_falls_back_to_the_root() {
    check(
        "cd sub && cat ../.env",
        &["itself any /ws/sub", "itself any /ws/.env"],
    );
    check(
        "cd .git; echo x > hooks/pre-commit",
        &[
            "itself any /ws/.git",
            "itself any /ws/.git/x",
            "itself any /ws/.git/hooks/pre-commit",
        ],
    );
    check("cd $D && cat .env", &["itself any /ws/.env"]);
    check("cd /tmp; cat x", &["itself any /tmp", "itself any /tmp/x"]);
}

#[test]
fn globs_name_their_fixed_directory_and_keep_the_pattern() {
    check("cat *", &["glob any /ws ~ /ws/*"]);
    check("cat src/*.rs", &["glob any /ws/src ~ /ws/src/*.rs"]);
    check("cat .e*", &["glob any /ws ~ /ws/.e*"]);
    check("cat '*.rs'", &["itself any /ws/*.rs"]);
}

#[test]
fn tree_walkers_name_their_trees() {
    check(
        "grep -r KEY .",
        &["itself any /ws/KEY", "itself any /ws", "below read /ws"],
    );
    check("rg KEY", &["itself any /ws/KEY", "below read /ws"]);
    check(
        "rg -e KEY -e OTHER src",
        &[
            "itself any /ws/KEY",
            "itself any /ws/OTHER",
            "itself any /ws/src",
            "below read /ws/OTHER",
            "below read /ws/src",
        ],
    );
    check("grep KEY f", &["itself any /ws/KEY", "itself any /ws/f"]);
    check(
        "find src -name x",
        &[
            "itself any /ws/src",
            "itself any /ws/x",
            "below read /ws/src",
        ],
    );
    check("find . -delete", &["itself any /ws", "below any /ws"]);
    check(
        "cp -r evil/. .",
        &[
            "itself any /ws/evil",
            "itself any /ws",
            "below write /ws",
            "below read /ws/evil",
        ],
    );
    check(
        "cp -t dst -r a",
        &[
            "itself any /ws/dst",
            "itself any /ws/a",
            "below read /ws/dst",
            "below read /ws/a",
            "below write /ws/dst",
        ],
    );
    check(
        "tar xzf evil.tgz",
        &[
            "itself any /ws/xzf",
            "itself any /ws/evil.tgz",
            "below write /ws",
        ],
    );
    check(
        "tar xf a.tar -C vendor",
        &[
            "itself any /ws/xf",
            "itself any /ws/a.tar",
            "itself any /ws/vendor",
            "below write /ws/vendor",
        ],
    );
    check(
        "unzip a.zip -d out",
        &[
            "itself any /ws/a.zip",
            "itself any /ws/out",
            "below write /ws/out",
        ],
    );
    check("git diff", &["itself any /ws/diff", "below read /ws"]);
    check(
        "git diff main -- src",
        &[
            "itself any /ws/diff",
            "itself any /ws/main",
            "itself any /ws/src",
            "below read /ws/src",
        ],
    );
    check("git log --oneline", &["itself any /ws/log"]);
    check("git log -p", &["itself any /ws/log", "below read /ws"]);
}

#[test]
fn lines_other_shells_run_are_read_too() {
    check(
        "bash -c 'cat .env'",
        &[
            "itself any /ws/cat .env",
            "itself any /ws/cat",
            "itself any /ws/.env",
        ],
    );
    check(
        "cd sub && sh -lc \"cat ../.env\"",
        &[
            "itself any /ws/sub",
            "itself any /ws/sub/cat ../.env",
            "itself any /ws/sub/cat",
            "itself any /ws/.env",
        ],
    );
    check(
        "eval cat .env",
        &["itself any /ws/cat", "itself any /ws/.env"],
    );
    check("(cat .env)", &["itself any /ws/cat", "itself any /ws/.env"]);
}

#[test]
fn a_path_tool_names_its_path_argument_or_the_root() {
    let check_tool = |args: serde_json::Value, safety: Safety, expected: &[&str]| {
        let def = ToolDefinition::new("put", "", json!({}), Safety::SideEffect).taking_path("file");
        let got: Vec<String> = names(&def, &args, safety, Path::new(ROOT), None)
            .iter()
            .map(shown)
            .collect();
        assert_eq!(got, expected, "{args}");
    };
    check_tool(
        json!({"file": "src/../x"}),
        Safety::SideEffect,
        &["itself any /ws/x"],
    );
    check_tool(json!({}), Safety::ReadOnly, &["itself read /ws"]);
    check_tool(
        json!({"file": "/etc/x"}),
        Safety::ReadOnly,
        &["itself read /etc/x"],
    );
    let none = ToolDefinition::new("todo", "", json!({}), Safety::SideEffect);
    assert!(
        names(
            &none,
            &json!({"path": "x"}),
            Safety::SideEffect,
            Path::new(ROOT),
            None
        )
        .is_empty()
    );
}

#[test]
fn spellings_add_the_real_path_the_tool_layer_found() {
    let def = ToolDefinition::new("read", "", json!({}), Safety::ReadOnly).taking_path("path");
    let args = json!({"path": "link"});
    let mut real = RealPaths::new();
    real.insert(PathBuf::from("/ws/link"), PathBuf::from("/ws/.env"));
    let call = Call::new(&def, &args, Safety::ReadOnly, Path::new(ROOT)).with_real_paths(&real);
    let named = call.names();
    assert_eq!(
        call.spellings(&named[0]),
        [PathBuf::from("/ws/link"), PathBuf::from("/ws/.env")]
    );
    let plain = Call::new(&def, &args, Safety::ReadOnly, Path::new(ROOT));
    assert_eq!(plain.spellings(&named[0]), [PathBuf::from("/ws/link")]);
}
