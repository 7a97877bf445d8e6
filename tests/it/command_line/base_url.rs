//! Item 9: a base URL without its `/v1` gets a 404; the failure names the
//! URL asked and suggests the fix, with no log line besides.

use super::{Dirs, run, strs};
use crate::support::cli::{events, of_type};
use crate::support::mock::MockServer;

/// What exec says when its base URL is `url`: the turn's failure message
/// (stream-json) and its stderr.
async fn failure(url: &str, stream: bool) -> (String, String) {
    let dirs = Dirs::new();
    let mut args: Vec<String> = vec!["exec".into()];
    args.extend(dirs.flags());
    args.extend([
        "--base-url".into(),
        url.into(),
        "--model".into(),
        "m".into(),
    ]);
    if !stream {
        args.push("--no-stream".into());
    }
    args.extend([
        "--output-format".into(),
        "stream-json".into(),
        "hello".into(),
    ]);
    let out = run(&strs(&args), &[], None).await;
    assert_eq!(out.code, 1, "a 404 is not worth a retry: {}", out.stderr);
    let all = events(&out);
    let failed = of_type(&all, "turn.failed");
    let message = failed[0]["message"].as_str().expect("message").to_string();
    (message, out.stderr)
}

#[tokio::test]
async fn a_base_url_without_v1_is_named_with_the_likely_fix() {
    let mock = MockServer::start().await;
    let root = mock.url.trim_end_matches("/v1").to_string();
    for stream in [true, false] {
        let (message, stderr) = failure(&root, stream).await;
        assert!(message.contains("HTTP 404"), "{message}");
        assert!(
            message.contains(&format!("POST {root}/chat/completions answered")),
            "{message}"
        );
        assert!(message.contains(&format!("try {root}/v1")), "{message}");
        assert_eq!(stderr, "", "no log lines by default");
    }
    assert!(mock.requests().is_empty(), "nothing reached /v1");
}
