//! Runs of workflow files: parallel branches, fan-out under admission,
//! failures that block dependents, checks, crashes, postures.

use std::sync::Arc;

use cadre::runtime::model::{ModelClient, ModelRequest, ModelStream, OpenAiClient, OpenAiConfig};
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::Event;
use cadre::runtime::store::RunStatus;
use cadre::workflows::scheduler::State;
use serde_json::json;

use cadre::actors::host::ModelChoice;
use cadre::workflows::scheduler::StepOutcome;

use super::{Counter, Harness, answered, prompt_of};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

/// One tool call (`list_dir .`), then `answer`.
fn look_then(request: &serde_json::Value, answer: &str) -> Reply {
    if answered(request) == 0 {
        Reply::sse(&tool_call_chunks("c1", "list_dir", &json!({"path": "."})))
    } else {
        Reply::sse(&text_chunks(answer))
    }
}

const DIAMOND: &str = r#"
[workflow]
name = "diamond"
max_parallel = 4

[[steps]]
name = "a"
prompt = "step A"

[[steps]]
name = "b"
needs = ["a"]
prompt = "step B after {{steps.a.output}}"

[[steps]]
name = "c"
needs = ["a"]
prompt = "step C"

[[steps]]
name = "d"
needs = ["b", "c"]
prompt = "step D with {{steps.b.output}} and {{steps.c.output}}"
"#;

#[tokio::test]
async fn a_diamond_runs_its_two_middle_steps_at_the_same_time() {
    let mock = MockServer::start().await;
    let both = Arc::new(tokio::sync::Barrier::new(2));
    mock.respond_with(move |request| {
        let prompt = prompt_of(request);
        Some(match prompt.as_str() {
            "step A" => look_then(request, "alpha"),
            // B and C are each answered only once both are in flight.
            p if (p.starts_with("step B") || p == "step C") && answered(request) == 0 => {
                Reply::Together(both.clone(), Box::new(look_then(request, "")))
            }
            p if p.starts_with("step B") => Reply::sse(&text_chunks("bravo")),
            "step C" => Reply::sse(&text_chunks("charlie")),
            p if p.starts_with("step D") => look_then(request, "delta"),
            _ => return None,
        })
    });
    let h = Harness::new(&mock).await;
    let done = h.run(DIAMOND, Posture::Bypass, None).await;
    assert_eq!(
        done.report.status,
        RunStatus::Completed,
        "{:#?}",
        done.report
    );
    let d = mock
        .requests()
        .iter()
        .map(prompt_of)
        .find(|p| p.starts_with("step D"))
        .expect("D ran");
    assert_eq!(d, "step D with bravo and charlie");
    assert_eq!(
        done.states("a", None),
        ["pending", "dispatched", "finalized"]
    );
    // The report lists the calls each step really made.
    assert_eq!(done.step("a").instances[0].calls, ["list_dir . → ok"]);
    assert!(matches!(
        done.events.first(),
        Some(Event::WorkflowStarted { .. })
    ));
    assert!(
        matches!(done.events.last(), Some(Event::WorkflowCompleted { status, .. }) if *status == RunStatus::Completed)
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn a_fan_out_of_a_hundred_items_runs_at_most_eight_at_once() {
    let mock = MockServer::start().await;
    let conversations: Counter = Counter::default();
    let seen = conversations.clone();
    mock.respond_with(move |request| {
        let prompt = prompt_of(request);
        if answered(request) == 0 {
            *seen
                .lock()
                .expect("lock")
                .entry(prompt.clone())
                .or_default() += 1;
        }
        Some(if prompt == "list the files" {
            let items: Vec<String> = (0..100).map(|i| format!("src/f{i}.rs")).collect();
            look_then(request, &serde_json::to_string(&items).expect("json"))
        } else if let Some(file) = prompt.strip_prefix("review ") {
            look_then(request, &format!("reviewed {file}"))
        } else if prompt.starts_with("summarize") {
            Reply::sse(&text_chunks("all reviewed"))
        } else {
            return None;
        })
    });
    let h = Harness::new(&mock).await;
    let text = r#"
[workflow]
name = "fan"
max_parallel = 8

[[steps]]
name = "list"
prompt = "list the files"
output = "json"

[[steps]]
name = "review"
needs = ["list"]
for_each = "{{steps.list.output}}"
prompt = "review {{item}}"

[[steps]]
name = "summary"
needs = ["review"]
prompt = "summarize {{steps.review.outputs}}"
"#;
    let done = h.run(text, Posture::Bypass, None).await;
    assert_eq!(done.report.status, RunStatus::Completed);
    assert!(
        mock.most_in_flight() <= 8,
        "{} in flight",
        mock.most_in_flight()
    );
    let counts = conversations.lock().expect("lock").clone();
    let reviews: Vec<_> = counts
        .iter()
        .filter(|(p, _)| p.starts_with("review "))
        .collect();
    assert_eq!(reviews.len(), 100, "one conversation per item");
    assert!(reviews.iter().all(|(_, n)| **n == 1), "no item ran twice");
    assert_eq!(done.report.counts[&State::Finalized], 102);
    assert_eq!(
        done.states("review", Some(42)),
        ["pending", "dispatched", "finalized"]
    );
}

#[tokio::test]
async fn max_parallel_one_runs_the_steps_one_after_another() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| Some(look_then(request, "ok")));
    let h = Harness::new(&mock).await;
    let text = "[workflow]\nname = \"one\"\nmax_parallel = 1\n[[steps]]\nname = \"x\"\nfor_each = [1, 2, 3, 4]\nprompt = \"item {{item}}\"\n";
    let done = h.run(text, Posture::Bypass, None).await;
    assert_eq!(done.report.status, RunStatus::Completed);
    assert_eq!(mock.most_in_flight(), 1);
    assert_eq!(mock.requests().len(), 8);
}

