//! Issue 26, item 4: an allow rule covers a pipeline into read-only
//! programs (`cargo test 2>&1 | tail -15` under `bash(cargo test:*)`), and
//! a denial names the segment no rule covers.

use super::{Dirs, run, strs};
use crate::support::cli::events;

/// Two scripted calls under `--allow 'bash(touch:*)'`: one whose other
/// segments only read, one that pipes into a writer.
const SCRIPT: &str = r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "bash"
arguments = { command = "touch made.txt 2>&1 | tail -1 && ls | head -5" }
[[response.tool_calls]]
name = "bash"
arguments = { command = "touch other.txt | tee copied.txt" }

[[response]]
iteration = 2
text = "done"
"#;

#[tokio::test]
async fn a_rule_covers_a_pipeline_into_readers_and_a_denial_names_the_writer() {
    let dirs = Dirs::new();
    let script = dirs.ws.path().join("pipes.toml");
    std::fs::write(&script, SCRIPT).expect("script");
    let mut args = vec![
        "exec".to_string(),
        "--script".into(),
        script.display().to_string(),
        "--allow".into(),
        "bash(touch:*)".into(),
        "--output-format".into(),
        "stream-json".into(),
    ];
    args.extend(dirs.flags());
    args.push("make files".into());
    let out = run(&strs(&args), &[], None).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let decided: Vec<(String, String)> = events(&out)
        .iter()
        .filter(|e| e["type"] == "permission.decision" && e["tool"] == "bash")
        .map(|e| {
            let field = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (field("verdict"), field("reason"))
        })
        .collect();
    assert_eq!(decided.len(), 2, "{decided:?}");
    assert_eq!(decided[0].0, "allow", "{decided:?}");
    assert!(decided[0].1.contains("bash(touch:*)"), "{decided:?}");
    assert_eq!(decided[1].0, "deny", "{decided:?}");
    assert!(decided[1].1.contains("`tee copied.txt`"), "{decided:?}");
    assert!(dirs.ws.path().join("made.txt").exists());
    assert!(!dirs.ws.path().join("copied.txt").exists());
}
