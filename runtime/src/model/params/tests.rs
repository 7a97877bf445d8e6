use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn body(params: &ModelParams, field: MaxTokensField) -> Value {
    let wire = WireParams::new(params, field).unwrap();
    let map: serde_json::Map<String, Value> = wire
        .entries()
        .map(|(k, v)| (k.to_string(), serde_json::from_str(v.get()).unwrap()))
        .collect();
    Value::Object(map)
}

fn params(toml_text: &str) -> ModelParams {
    toml::from_str(toml_text).unwrap()
}

#[test]
fn parameters_become_body_fields_and_extra_replaces_a_typed_one() {
    let check = |text: &str, field: MaxTokensField, expected: Value| {
        assert_eq!(body(&params(text), field), expected, "{text}");
    };
    check("", MaxTokensField::MaxTokens, json!({}));
    check(
        "reasoning_effort = \"high\"\nmax_output_tokens = 2048",
        MaxTokensField::MaxTokens,
        json!({"reasoning_effort": "high", "max_tokens": 2048}),
    );
    check(
        "max_output_tokens = 10",
        MaxTokensField::MaxCompletionTokens,
        json!({"max_completion_tokens": 10}),
    );
    check(
        "temperature = 0.2\ntop_p = 0.9\n[extra]\nseed = 7\nchat_template_kwargs = { enable_thinking = false }",
        MaxTokensField::MaxTokens,
        json!({"temperature": 0.2, "top_p": 0.9, "seed": 7,
               "chat_template_kwargs": {"enable_thinking": false}}),
    );
    check(
        "reasoning_effort = \"low\"\n[extra]\nreasoning_effort = \"none\"",
        MaxTokensField::MaxTokens,
        json!({"reasoning_effort": "none"}),
    );
}

#[test]
fn what_no_server_accepts_is_refused() {
    let check = |text: &str, expected: Option<&str>| {
        let got = params(text).validate().err().map(|e| e.to_string());
        assert_eq!(got.as_deref(), expected, "{text}");
    };
    check("temperature = 1.0\ntop_p = 1.0", None);
    check(
        "[extra]\nmessages = []",
        Some("extra.messages: cadre writes this field itself; it cannot be replaced"),
    );
    check(
        "temperature = 3.0",
        Some("temperature 3: it must be between 0 and 2"),
    );
    check(
        "top_p = -0.5",
        Some("top_p -0.5: it must be between 0 and 1"),
    );
    check(
        "max_output_tokens = 0",
        Some("max_output_tokens 0: it must be at least 1"),
    );
    assert!(toml::from_str::<ModelParams>("reasoning_effort = \"extreme\"").is_err());
}

#[test]
fn a_rejection_is_read_only_when_it_names_a_typed_parameter_sent() {
    let configured =
        params("reasoning_effort = \"high\"\nmax_output_tokens = 5\n[extra]\nseed = 1");
    let wire = WireParams::new(&configured, MaxTokensField::MaxTokens).unwrap();
    let check = |message: &str, expected: Option<&str>| {
        assert_eq!(
            wire.rejected(message, &configured).as_deref(),
            expected,
            "{message}"
        );
    };
    check(
        "Unrecognized request argument supplied: reasoning_effort",
        Some("reasoning_effort"),
    );
    check(
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
        Some("max_tokens"),
    );
    // Named only inside a longer name: not this field.
    check("Unsupported parameter: 'max_completion_tokens'", None);
    // The user's own extra fields are never dropped.
    check("Unrecognized request argument supplied: seed", None);
    check("The model is overloaded", None);
    let dropped = wire.without("reasoning_effort");
    assert_eq!(dropped.names().collect::<Vec<_>>(), ["max_tokens", "seed"]);
}

#[test]
fn openai_and_azure_get_max_completion_tokens() {
    let check = |url: &str, expected: MaxTokensField| {
        assert_eq!(MaxTokensField::for_url(url), expected, "{url}");
    };
    check(
        "https://api.openai.com/v1",
        MaxTokensField::MaxCompletionTokens,
    );
    check(
        "https://me.openai.azure.com/openai/v1",
        MaxTokensField::MaxCompletionTokens,
    );
    check("http://localhost:8000/v1", MaxTokensField::MaxTokens);
    check("https://api.deepseek.com/v1", MaxTokensField::MaxTokens);
    check("https://openrouter.ai/api/v1", MaxTokensField::MaxTokens);
}

#[test]
fn parameters_layer_key_by_key() {
    let lower = params("reasoning_effort = \"low\"\ntemperature = 0.5\n[extra]\na = 1\nb = 2");
    let upper = params("reasoning_effort = \"high\"\n[extra]\nb = 3");
    assert_eq!(
        upper.over(&lower),
        params("reasoning_effort = \"high\"\ntemperature = 0.5\n[extra]\na = 1\nb = 3")
    );
    assert_eq!(
        upper.over(&lower).describe(),
        "effort high · temperature 0.5 · extra a, b"
    );
}
