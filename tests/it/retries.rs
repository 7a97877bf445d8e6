//! Retries of model requests: which failures, how many times, and how a
//! persistent one ends the turn.

use cadre::runtime::protocol::{Event, FailureCategory};
use pretty_assertions::assert_eq;

use crate::support::mock::{MockServer, Reply, sse_body, text_chunks};
use crate::support::{SessionBuilder, quick_retries, turn_end};

fn retries(events: &[Event]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ModelRetry { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect()
}

fn final_text(events: &[Event]) -> Option<&str> {
    events.iter().rev().find_map(|e| match e {
        Event::AssistantMessage { text, .. } => Some(text.as_str()),
        _ => None,
    })
}

#[tokio::test]
async fn a_500_then_a_200_succeeds_with_exactly_two_requests() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai_with(&mock.url, true, quick_retries(4))
        .start()
        .await;
    mock.push([
        Reply::error(500, "boom"),
        Reply::sse(&text_chunks("recovered")),
    ]);
    let events = session.turn("hi").await;

    assert!(
        matches!(turn_end(&events), Event::TurnCompleted { .. }),
        "{:?}",
        turn_end(&events)
    );
    assert_eq!(final_text(&events), Some("recovered"));
    assert_eq!(retries(&events), [1]);
    assert_eq!(mock.requests().len(), 2);
    session.shutdown().await;
}

#[tokio::test]
async fn a_persistent_503_fails_the_turn_as_retryable_infrastructure_after_bounded_requests() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai_with(&mock.url, true, quick_retries(4))
        .start()
        .await;
    mock.push((0..10).map(|_| Reply::error(503, "overloaded")));
    let events = session.turn("hi").await;

    match turn_end(&events) {
        Event::TurnFailed {
            category,
            retryable,
            message,
            ..
        } => {
            assert_eq!(*category, FailureCategory::Infrastructure);
            assert!(*retryable);
            assert!(message.contains("gave up after 4 attempts"), "{message}");
            assert!(message.contains("HTTP 503"), "{message}");
        }
        other => panic!("expected turn.failed, got {other:?}"),
    }
    assert_eq!(retries(&events), [1, 2, 3]);
    assert_eq!(mock.requests().len(), 4);
    session.shutdown().await;
}

#[tokio::test]
async fn a_stream_dropped_midway_is_retried_and_its_partial_text_discarded() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai_with(&mock.url, true, quick_retries(3))
        .start()
        .await;
    let full = text_chunks("The complete answer arrives on the second attempt.");
    let partial = sse_body(&full[..2]).replace("data: [DONE]\n\n", "");
    mock.push([Reply::BreakAfter { body: partial }, Reply::sse(&full)]);
    let events = session.turn("hi").await;

    assert!(
        matches!(turn_end(&events), Event::TurnCompleted { .. }),
        "{:?}",
        turn_end(&events)
    );
    assert_eq!(
        final_text(&events),
        Some("The complete answer arrives on the second attempt.")
    );
    assert_eq!(retries(&events), [1]);
    assert_eq!(mock.requests().len(), 2);
    let snapshot = session.handle().snapshot().await.expect("snapshot");
    assert_eq!(
        snapshot.conversation.len(),
        2,
        "one user and one assistant message"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn a_400_is_not_retried_and_is_not_reported_as_retryable() {
    let mock = MockServer::start().await;
    let mut session = SessionBuilder::openai_with(&mock.url, true, quick_retries(4))
        .start()
        .await;
    mock.push([Reply::json(
        400,
        serde_json::json!({"error": {"message": "model 'x' does not support tools", "type": "invalid_request_error"}}),
    )]);
    let events = session.turn("hi").await;

    match turn_end(&events) {
        Event::TurnFailed {
            category,
            retryable,
            message,
            ..
        } => {
            assert_eq!(*category, FailureCategory::Infrastructure);
            assert!(!*retryable);
            assert!(message.contains("does not support tools"), "{message}");
        }
        other => panic!("expected turn.failed, got {other:?}"),
    }
    assert_eq!(mock.requests().len(), 1);
    session.shutdown().await;
}
