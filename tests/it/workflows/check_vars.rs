//! Check commands with `{{item}}` and `{{vars.NAME}}`: the values reach
//! the check as environment variables, so an item full of shell syntax is
//! one literal argument in any quoting and never runs.

use std::path::Path;

use cadre::runtime::permission::Posture;
use cadre::workflows::scheduler::State;
use serde_json::json;

use super::{Harness, answered};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

/// Every step looks at the workspace once (a check wants a call behind
/// the answer), then answers.
fn look_then_answer(mock: &MockServer) {
    mock.respond_with(|request| {
        Some(if answered(request) == 0 {
            Reply::sse(&tool_call_chunks("c1", "list_dir", &json!({"path": "."})))
        } else {
            Reply::sse(&text_chunks("done"))
        })
    });
}

/// Files under `dir` whose name starts with `PWNED`: what an item run as
/// a command would have made.
fn pwned(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with("PWNED") {
            found.push(path.display().to_string());
        }
        if path.is_dir() && !path.is_symlink() {
            found.extend(pwned(&path));
        }
    }
    found
}

/// Items that would run commands were they shell text; each check line
/// uses `{{item}}` inside double quotes, bare and inside single quotes,
/// and `grep -xF` proves it saw the item's exact bytes as one argument.
const HOSTILE: &str = r#"
[workflow]
name = "hostile"

[vars]
who = "$(touch PWNED_VAR); it's"

[[steps]]
name = "each"
for_each = [
  "a; touch PWNED",
  "$(touch PWNED2)",
  "x\" ; touch PWNED3; \"",
  "`touch PWNED4`",
  "it's'; touch PWNED5; '",
  "two  words *",
]
prompt = "item {{item}}"
check = '''test -n "{{item}}" && printf '%s' "{{item}}" > /dev/null && grep -qxF -e "{{item}}" items.txt && grep -qxF -e {{item}} items.txt && grep -qxF -e '{{item}}' items.txt && test "$CADRE_ITEM" = {{item}} && test "{{index}}" -lt 6 && test {{vars.who}} = "$CADRE_VAR_WHO" && grep -qxF -e "{{vars.who}}" vars.txt'''
"#;

#[tokio::test]
async fn hostile_items_are_one_literal_argument_in_every_quoting_of_a_check() {
    let mock = MockServer::start().await;
    look_then_answer(&mock);
    let h = Harness::new(&mock).await;
    let items = [
        "a; touch PWNED",
        "$(touch PWNED2)",
        "x\" ; touch PWNED3; \"",
        "`touch PWNED4`",
        "it's'; touch PWNED5; '",
        "two  words *",
    ];
    std::fs::write(h.path("items.txt"), items.join("\n") + "\n").expect("items.txt");
    std::fs::write(h.path("vars.txt"), "$(touch PWNED_VAR); it's\n").expect("vars.txt");
    let done = h.run(HOSTILE, Posture::Bypass, None).await;
    let each = done.step("each");
    for instance in &each.instances {
        assert_eq!(instance.state, State::Verified, "{instance:?}");
    }
    assert_eq!(each.instances.len(), items.len());
    assert!(done.report.all_checks_passed);
    assert_eq!(pwned(h.workspace.path()), Vec::<String>::new());
}

#[tokio::test]
async fn a_check_that_depends_on_its_item_fails_exactly_the_items_it_should() {
    let mock = MockServer::start().await;
    look_then_answer(&mock);
    let h = Harness::new(&mock).await;
    std::fs::create_dir_all(h.path("src")).expect("src");
    for file in ["a.rs", "c d.rs", "$(touch PWNED).rs"] {
        std::fs::write(h.path("src").join(file), "").expect("file");
    }
    let text = r#"
[workflow]
name = "files"

[[steps]]
name = "each"
for_each = ["a", "b", "c d", "$(touch PWNED)", "*", "x\" ; touch PWNED2; \""]
prompt = "item {{item}}"
check = "test -f \"src/{{item}}.rs\""
"#;
    let done = h.run(text, Posture::Bypass, None).await;
    let states: Vec<State> = done
        .step("each")
        .instances
        .iter()
        .map(|i| i.state)
        .collect();
    assert_eq!(
        states,
        [
            State::Verified,
            State::Failed,
            State::Verified,
            State::Verified,
            State::Failed,
            State::Failed,
        ],
        "{:#?}",
        done.step("each")
    );
    let b = &done.step("each").instances[1];
    assert!(
        b.reason
            .as_deref()
            .is_some_and(|r| r.contains("check failed") && r.contains("exit 1")),
        "{b:?}"
    );
    assert_eq!(pwned(h.workspace.path()), Vec::<String>::new());
}

#[tokio::test]
async fn an_item_holding_a_nul_fails_its_check_saying_why() {
    let mock = MockServer::start().await;
    look_then_answer(&mock);
    let h = Harness::new(&mock).await;
    let text = r#"
[workflow]
name = "nul"

[[steps]]
name = "each"
for_each = ["fine", "nul\u0000inside"]
prompt = "item {{item}}"
check = "test -n {{item}}"
"#;
    let done = h.run(text, Posture::Bypass, None).await;
    let each = done.step("each");
    assert_eq!(each.instances[0].state, State::Verified, "{each:#?}");
    assert_eq!(each.instances[1].state, State::Failed, "{each:#?}");
    assert!(
        each.instances[1]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("CADRE_ITEM holds a NUL byte")),
        "{each:#?}"
    );
}
