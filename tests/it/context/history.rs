//! A long run lets go of what its compactions replaced — the agent holds
//! the latest record and what follows it — while the store keeps every
//! message (CX4): `cadre sessions show --full` lists them all, a fork
//! copies them all, and a resume of the fork sends the compacted form.

use cadre::runtime::message::Message;
use cadre::runtime::store::{Store, store_path};
use serde_json::Value;

use super::{FILE_BYTES, compactions, reader};
use crate::support::cli::{cadre, s};
use crate::support::mock::{MockServer, Overflow, Reply, text_chunks};
use crate::support::{SessionBuilder, turn_end};

const READS: usize = 40;

/// The `conversation:` part of `cadre sessions show ID --full`.
async fn listed(data: &std::path::Path, id: &str) -> Vec<String> {
    let out = cadre(&["sessions", "show", id, "--full", "--data-dir", s(data)]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
        .lines()
        .skip_while(|l| *l != "conversation:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn a_long_run_holds_only_its_view_while_show_full_and_a_fork_see_every_message() {
    let mock = MockServer::start().await;
    mock.enforce_window(32_000, Overflow::OpenAi);
    reader(
        &mock,
        READS,
        Reply::sse(&text_chunks("Read big.txt again and again.")),
    );
    let mut session = SessionBuilder::openai(&mock.url)
        .context_window(8_000)
        .max_iterations(READS as u32 + 20)
        .start()
        .await;
    let text: String = (0..FILE_BYTES / 50)
        .map(|i| format!("line {i:04} of a file that fills the context window.\n"))
        .collect();
    std::fs::write(
        session.workspace_path().join("big.txt"),
        &text[..FILE_BYTES],
    )
    .expect("file");
    let events = session.turn("read big.txt forty times").await;
    assert!(
        matches!(
            turn_end(&events),
            cadre::runtime::protocol::Event::TurnCompleted { .. }
        ),
        "{:?}",
        turn_end(&events)
    );
    let compacted = compactions(&events).len();
    assert!(compacted >= 5, "{compacted} compactions");

    // The agent holds the latest record and what follows it: a few reads,
    // not forty; every message is stored.
    let snapshot = session.handle().snapshot().await.expect("snapshot");
    let stored = 1 + 2 * READS + 1 + compacted;
    assert_eq!(snapshot.stored, stored);
    assert!(
        matches!(snapshot.conversation[0].as_ref(), Message::Compaction(_)),
        "{:?}",
        snapshot.conversation[0]
    );
    let held = snapshot
        .conversation
        .iter()
        .filter(|m| matches!(m.as_ref(), Message::Tool { .. }))
        .count();
    assert!(held < 8, "the agent holds {held} of {READS} reads");
    let id = session.session_id.clone();
    let (ws, data) = session.shutdown_keeping_dirs().await;

    // `sessions show --full` reads every stored message back, the replaced
    // ones marked, every read's whole output kept.
    let all = Store::open(&store_path(data.path()))
        .expect("store")
        .conversation(&id)
        .expect("conversation");
    assert_eq!(all.len(), stored);
    let whole = all
        .iter()
        .filter(|m| matches!(m, Message::Tool { content, .. } if content.len() >= FILE_BYTES))
        .count();
    assert_eq!(whole, READS);
    let lines = listed(data.path(), &id).await;
    assert_eq!(lines.len(), stored, "{lines:#?}");
    for n in 0..READS {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("tool      r{n}: "))),
            "r{n} is not listed: {lines:#?}"
        );
    }
    let replaced = lines.iter().filter(|l| l.ends_with("(replaced)")).count();
    assert!(replaced > 2 * READS / 2, "{replaced} replaced: {lines:#?}");

    // A fork copies all of it, and lists the same.
    let fork = cadre(&["sessions", "fork", &id, "--data-dir", s(data.path())]).await;
    assert_eq!(fork.code, 0, "{}", fork.stderr);
    let forked = fork.stdout.trim().to_string();
    assert_eq!(listed(data.path(), &forked).await, lines);

    // Its resume sends the compacted form, not the history.
    let config = data.path().join("cfg.toml");
    std::fs::write(&config, "[context]\nwindow = 8000\n").expect("config");
    let before = mock.requests().len();
    let resumed = cadre(&[
        "exec",
        "--base-url",
        &mock.url,
        "--model",
        "m",
        "--workspace",
        s(ws.path()),
        "--data-dir",
        s(data.path()),
        "--config",
        s(&config),
        "--resume",
        &forked,
        "and now?",
    ])
    .await;
    assert_eq!(resumed.code, 0, "stderr: {}", resumed.stderr);
    let first: &Value = &mock.requests()[before];
    let messages = first["messages"].as_array().expect("messages");
    assert!(
        messages[1]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("[cadre: context compacted]")),
        "{:?}",
        messages[1]
    );
    let reads = messages.iter().filter(|m| m["role"] == "tool").count();
    assert!(reads < 8, "the resume sent {reads} reads");
    // The fork's history is still whole, the resume's messages after it.
    let after = Store::open(&store_path(data.path()))
        .expect("store")
        .conversation(&forked)
        .expect("conversation");
    assert!(after.len() > stored);
    assert_eq!(
        serde_json::to_value(&after[..stored]).expect("json"),
        serde_json::to_value(&all).expect("json")
    );
}
