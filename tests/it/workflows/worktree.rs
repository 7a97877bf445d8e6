//! `isolation = "worktree"` and `merge = true` over the mock: each step
//! writes in a git worktree of its own; a clean merge brings the change
//! back, a conflicting one fails the step, names the file and keeps the
//! worktree.

use std::path::Path;

use cadre::runtime::permission::Posture;
use cadre::workflows::scheduler::State;
use cadre::workflows::scheduler::StepOutcome;
use git2::{Repository, Signature};
use serde_json::json;

use super::{Harness, answered, prompt_of};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

/// Makes `dir` a repository with `shared.txt` committed.
fn commit_shared(dir: &Path) {
    let repo = Repository::init(dir).expect("init");
    std::fs::write(dir.join("shared.txt"), "base\n").expect("write");
    let mut index = repo.index().expect("index");
    index.add_path(Path::new("shared.txt")).expect("add");
    index.write().expect("index");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let sig = Signature::now("t", "t@example.com").expect("sig");
    repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
        .expect("commit");
}

const TEXT: &str = r#"
[workflow]
name = "isolated"
max_parallel = 1

[[steps]]
name = "first"
prompt = "write first"
isolation = "worktree"
merge = true

[[steps]]
name = "second"
prompt = "write second"
isolation = "worktree"
merge = true

[[steps]]
name = "after-second"
needs = ["second"]
prompt = "after"

[[steps]]
name = "kept"
prompt = "write kept"
isolation = "worktree"
"#;

#[tokio::test]
async fn a_clean_merge_comes_back_and_a_conflicting_one_fails_and_keeps_its_worktree() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let prompt = prompt_of(request);
        Some(match prompt.strip_prefix("write ") {
            // Each writes shared.txt in its own worktree, and kept.txt.
            Some(who) if answered(request) == 0 => Reply::sse(&tool_call_chunks(
                "w1",
                "write_file",
                &json!({"path": if who == "kept" { "kept.txt" } else { "shared.txt" }, "content": format!("{who}\n")}),
            )),
            Some(who) => Reply::sse(&text_chunks(&format!("{who} wrote"))),
            None => Reply::sse(&text_chunks("after")),
        })
    });
    let h = Harness::new(&mock).await;
    commit_shared(h.workspace.path());
    let done = h.run(TEXT, Posture::Bypass, None).await;

    assert_eq!(done.step("first").instances[0].state, State::Finalized);
    assert_eq!(
        std::fs::read_to_string(h.path("shared.txt"))
            .ok()
            .as_deref(),
        Some("first\n"),
        "the clean merge came back, and the conflicting one did not"
    );
    let second = &done.step("second").instances[0];
    assert_eq!(second.state, State::Failed);
    let reason = second.reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("merge conflict: shared.txt changed in the workspace too"),
        "{reason}"
    );
    assert_eq!(done.step("after-second").status, StepOutcome::Blocked);

    // The conflicting worktree is kept, with the step's version; the merged
    // one is gone; the unmerged one stays, and its file never came back.
    let worktrees = h.path(".cadre/worktrees");
    let kept: Vec<String> = std::fs::read_dir(&worktrees)
        .expect("worktrees")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n != ".gitignore")
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
    let conflicted = kept
        .iter()
        .find(|n| n.contains("-second-"))
        .expect("second's worktree");
    assert!(reason.contains(conflicted.as_str()), "{reason}");
    assert_eq!(
        std::fs::read_to_string(worktrees.join(conflicted).join("shared.txt"))
            .ok()
            .as_deref(),
        Some("second\n")
    );
    assert!(kept.iter().any(|n| n.contains("-kept-")), "{kept:?}");
    assert!(!h.path("kept.txt").exists());
}

#[tokio::test]
async fn a_worktree_step_outside_git_fails_and_says_why() {
    let mock = MockServer::start().await;
    mock.respond_with(|_| Some(Reply::sse(&text_chunks("never"))));
    let h = Harness::new(&mock).await;
    let text = "[workflow]\nname = \"nogit\"\n[[steps]]\nname = \"x\"\nprompt = \"x\"\nisolation = \"worktree\"\n";
    let done = h.run(text, Posture::Bypass, None).await;
    let reason = done.step("x").reason.clone().unwrap_or_default();
    assert!(reason.contains("needs a git repository"), "{reason}");
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn a_worktree_step_cannot_merge_the_next_sessions_config_into_the_workspace() {
    let dir = tempfile::tempdir().expect("dir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    commit_shared(&ws);
    // The step spells `.cadre` so no reader sees it, and changes a file it
    // may change: neither comes back.
    let script = r#"
[[response]]
iteration = 1
repeat = true
[[response.tool_calls]]
name = "bash"
arguments = { command = '''python3 -c "
import os
open('shared.txt','w').write('step')
os.symlink('/etc/passwd', 'escape')
p='.ca'+'dre'
try:
    os.makedirs(p, exist_ok=True); open(p+'/config.local.toml','w').write('posture = 1')
except OSError as e:
    print('the kernel refused:', e)
"''' }

[[response]]
iteration = 2
repeat = true
text = "done"
"#;
    let text = "[workflow]\nname = \"plant\"\n[[steps]]\nname = \"x\"\nprompt = \"x\"\nisolation = \"worktree\"\nmerge = true\n";
    let out = super::endings::run_binary(dir.path(), text, script, &["--posture", "bypass"]).await;
    let done = super::endings::completed(&out);
    assert_eq!(
        (out.code, &done["counts"]["failed"]),
        (1, &json!(1)),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    // Where the sandbox has namespaces the worktree's `.cadre` is read-only
    // and the write never happens; where it has not, the merge refuses it.
    // Either way the symlink is refused at the merge, and nothing of the
    // step's comes back.
    assert!(out.stdout.contains("merge refused:"), "{}", out.stdout);
    assert!(out.stdout.contains("escape"), "{}", out.stdout);
    let planted = std::fs::read_dir(ws.join(".cadre/worktrees"))
        .expect("the refused worktree is kept")
        .flatten()
        .any(|e| e.path().join(".cadre/config.local.toml").exists());
    if planted {
        assert!(
            out.stdout.contains(
                ".cadre/config.local.toml (protected: cadre's project configuration (.cadre))"
            ),
            "{}",
            out.stdout
        );
    }
    assert!(!ws.join(".cadre/config.local.toml").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("shared.txt"))
            .ok()
            .as_deref(),
        Some("base\n"),
        "nothing came back"
    );
}
