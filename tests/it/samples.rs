//! Real captured responses of OpenAI-compatible servers, replayed through the
//! real client path.
//!
//! `tests/data/sse/*.json` holds 43 response bodies recorded from 21 servers
//! (format and provenance in `tests/data/sse/README.md`). Each one is served
//! by the mock server exactly as recorded (status, content type, bytes) to an
//! [`OpenAiClient`] (streaming or not, as the sample was recorded), and the
//! drained answer is compared with the sample's `expected`.
//!
//! Every sample is replayed whole and in 5-byte writes (which split lines,
//! `\r\n` pairs and UTF-8 sequences across reads). Streaming samples are also
//! replayed in legal SSE spellings no capture had: CRLF line endings, lone CR
//! line endings, `data:` not followed by a space, and a stream that closes
//! right after its last line with no blank line (the last two stress the
//! client's end-of-stream handling: see `end_with_blank_line` in
//! `runtime/src/model/openai.rs`). Every mismatch of every replay is
//! collected, so one run shows them all.

use std::sync::Arc;

use cadre::runtime::Mode;
use cadre::runtime::message::Message;
use cadre::runtime::model::{
    ModelClient, ModelError, ModelRequest, ModelResponse, OpenAiClient, OpenAiConfig,
    RequestContext, complete,
};
use cadre::runtime::tool::ToolSpec;
use serde::Deserialize;

use crate::support::PATIENCE;
use crate::support::mock::{MockServer, Reply};

/// Where the samples live, inside the repository.
const SAMPLES_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sse");

/// One captured response (the fields the replay needs).
#[derive(Debug, Deserialize)]
struct Sample {
    /// The file name without `.json`; filled in after reading.
    #[serde(skip)]
    name: String,
    streaming: bool,
    status: u16,
    content_type: String,
    body: String,
    expected: Expected,
}

/// What a careful client assembles from the sample.
#[derive(Debug, Deserialize)]
struct Expected {
    text: String,
    reasoning: Option<String>,
    tool_calls: Vec<ExpectedCall>,
    finish_reason: Option<String>,
    usage: Option<ExpectedUsage>,
    /// The server's error message, for samples that carry one.
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ExpectedCall {
    /// `None` when the server sent no usable id: the client must invent one.
    id: Option<String>,
    name: String,
    arguments: String,
}

#[derive(Debug, Deserialize, PartialEq, Eq)]
struct ExpectedUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

/// One way of serving a sample's body.
struct Variant {
    /// E.g. `crlf/5-byte`.
    name: String,
    body: String,
    piece: Option<usize>,
}

fn load_samples() -> Vec<Sample> {
    let mut paths: Vec<_> = std::fs::read_dir(SAMPLES_DIR)
        .unwrap_or_else(|e| panic!("cannot read {SAMPLES_DIR}: {e}"))
        .map(|entry| {
            entry
                .unwrap_or_else(|e| panic!("cannot list {SAMPLES_DIR}: {e}"))
                .path()
        })
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let mut sample: Sample = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not a sample: {e}", path.display()));
            sample.name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            sample
        })
        .collect()
}

/// The body spellings to serve, each whole and in 5-byte pieces.
fn variants(sample: &Sample) -> Vec<Variant> {
    let mut bodies = vec![("plain", sample.body.clone())];
    if sample.streaming {
        // JSON never holds a raw line break inside a string, so these
        // rewrites change only the SSE framing, never the chunks' contents.
        bodies.push(("crlf", sample.body.replace('\n', "\r\n")));
        bodies.push(("cr", sample.body.replace('\n', "\r")));
        bodies.push(("no-space", data_without_space(&sample.body)));
        // Without a final blank line, the last event must still count.
        bodies.push((
            "unterminated",
            sample.body.trim_end_matches(['\n', '\r']).to_string(),
        ));
    }
    let mut out = Vec::new();
    for (spelling, body) in bodies {
        for (cut, piece) in [("whole", None), ("5-byte", Some(5))] {
            out.push(Variant {
                name: format!("{spelling}/{cut}"),
                body: body.clone(),
                piece,
            });
        }
    }
    out
}

