use pretty_assertions::assert_eq;

use super::*;
use crate::model::Effort;

fn providers() -> Providers {
    let configured: BTreeMap<String, ProviderConfig> = toml::from_str(
        r#"
        [local]
        base_url = "http://gpu-box:8000/v1"
        env_key = "LOCAL_LLM_KEY"
        headers = { "X-Team" = "core" }
        "#,
    )
    .unwrap();
    Providers::resolve(&configured, |var| match var {
        "LOCAL_LLM_KEY" => Some("local-secret".into()),
        "OPENAI_API_KEY" => Some(String::new()),
        _ => None,
    })
}

fn session() -> ServerChoice {
    ServerChoice {
        base_url: "https://api.openai.com/v1".into(),
        model: "gpt-5".into(),
        api_key: Some("session-key".into()),
        stream: true,
        options: ServerOptions {
            key_env: Some("OPENAI_API_KEY".into()),
            params: ModelParams {
                reasoning_effort: Some(Effort::High),
                max_output_tokens: Some(4096),
                ..ModelParams::default()
            },
            ..ServerOptions::default()
        },
    }
}

fn low() -> ModelParams {
    ModelParams {
        reasoning_effort: Some(Effort::Low),
        ..ModelParams::default()
    }
}

/// (provider, base_url, model, params) → (URL, model, key, effort, limit), or
/// `None` for the session's own client, or the error.
#[allow(clippy::type_complexity)]
fn check(
    choice: (Option<&str>, Option<&str>, Option<&str>, ModelParams),
    expected: Result<Option<(&str, &str, Option<&str>, Option<Effort>, Option<u32>)>, &str>,
) {
    let (provider, base_url, model, params) = choice;
    let got = choose_server(
        Some(&session()),
        provider,
        base_url,
        model,
        &params,
        &providers(),
    );
    let got = got.map(|c| {
        c.map(|c| {
            (
                c.base_url,
                c.model,
                c.api_key,
                c.options.params.reasoning_effort,
                c.options.params.max_output_tokens,
            )
        })
    });
    let expected = expected
        .map(|c| {
            c.map(|(url, model, key, effort, max)| {
                (
                    url.to_string(),
                    model.to_string(),
                    key.map(str::to_string),
                    effort,
                    max,
                )
            })
        })
        .map_err(str::to_string);
    assert_eq!(got.map_err(|e| e.to_string()), expected);
}

#[test]
fn a_model_choice_finds_its_server_key_and_parameters() {
    // Nothing of its own: the session's client.
    check(
        (None, None, Some("gpt-5-mini"), ModelParams::default()),
        Ok(None),
    );
    // Parameters of its own: the session's server, its own effort, the
    // session's limit inherited.
    check(
        (None, None, Some("gpt-5-mini"), low()),
        Ok(Some((
            "https://api.openai.com/v1",
            "gpt-5-mini",
            Some("session-key"),
            Some(Effort::Low),
            Some(4096),
        ))),
    );
    // A provider: its URL and its own key.
    check(
        (Some("local"), None, Some("qwen3-8b"), low()),
        Ok(Some((
            "http://gpu-box:8000/v1",
            "qwen3-8b",
            Some("local-secret"),
            Some(Effort::Low),
            Some(4096),
        ))),
    );
    // The built-in openai provider with its variable empty: no key.
    check(
        (Some("openai"), None, None, ModelParams::default()),
        Ok(Some((
            "https://api.openai.com/v1",
            "gpt-5",
            None,
            Some(Effort::High),
            Some(4096),
        ))),
    );
    check(
        (Some("nowhere"), None, None, ModelParams::default()),
        Err(
            "provider 'nowhere' is not configured (known: local, openai); define \
             [providers.nowhere] in your user config",
        ),
    );
}

#[test]
fn a_provider_keeps_its_name_variable_and_headers_never_its_key_in_options() {
    let choice = choose_server(
        None,
        Some("local"),
        None,
        Some("m"),
        &ModelParams::default(),
        &providers(),
    )
    .unwrap()
    .unwrap();
    assert_eq!(choice.options.provider.as_deref(), Some("local"));
    assert_eq!(choice.options.key_env.as_deref(), Some("LOCAL_LLM_KEY"));
    assert_eq!(
        choice.options.headers.get("X-Team").map(String::as_str),
        Some("core")
    );
    let recorded = serde_json::to_string(&choice.options).unwrap();
    assert!(!recorded.contains("local-secret"), "{recorded}");
    assert!(!choice.identity().contains("local-secret"));
    assert!(!format!("{:?}", providers()).contains("local-secret"));
}
