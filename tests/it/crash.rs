//! A crash inside a turn fails that turn, not the session.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cadre::runtime::Mode;
use cadre::runtime::model::{ModelClient, ModelRequest, ModelStream, Script, ScriptedModel};
use cadre::runtime::protocol::{Event, FailureCategory, Op};

use crate::support::{SessionBuilder, turn_end};

/// A model client whose first request panics inside the turn actor.
struct CrashOnce {
    calls: AtomicU32,
    inner: ScriptedModel,
}

impl ModelClient for CrashOnce {
    fn model(&self) -> &str {
        "crash-once"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("model client bug");
        }
        self.inner.stream(request)
    }
}

#[tokio::test]
async fn a_turn_that_panics_fails_alone_and_the_next_message_runs() {
    let script = Script::from_toml(
        r#"
[[response]]
repeat = true
text = "fine now"
"#,
        "inline",
    )
    .expect("script");
    let model = CrashOnce {
        calls: AtomicU32::new(0),
        inner: ScriptedModel::new(script, "scripted"),
    };
    let mut session = SessionBuilder::model(Arc::new(model)).start().await;

    let first = session.turn("one").await;
    match turn_end(&first) {
        Event::TurnFailed {
            category, message, ..
        } => {
            assert_eq!(*category, FailureCategory::Agent);
            assert!(message.contains("crashed"), "{message}");
        }
        other => panic!("expected a failed turn, got {other:?}"),
    }

    // The session is alive: it changes mode and runs the next turn.
    session.submit(Op::SetMode { mode: Mode::Plan });
    let changed = session
        .events_until(|e| matches!(e, Event::ModeChanged { .. }))
        .await;
    assert_eq!(
        changed.last(),
        Some(&Event::ModeChanged { mode: Mode::Plan })
    );
    let second = session.turn("two").await;
    assert!(
        matches!(turn_end(&second), Event::TurnCompleted { turn_id: 2, .. }),
        "{:?}",
        turn_end(&second)
    );
    let snapshot = session.handle().snapshot().await.expect("snapshot");
    assert_eq!(snapshot.turns, 2);
    session.shutdown().await;
}
