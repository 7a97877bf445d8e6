//! `check = { verifier = true }`: a read-only verifier agent judges each
//! step's answer against its prompt and the calls behind it.

use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::Event;
use cadre::workflows::scheduler::State;
use cadre::workflows::scheduler::StepOutcome;
use serde_json::{Value, json};

use super::{Harness, answered, prompt_of};
use crate::support::mock::{MockServer, Reply, text_chunks, tool_call_chunks};

/// The verifier's request starts with this line (and the step's prompt).
const ASKED: &str = "A workflow step was given this task:\n";

fn system(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

const TEXT: &str = r#"
[workflow]
name = "verified"

[[steps]]
name = "good"
prompt = "write good.txt"
check = { verifier = true }

[[steps]]
name = "bad"
prompt = "write bad.txt"
check = { verifier = true }

[[steps]]
name = "after-good"
needs = ["good"]
prompt = "use {{steps.good.output}}"

[[steps]]
name = "after-bad"
needs = ["bad"]
prompt = "use {{steps.bad.output}}"
"#;

#[tokio::test]
async fn a_verifier_pass_verifies_and_a_fail_keeps_the_output_from_dependents() {
    let mock = MockServer::start().await;
    mock.respond_with(|request| {
        let prompt = prompt_of(request);
        let first = answered(request) == 0;
        Some(match prompt.as_str() {
            "write good.txt" | "write bad.txt" if first => {
                let file = prompt.trim_start_matches("write ");
                Reply::sse(&tool_call_chunks(
                    "w1",
                    "write_file",
                    &json!({"path": file, "content": "x"}),
                ))
            }
            "write good.txt" => Reply::sse(&text_chunks("GOOD-ANSWER")),
            "write bad.txt" => Reply::sse(&text_chunks("BAD-ANSWER")),
            p if p.starts_with(&format!("{ASKED}write good.txt")) && first => Reply::sse(
                &tool_call_chunks("r1", "read_file", &json!({"path": "good.txt"})),
            ),
            p if p.starts_with(&format!("{ASKED}write good.txt")) => {
                Reply::sse(&text_chunks("It is there.\nVERDICT: PASS"))
            }
            // The failing verifier tries to write: it cannot.
            p if p.starts_with(&format!("{ASKED}write bad.txt")) && first => {
                Reply::sse(&tool_call_chunks(
                    "v1",
                    "write_file",
                    &json!({"path": "sneaky.txt", "content": "x"}),
                ))
            }
            p if p.starts_with(&format!("{ASKED}write bad.txt")) => Reply::sse(&text_chunks(
                "GAP: bad.txt holds a placeholder\nVERDICT: FAIL",
            )),
            p if p.starts_with("use ") => Reply::sse(&text_chunks("used")),
            _ => return None,
        })
    });
    let h = Harness::new(&mock).await;
    let done = h.run(TEXT, Posture::Bypass, None).await;

    assert_eq!(
        done.states("good", None),
        ["pending", "dispatched", "finalized", "verified"]
    );
    assert_eq!(
        done.states("bad", None),
        ["pending", "dispatched", "finalized", "failed"]
    );
    assert_eq!(
        done.step("bad").reason.as_deref(),
        Some("check failed: the verifier: FAIL: bad.txt holds a placeholder")
    );
    assert_eq!(done.step("after-good").instances[0].state, State::Finalized);
    assert_eq!(done.step("after-bad").status, StepOutcome::Blocked);
    let requests = mock.requests();
    assert!(
        requests.iter().any(|r| prompt_of(r) == "use GOOD-ANSWER"),
        "the verified output was not handed forward"
    );
    assert!(
        !requests
            .iter()
            .any(|r| r.to_string().contains("use BAD-ANSWER")),
        "the failed output was handed forward"
    );

    // The verifier got the claim and the evidence, its contract, and only
    // read-only tools; its write was refused.
    let asked: Vec<&Value> = requests
        .iter()
        .filter(|r| prompt_of(r).starts_with(ASKED))
        .collect();
    assert_eq!(asked.len(), 4, "two verifiers, two requests each");
    let good = prompt_of(
        asked
            .iter()
            .find(|r| prompt_of(r).contains("good"))
            .unwrap(),
    );
    assert!(good.contains("GOOD-ANSWER"), "{good}");
    assert!(good.contains("- write_file good.txt → ok"), "{good}");
    for request in &asked {
        assert!(
            system(request).contains("VERDICT: PASS"),
            "{}",
            system(request)
        );
        let tools = offered(request);
        assert!(tools.contains(&"read_file".to_string()), "{tools:?}");
        for writer in ["write_file", "edit_file", "agent", "workflow"] {
            assert!(
                !tools.contains(&writer.to_string()),
                "{writer} offered: {tools:?}"
            );
        }
    }
    assert!(!h.path("sneaky.txt").exists(), "the verifier wrote a file");

    // It is an agent of the run, and its tokens count: each agent made one
    // tool call (27 tokens) and one answer (15).
    let spawned: Vec<(&str, &str, Posture)> = done
        .events
        .iter()
        .filter_map(|e| match e {
            Event::AgentSpawned {
                agent_id,
                role,
                posture,
                ..
            } => Some((agent_id.as_str(), role.as_str(), *posture)),
            _ => None,
        })
        .collect();
    assert!(
        spawned.contains(&("step:good[0]:verifier", "verifier", Posture::Never)),
        "{spawned:?}"
    );
    assert!(
        spawned.contains(&("step:bad[0]:verifier", "verifier", Posture::Never)),
        "{spawned:?}"
    );
    assert_eq!(done.report.tokens, 42 * 4 + 15);
    let verified_tokens = done.events.iter().find_map(|e| match e {
        Event::StepState {
            step,
            state,
            tokens,
            ..
        } if step == "good" && *state == State::Verified => Some(*tokens),
        _ => None,
    });
    assert_eq!(
        verified_tokens,
        Some(84),
        "the step's tokens include its verifier's"
    );
}
