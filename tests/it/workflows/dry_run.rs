//! `cadre workflow run --dry-run`: the instances a run would launch, in
//! words a person reads, and nothing started.

use crate::support::cli::cadre;

const TEXT: &str = "[workflow]\nname = \"dry\"\nbudget = { tokens = 1000 }\n[[steps]]\nname = \"a\"\nprompt = \"x\"\ncheck = { verifier = true }\n[[steps]]\nname = \"b\"\nneeds = [\"a\"]\nfor_each = [1, 2]\nprompt = \"{{item}}\"\ncheck = \"true\"\n";

/// The dry run of `TEXT` with the model flags `model`.
async fn check(model: &[&str], expected_model: &str) {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("wf.toml");
    std::fs::write(&file, TEXT).expect("write");
    let data = dir.path().join("data");
    let mut args = vec![
        "workflow",
        "run",
        file.to_str().expect("utf-8"),
        "--dry-run",
        "--posture",
        "auto",
        "--data-dir",
        data.to_str().expect("utf-8"),
    ];
    args.extend(model);
    let out = cadre(&args).await;
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    let m = expected_model;
    assert_eq!(
        out.stdout,
        format!(
            "workflow dry · 2 steps · up to 4 at once · posture auto (ceiling none)\n\
             - a: 1 instance · mode work · role - · model {m} · check the verifier\n\
             - b: 2 instances · mode work · role - · model {m} · after a · check `true`\n\
             budget: 1000 tokens, no limit on agents\n"
        )
    );
}

#[tokio::test]
async fn dry_run_names_the_model_in_words_not_debug_text() {
    check(&[], "the built-in demo").await;
    check(&["--script", "s.toml"], "the script s.toml").await;
    check(
        &["--base-url", "http://127.0.0.1:9/v1", "--model", "m-1"],
        "m-1",
    )
    .await;
}
