use std::path::PathBuf;

use super::*;

/// What `choose_model` picks from flags, configuration and a key: every
/// combination of the five inputs, so no way of naming a model runs the
/// demo.
#[test]
fn the_demo_answers_only_when_nothing_names_a_model() {
    let script = [None, Some(PathBuf::from("s.toml"))];
    let url = [None, Some("http://localhost:8000/v1".to_string())];
    let model = [None, Some("m".to_string())];
    let configured = [None, Some(("http://box:1/v1".to_string(), "c".to_string()))];
    let key = [None, Some(ApiKey("sk".into()))];
    let mut cases = 0;
    for s in &script {
        for u in &url {
            for m in &model {
                for c in &configured {
                    for k in &key {
                        cases += 1;
                        let flags = ModelFlags {
                            script: s.clone(),
                            base_url: u.clone(),
                            model: m.clone(),
                            stream: true,
                        };
                        let (curl, cmodel) = c.clone().unzip();
                        let named =
                            s.is_some() || u.is_some() || m.is_some() || c.is_some() || k.is_some();
                        let providers = Providers::default();
                        let configured = Configured {
                            base_url: curl,
                            model: cmodel,
                            provider: None,
                            params: ModelParams::default(),
                            providers: &providers,
                        };
                        let got = choose_model(flags, configured, k.clone());
                        match got {
                            Ok((ModelChoice::Demo, source)) => {
                                assert!(!named, "{s:?} {u:?} {m:?} {c:?} {k:?} ran the demo");
                                assert_eq!(source, ModelSource::Demo);
                            }
                            Ok((ModelChoice::Script(_), source)) => {
                                assert!(s.is_some());
                                assert_eq!(source, ModelSource::Flags);
                            }
                            Ok((
                                ModelChoice::Server {
                                    base_url,
                                    model,
                                    api_key,
                                    ..
                                },
                                source,
                            )) => {
                                assert!(named && s.is_none());
                                let want_url = u
                                    .clone()
                                    .or(c.as_ref().map(|c| c.0.clone()))
                                    .unwrap_or_else(|| OPENAI_BASE_URL.to_string());
                                assert_eq!(base_url, want_url);
                                let want_model = m.clone().or(c.as_ref().map(|c| c.1.clone()));
                                assert_eq!(Some(model), want_model);
                                assert_eq!(api_key.is_some(), k.is_some());
                                let flagged = u.is_some() || m.is_some() || k.is_some();
                                assert_eq!(
                                    source,
                                    if flagged {
                                        ModelSource::Flags
                                    } else {
                                        ModelSource::Config
                                    }
                                );
                            }
                            Ok((other, _)) => panic!("unexpected {other:?}"),
                            Err(err) => {
                                // Only a server with no model name is refused.
                                assert!(s.is_none() && m.is_none() && c.is_none(), "{err:?}");
                                assert!(err.message.contains("--model"), "{}", err.message);
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 32);
}

#[test]
fn a_model_name_alone_means_the_openai_endpoint() {
    let flags = ModelFlags {
        script: None,
        base_url: None,
        model: Some("gpt-4.1".into()),
        stream: true,
    };
    let providers = Providers::default();
    let configured = Configured {
        base_url: None,
        model: None,
        provider: None,
        params: ModelParams::default(),
        providers: &providers,
    };
    let (choice, source) = choose_model(flags, configured, None).expect("a model");
    let ModelChoice::Server {
        base_url, model, ..
    } = choice
    else {
        panic!("{choice:?}");
    };
    assert_eq!(
        (base_url.as_str(), model.as_str()),
        (OPENAI_BASE_URL, "gpt-4.1")
    );
    assert_eq!(source, ModelSource::Flags);
}

#[test]
fn a_configured_provider_gives_the_url_and_its_own_key_and_the_flags_still_win() {
    let local = cadre_runtime::model::providers::ProviderConfig {
        base_url: "http://gpu-box:8000/v1".into(),
        env_key: Some("LOCAL_LLM_KEY".into()),
        ..Default::default()
    };
    let configured = std::collections::BTreeMap::from([("local".to_string(), local)]);
    let providers = Providers::resolve(&configured, |var| {
        (var == "LOCAL_LLM_KEY").then(|| "local-key".to_string())
    });
    let choose = |base_url: Option<&str>, model: Option<&str>| {
        let flags = ModelFlags {
            script: None,
            base_url: base_url.map(str::to_string),
            model: model.map(str::to_string),
            stream: true,
        };
        let configured = Configured {
            base_url: None,
            model: Some("qwen3-coder".into()),
            provider: Some("local".into()),
            params: ModelParams {
                reasoning_effort: Some(cadre_runtime::model::Effort::High),
                ..ModelParams::default()
            },
            providers: &providers,
        };
        match choose_model(flags, configured, Some(ApiKey("openai-key".into()))) {
            Ok((
                ModelChoice::Server {
                    base_url,
                    model,
                    api_key,
                    options,
                    ..
                },
                _,
            )) => Ok((
                base_url,
                model,
                api_key,
                options.provider,
                options.params.reasoning_effort,
            )),
            Ok((other, _)) => panic!("{other:?}"),
            Err(e) => Err(format!("{e:?}")),
        }
    };
    use cadre_runtime::model::Effort::High;
    assert_eq!(
        choose(None, None),
        Ok((
            "http://gpu-box:8000/v1".into(),
            "qwen3-coder".into(),
            Some("local-key".into()),
            Some("local".into()),
            Some(High)
        ))
    );
    assert_eq!(
        choose(None, Some("qwen3-8b")),
        Ok((
            "http://gpu-box:8000/v1".into(),
            "qwen3-8b".into(),
            Some("local-key".into()),
            Some("local".into()),
            Some(High)
        ))
    );
    // --base-url names another server: the provider (and its key) are not used.
    assert_eq!(
        choose(Some("http://other:1/v1"), None),
        Ok((
            "http://other:1/v1".into(),
            "qwen3-coder".into(),
            Some("openai-key".into()),
            None,
            Some(High)
        ))
    );
}