/// The body with every `data: ` line prefix written `data:`.
fn data_without_space(body: &str) -> String {
    body.split_inclusive('\n')
        .map(|line| match line.strip_prefix("data: ") {
            Some(rest) => format!("data:{rest}"),
            None => line.to_string(),
        })
        .collect()
}

/// A minimal request: the replies ignore it.
fn request() -> ModelRequest {
    let history: Vec<Arc<Message>> = vec![Arc::new(Message::User {
        content: "hello".into(),
    })];
    let tools: Vec<ToolSpec> = Vec::new();
    ModelRequest {
        system: "s".into(),
        history: history.into(),
        turn: Vec::new(),
        reminder: None,
        tools: tools.into(),
        context: RequestContext {
            agent_id: "main".into(),
            role: "main".into(),
            mode: Mode::Work,
            turn: 1,
            iteration: 1,
            session_id: "samples".into(),
            workspace: "/tmp".into(),
            plan_file: "/tmp/plan.md".into(),
        },
        model: None,
        single_attempt: false,
    }
}

/// A client of the mock server, streaming or not.
fn client(mock: &MockServer, stream: bool) -> OpenAiClient {
    let mut config = OpenAiConfig::new(mock.url.clone(), "m");
    config.stream = stream;
    OpenAiClient::new(config).unwrap_or_else(|e| panic!("client: {e}"))
}

/// Serves one variant of a sample and drains the client's answer.
async fn replay(
    mock: &MockServer,
    client: &OpenAiClient,
    sample: &Sample,
    variant: &Variant,
) -> Result<ModelResponse, ModelError> {
    mock.push([Reply::Raw {
        status: sample.status,
        content_type: sample.content_type.clone(),
        body: variant.body.clone(),
        headers: vec![],
        piece: variant.piece,
    }]);
    let stream = client.stream(request());
    match tokio::time::timeout(PATIENCE, complete(stream)).await {
        Ok(result) => result,
        Err(_) => Err(ModelError::Transport(format!(
            "test: no answer within {PATIENCE:?}"
        ))),
    }
}

/// Compares one replay's result with the sample's `expected`, adding a line
/// per differing field to `mismatches`.
fn check(
    sample: &Sample,
    variant: &Variant,
    result: &Result<ModelResponse, ModelError>,
    mismatches: &mut Vec<String>,
) {
    let mut report = |field: &str, expected: &dyn std::fmt::Debug, got: &dyn std::fmt::Debug| {
        mismatches.push(format!(
            "{} [{}] {field}:\n    expected {expected:?}\n    got      {got:?}",
            sample.name, variant.name
        ));
    };
    let expected = &sample.expected;

    if let Some(message) = &expected.error {
        // An error ends the answer; whatever came before it does not matter.
        match result {
            Err(error) => {
                let right_kind = if sample.status == 200 {
                    matches!(error, ModelError::Provider(_))
                } else {
                    matches!(error, ModelError::Http { status, .. } if *status == sample.status)
                };
                if !right_kind {
                    let kind = if sample.status == 200 {
                        "ModelError::Provider".to_string()
                    } else {
                        format!("ModelError::Http {{ status: {}, .. }}", sample.status)
                    };
                    report("error kind", &kind, error);
                }
                if !error.to_string().contains(message.as_str()) {
                    report("error message", message, &error.to_string());
                }
            }
            Ok(response) => report("result", &format!("Err(.. {message} ..)"), response),
        }
        return;
    }

    let response = match result {
        Ok(response) => response,
        Err(error) => {
            report("result", &"Ok(response)", &format!("Err({error})"));
            return;
        }
    };
    if response.text != expected.text {
        report("text", &expected.text, &response.text);
    }
    if response.reasoning != expected.reasoning {
        report("reasoning", &expected.reasoning, &response.reasoning);
    }
    if response.tool_calls.len() != expected.tool_calls.len() {
        report(
            "tool_calls count",
            &expected.tool_calls,
            &response.tool_calls,
        );
    } else {
        for (n, (want, got)) in expected
            .tool_calls
            .iter()
            .zip(&response.tool_calls)
            .enumerate()
        {
            match &want.id {
                Some(id) if *id != got.id => report(&format!("tool_calls[{n}].id"), id, &got.id),
                None if got.id.is_empty() => {
                    report(
                        &format!("tool_calls[{n}].id"),
                        &"an invented, non-empty id",
                        &got.id,
                    );
                }
                _ => {}
            }
            if want.name != got.name {
                report(&format!("tool_calls[{n}].name"), &want.name, &got.name);
            }
            if want.arguments != got.arguments {
                report(
                    &format!("tool_calls[{n}].arguments"),
                    &want.arguments,
                    &got.arguments,
                );
            }
        }
    }
    if response.finish_reason != expected.finish_reason {
        report(
            "finish_reason",
            &expected.finish_reason,
            &response.finish_reason,
        );
    }
    let usage = response.usage.map(|u| ExpectedUsage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        total_tokens: u.total_tokens,
    });
    if usage != expected.usage {
        report("usage", &expected.usage, &usage);
    }
    // The details budgets need (LLM8), as each server reports them.
    if expected.usage.is_some() {
        let want = USAGE_DETAILS
            .iter()
            .find(|(name, ..)| *name == sample.name)
            .map_or((0, 0), |(_, cached, reasoning)| (*cached, *reasoning));
        let got = response
            .usage
            .map_or((0, 0), |u| (u.cached_tokens, u.reasoning_tokens));
        if got != want {
            report("usage (cached, reasoning)", &want, &got);
        }
    }
}