#[tokio::test]
async fn a_failing_step_blocks_its_dependents_while_its_siblings_finish() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let prompt = prompt_of(request);
        Some(match prompt.as_str() {
            "step A" => look_then(request, "alpha"),
            p if p.starts_with("step B") => Reply::error(400, "this model cannot do B"),
            "step C" => look_then(request, "charlie"),
            _ => return None,
        })
    });
    let h = Harness::new(&mock).await;
    let done = h.run(DIAMOND, Posture::Bypass, None).await;
    assert_eq!(done.report.status, RunStatus::Failed);
    assert_eq!(done.step("b").status, StepOutcome::Failed);
    assert_eq!(done.step("c").status, StepOutcome::Succeeded);
    let d = done.step("d");
    assert_eq!(d.status, StepOutcome::Blocked);
    assert!(
        d.reason
            .as_deref()
            .is_some_and(|r| r.starts_with("needs 'b', which failed")),
        "{d:?}"
    );
    assert!(
        !mock
            .requests()
            .iter()
            .any(|r| prompt_of(r).starts_with("step D"))
    );
}

#[tokio::test]
async fn a_failed_check_keeps_the_output_from_dependents() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let prompt = prompt_of(request);
        Some(match prompt.as_str() {
            "write it" => look_then(request, "UNVERIFIED-CLAIM"),
            "ok it" => look_then(request, "fine"),
            _ => return None,
        })
    });
    let h = Harness::new(&mock).await;
    let text = r#"
[workflow]
name = "checks"

[[steps]]
name = "bad"
prompt = "write it"
check = "test -e does-not-exist"

[[steps]]
name = "good"
prompt = "ok it"
check = "true"

[[steps]]
name = "after"
needs = ["bad"]
prompt = "use {{steps.bad.output}}"
"#;
    let done = h.run(text, Posture::Bypass, None).await;
    assert_eq!(done.step("good").instances[0].state, State::Verified);
    assert_eq!(
        done.states("bad", None),
        ["pending", "dispatched", "finalized", "failed"]
    );
    assert!(
        done.step("bad")
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("check failed") && r.contains("exit 1")),
        "{:?}",
        done.step("bad")
    );
    assert_eq!(done.step("after").status, StepOutcome::Blocked);
    assert!(
        !mock
            .requests()
            .iter()
            .any(|r| r.to_string().contains("use UNVERIFIED-CLAIM")),
        "the unverified output was handed forward"
    );
    assert!(!done.report.all_checks_passed);
}

#[tokio::test]
async fn a_step_under_a_never_caller_cannot_write() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(if answered(request) == 0 {
            Reply::sse(&tool_call_chunks(
                "w1",
                "write_file",
                &json!({"path": "pwned.txt", "content": "x"}),
            ))
        } else {
            Reply::sse(&text_chunks("tried"))
        })
    });
    let h = Harness::new(&mock).await;
    // The workflow asks for bypass; the caller's never wins.
    let text = "[workflow]\nname = \"w\"\nposture = \"bypass\"\n[[steps]]\nname = \"w\"\nprompt = \"write\"\n";
    let done = h.run(text, Posture::Never, None).await;
    assert_eq!(done.report.status, RunStatus::Completed);
    assert!(
        !h.path("pwned.txt").exists(),
        "a never caller's step wrote a file"
    );
    let refusal = mock.requests()[1].to_string();
    assert!(
        refusal.contains("denied") || refusal.contains("not allowed"),
        "{refusal}"
    );
    // And a workflow ceiling narrower than the caller holds too.
    let text = "[workflow]\nname = \"w\"\nposture = \"never\"\n[[steps]]\nname = \"w\"\nprompt = \"write\"\n";
    let done = h.run(text, Posture::Bypass, None).await;
    assert_eq!(done.report.status, RunStatus::Completed);
    assert!(
        !h.path("pwned.txt").exists(),
        "the workflow's ceiling did not hold"
    );
}

