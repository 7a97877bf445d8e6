//! A kill -9 in the middle of a compaction (CX4): the process dies while
//! the summary request is out. Nothing stored is lost or rewritten, and
//! the resumed session compacts again (or needs not) and finishes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cadre::runtime::message::Message;
use cadre::runtime::store::{Store, store_path};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use super::{FILE_BYTES, is_summary};
use crate::support::PATIENCE;
use crate::support::cli::{cadre, dirs, events, of_type, s, spawn_cadre};
use crate::support::mock::{MockServer, Overflow, Reply, text_chunks, tool_call_chunks};

fn stored(data: &std::path::Path, id: &str) -> Vec<Message> {
    Store::open(&store_path(data))
        .expect("store")
        .conversation(id)
        .expect("conversation")
}

#[tokio::test]
async fn a_kill_during_a_compaction_loses_nothing_and_the_resume_finishes() {
    let mock = MockServer::start().await;
    mock.enforce_window(32_000, Overflow::OpenAi);
    // The first summary request hangs, and says it arrived; later ones
    // are answered.
    let first_summary = Arc::new(AtomicBool::new(true));
    let summarizing = Arc::new(tokio::sync::Notify::new());
    let reads = Arc::new(AtomicUsize::new(0));
    {
        let (first_summary, summarizing) = (first_summary.clone(), summarizing.clone());
        mock.respond_with(move |request: &Value| {
            if is_summary(request) {
                if first_summary.swap(false, Ordering::SeqCst) {
                    summarizing.notify_one();
                    return Some(Reply::HangAfter {
                        body: String::new(),
                    });
                }
                return Some(Reply::sse(&text_chunks("Reading big.txt, many times.")));
            }
            let n = reads.fetch_add(1, Ordering::SeqCst);
            Some(if n < 14 {
                Reply::sse(&tool_call_chunks(
                    &format!("r{n}"),
                    "read_file",
                    &json!({"path": "big.txt"}),
                ))
            } else {
                Reply::sse(&text_chunks("done"))
            })
        });
    }
    let (ws, data) = dirs();
    let line = "a line of a file that fills the context window.\n";
    let text = line.repeat(FILE_BYTES / line.len() + 1);
    std::fs::write(ws.path().join("big.txt"), &text[..FILE_BYTES]).expect("file");
    let config = data.path().join("cfg.toml");
    std::fs::write(&config, "[context]\nwindow = 8000\n").expect("config");
    let common = [
        "--base-url",
        mock.url.as_str(),
        "--model",
        "m",
        "--posture",
        "bypass",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--config",
        s(&config),
        "--output-format",
        "stream-json",
    ];
    let mut args = vec!["exec"];
    args.extend(common);
    args.push("read big.txt many times");
    let mut child = spawn_cadre(&args);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let started: Value =
        serde_json::from_str(&lines.next_line().await.expect("read").expect("a line"))
            .expect("json");
    let id = started["session_id"].as_str().expect("id").to_string();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    tokio::time::timeout(PATIENCE, summarizing.notified())
        .await
        .expect("a summary request in time");
    child.start_kill().expect("SIGKILL");
    let _ = child.wait().await;

    // Everything up to the kill is stored, and no half compaction.
    let before = stored(data.path(), &id);
    assert!(before.len() >= 3, "{} messages", before.len());
    assert!(
        before.iter().all(|m| !matches!(m, Message::Compaction(_))),
        "a compaction stored without its summary"
    );

    let mut args = vec!["exec", "--resume", id.as_str()];
    args.extend(common);
    args.push("go on");
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&out);
    assert!(!of_type(&events, "turn.completed").is_empty());
    assert_eq!(mock.violations(), Vec::<String>::new());
    // What was stored before the kill is still there, unchanged, first.
    let after = stored(data.path(), &id);
    assert!(after.len() > before.len());
    assert_eq!(
        serde_json::to_value(&after[..before.len()]).expect("json"),
        serde_json::to_value(&before).expect("json")
    );
}