/// Cached prompt tokens and reasoning tokens of every sample that reports
/// either (every other sample with a usage reports neither): OpenAI's
/// `prompt_tokens_details.cached_tokens` and
/// `completion_tokens_details.reasoning_tokens` (Azure, Cerebras, Crusoe,
/// DeepSeek, Groq, xAI, Z.ai, Mistral's streaming API), DeepSeek's
/// `prompt_cache_hit_tokens`, Mistral's non-streaming `num_cached_tokens`.
const USAGE_DETAILS: &[(&str, u64, u64)] = &[
    ("azure-model-router-content-filter", 0, 64),
    ("cerebras-glm-reasoning-tool-call", 256, 97),
    ("crusoe-nonstream-reasoning-tool-call", 0, 25),
    ("deepseek-nonstream-reasoning-tool-call", 512, 60),
    ("deepseek-reasoner-text-stream", 0, 198),
    ("deepseek-reasoner-tool-call", 320, 39),
    ("groq-gpt-oss-reasoning-tool-call", 0, 23),
    ("mistral-incremental-tool-call", 128, 0),
    ("mistral-nonstream-tool-call", 76, 0),
    ("xai-grok-reasoning-tool-call", 290, 196),
    ("zai-glm-thinking-stream", 0, 561),
];

#[tokio::test]
async fn real_captured_responses_assemble_as_expected_whole_in_pieces_and_respelled() {
    let samples = load_samples();
    assert_eq!(samples.len(), 43, "samples in {SAMPLES_DIR}");
    let mock = MockServer::start().await;
    // One client per mode, each keeping its connection alive across
    // replays, as a session's client does across requests.
    let streaming = client(&mock, true);
    let whole = client(&mock, false);
    let mut mismatches = Vec::new();
    let mut replays = 0;
    for sample in &samples {
        for variant in variants(sample) {
            let client = if sample.streaming { &streaming } else { &whole };
            let result = replay(&mock, client, sample, &variant).await;
            check(sample, &variant, &result, &mut mismatches);
            replays += 1;
        }
    }
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    assert!(
        mismatches.is_empty(),
        "{} mismatches in {replays} replays of {} samples:\n\n{}",
        mismatches.len(),
        samples.len(),
        mismatches.join("\n\n")
    );
}
