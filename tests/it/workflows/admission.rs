//! What a run does when the model endpoint pushes back: a transient failure
//! (429 past the client's retries) re-queues the instance; an exhausted
//! quota stops dispatching and says so.

use std::sync::{Arc, Mutex};

use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::Event;
use cadre::runtime::store::RunStatus;
use cadre::workflows::scheduler::State;
use serde_json::json;

use super::{Harness, answered, prompt_of};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

/// One tool call, then `answer`.
fn look_then(request: &serde_json::Value, answer: &str) -> Reply {
    if answered(request) == 0 {
        Reply::sse(&tool_call_chunks("c1", "list_dir", &json!({"path": "."})))
    } else {
        Reply::sse(&text_chunks(answer))
    }
}

const TWO_ITEMS: &str = "[workflow]\nname = \"pushback\"\nmax_parallel = 1\n[[steps]]\nname = \"x\"\nfor_each = [0, 1]\nprompt = \"item {{item}}\"\n";

#[tokio::test]
async fn a_rate_limited_instance_is_requeued_behind_the_others_and_then_runs() {
    let mock = MockServer::start().await;
    // The first two requests of item 0 (all of the client's attempts) are
    // refused with 429; after that the endpoint answers.
    let refused = Arc::new(Mutex::new(0));
    let order = Arc::new(Mutex::new(Vec::new()));
    let (r, o) = (refused.clone(), order.clone());
    mock.respond_with(move |request| {
        let prompt = prompt_of(request);
        o.lock().unwrap().push(prompt.clone());
        let mut refused = r.lock().unwrap();
        if prompt == "item 0" && *refused < 2 {
            *refused += 1;
            return Some(Reply::error(429, "slow down"));
        }
        Some(look_then(request, &format!("done {prompt}")))
    });
    let h = Harness::new(&mock).await;
    let done = h.run(TWO_ITEMS, Posture::Bypass, None).await;
    assert_eq!(done.report.status, RunStatus::Completed);
    assert_eq!(done.step("x").instances[0].state, State::Finalized);
    assert_eq!(done.step("x").instances[1].state, State::Finalized);
    // Item 1 ran while item 0 waited its turn again.
    assert_eq!(
        *order.lock().unwrap(),
        ["item 0", "item 0", "item 1", "item 1", "item 0", "item 0"]
    );
    let requeued = done.events.iter().find_map(|e| match e {
        Event::StepState {
            index: Some(0),
            state,
            reason: Some(reason),
            ..
        } if *state == State::Pending => Some(reason.clone()),
        _ => None,
    });
    assert!(
        requeued.as_deref().is_some_and(|r| r
            .starts_with("re-queued (1 of 3) after a transient model failure")
            && r.contains("HTTP 429")
            && r.contains("slow down")),
        "{requeued:?}"
    );
}

#[tokio::test]
async fn an_exhausted_quota_stops_dispatching_and_says_so() {
    let mock = MockServer::start().await;
    mock.respond_with(|_| {
        Some(Reply::Raw {
            status: 429,
            content_type: "application/json".into(),
            body: json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota"}})
                .to_string(),
            headers: Vec::new(),
            piece: None,
        })
    });
    let h = Harness::new(&mock).await;
    let done = h.run(TWO_ITEMS, Posture::Bypass, None).await;
    let halted = done.report.halted.clone().unwrap_or_default();
    assert!(
        halted.starts_with("the model endpoint refused step:x[0]")
            && halted.contains("You exceeded your current quota"),
        "{halted}"
    );
    assert_eq!(done.step("x").instances[0].state, State::Failed);
    assert_eq!(done.step("x").instances[1].state, State::Cancelled);
    assert_eq!(
        mock.requests().len(),
        1,
        "an exhausted quota is not retried"
    );
}

#[tokio::test]
async fn a_steps_sub_agents_spend_the_runs_token_budget() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let prompt = prompt_of(request);
        Some(match (prompt.as_str(), answered(request)) {
            ("delegate", 0) => Reply::sse(&tool_call_chunks(
                "a1",
                "agent",
                &json!({"action": "spawn", "prompt": "sub work"}),
            )),
            ("delegate", _) => Reply::sse(&text_chunks("delegated")),
            ("sub work", _) => Reply::sse(&text_chunks("sub done")),
            _ => Reply::sse(&text_chunks("after")),
        })
    });
    let h = Harness::new(&mock).await;
    // The step spends 27 + 15 tokens itself and its sub-agent 15: only
    // with the sub-agent's is the budget of 50 spent before `then` starts.
    let text = "[workflow]\nname = \"nested\"\nbudget = { tokens = 50 }\n[[steps]]\nname = \"lead\"\nprompt = \"delegate\"\n[[steps]]\nname = \"then\"\nneeds = [\"lead\"]\nprompt = \"go on\"\n";
    let done = h.run(text, Posture::Bypass, None).await;
    assert!(
        mock.requests().iter().any(|r| prompt_of(r) == "sub work"),
        "the sub-agent never ran"
    );
    assert_eq!(done.report.tokens, 57);
    assert_eq!(
        done.report.halted.as_deref(),
        Some("the run's token budget (50) is spent")
    );
    assert!(
        !mock.requests().iter().any(|r| prompt_of(r) == "go on"),
        "a step started past the budget"
    );
}

/// Issue 26, item 8: a write outside a step's `scope` is refused by the
/// file-scope gate, and the decision says so (it once said "mode gate").
#[tokio::test]
async fn a_write_outside_a_steps_scope_is_refused_by_the_file_scope_gate() {
    use cadre::actors::host::ModelChoice;
    use cadre::runtime::permission::{Layer, Posture};
    use cadre::runtime::protocol::Event;

    let script = "[[response]]\niteration = 1\n[[response.tool_calls]]\nname = \"write_file\"\n\
                  arguments = { path = \"outside.txt\", content = \"x\" }\n\
                  [[response.tool_calls]]\nname = \"write_file\"\n\
                  arguments = { path = \"inside/a.txt\", content = \"x\" }\n\n\
                  [[response]]\niteration = 2\ntext = \"done\"\n";
    let harness = super::Harness::with_model(ModelChoice::ScriptText {
        text: script.into(),
        name: "script.toml".into(),
    })
    .await;
    let workflow = "[workflow]\nname = \"scoped\"\n[[steps]]\nname = \"write\"\nprompt = \"write\"\nscope = [\"inside/**\"]\n";
    let finished = harness.run(workflow, Posture::Bypass, None).await;
    let decisions: Vec<(Layer, String)> = finished
        .events
        .iter()
        .filter_map(|e| match e {
            Event::PermissionDecision { decision, line, .. } => {
                Some((decision.layer, line.clone()))
            }
            _ => None,
        })
        .collect();
    let refused = decisions
        .iter()
        .find(|(layer, _)| *layer == Layer::Scope)
        .unwrap_or_else(|| panic!("no file-scope decision: {decisions:?}"));
    assert!(
        refused
            .1
            .starts_with("The file scope denied 'write_file' (file-scope gate)"),
        "{refused:?}"
    );
    assert!(!harness.path("outside.txt").exists());
    assert!(harness.path("inside/a.txt").exists());
}