/// A model client that panics, inside the turn, for the role `boom`.
struct PanicsForBoom(Arc<dyn ModelClient>);

impl ModelClient for PanicsForBoom {
    fn model(&self) -> &str {
        self.0.model()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        if &*request.context.role == "boom" {
            panic!("the model client broke on this step");
        }
        self.0.stream(request)
    }
}

#[tokio::test]
async fn a_panicking_step_fails_alone() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| Some(look_then(request, "fine")));
    let client =
        OpenAiClient::new(OpenAiConfig::new(mock.url.clone(), "mock-model")).expect("client");
    let model = Arc::new(PanicsForBoom(Arc::new(client)));
    let h = Harness::with_model(ModelChoice::Client(model)).await;
    let text = r#"
[workflow]
name = "crash"

[[steps]]
name = "boom"
prompt = "explode"

[[steps]]
name = "calm"
prompt = "stay calm"

[[steps]]
name = "after"
needs = ["boom"]
prompt = "after the crash"
"#;
    let done = h.run(text, Posture::Bypass, None).await;
    assert_eq!(done.step("calm").status, StepOutcome::Succeeded);
    let boom = done.step("boom");
    assert_eq!(boom.status, StepOutcome::Failed);
    assert!(
        boom.reason
            .as_deref()
            .is_some_and(|r| r.contains("crashed")),
        "{boom:?}"
    );
    assert_eq!(done.step("after").status, StepOutcome::Blocked);
    assert!(!done.run_id.is_empty());
}

#[tokio::test]
async fn an_authentication_error_stops_dispatching_and_says_so() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(if prompt_of(request) == "item 1" {
            Reply::error(401, "invalid api key")
        } else {
            look_then(request, "ok")
        })
    });
    let h = Harness::new(&mock).await;
    let text = "[workflow]\nname = \"auth\"\nmax_parallel = 1\n[[steps]]\nname = \"x\"\nfor_each = [1, 2, 3]\nprompt = \"item {{item}}\"\n";
    let done = h.run(text, Posture::Bypass, None).await;
    let halted = done.report.halted.clone().unwrap_or_default();
    assert!(
        halted.starts_with("the model endpoint refused step:x[0]"),
        "{halted}"
    );
    assert_eq!(done.step("x").instances[1].state, State::Cancelled);
    assert_eq!(
        mock.requests().len(),
        1,
        "nothing was sent after the refusal"
    );
}

#[tokio::test]
async fn a_step_past_its_timeout_fails_and_keeps_its_transcript() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        Some(if prompt_of(request) == "slow" && answered(request) == 1 {
            Reply::HangAfter {
                body: String::new(),
            }
        } else {
            look_then(request, "fast")
        })
    });
    let h = Harness::new(&mock).await;
    let text = "[workflow]\nname = \"slow\"\n[[steps]]\nname = \"slow\"\nprompt = \"slow\"\ntimeout = \"300ms\"\n[[steps]]\nname = \"fast\"\nprompt = \"fast\"\n";
    let done = h.run(text, Posture::Bypass, None).await;
    let slow = done.step("slow");
    assert_eq!(slow.status, StepOutcome::Failed);
    let reason = slow.reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("timed out after 300ms; its partial transcript is kept under agent"),
        "{reason}"
    );
    assert_eq!(done.step("fast").status, StepOutcome::Succeeded);
}

#[tokio::test]
async fn one_limiter_per_endpoint_holds_every_step_of_every_run() {
    let mock = MockServer::start().await;
    // Each reply takes a while, so requests would overlap without the limit.
    mock.respond_with(|request| {
        let Reply::Stream { body, .. } = look_then(request, "ok") else {
            return None;
        };
        Some(Reply::Stream {
            body,
            piece: None,
            gap: std::time::Duration::from_millis(30),
        })
    });
    let h = Harness::limited(&mock, 2).await;
    let text = "[workflow]\nname = \"wide\"\nmax_parallel = 6\n[[steps]]\nname = \"x\"\nfor_each = [1, 2, 3, 4, 5, 6]\nprompt = \"item {{item}}\"\n";
    // Two runs at once on one host share the endpoint's two slots.
    let (a, b) = tokio::join!(
        h.run(text, Posture::Bypass, None),
        h.run(text, Posture::Bypass, None)
    );
    assert_eq!(
        (a.report.status, b.report.status),
        (RunStatus::Completed, RunStatus::Completed)
    );
    assert!(
        mock.most_in_flight() <= 2,
        "{} requests at once",
        mock.most_in_flight()
    );
    assert_eq!(mock.requests().len(), 24);
}
