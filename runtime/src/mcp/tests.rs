use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::config::{McpServerEntry, merge, read_mcp_json};
use super::tools::{MAX_RESULT, definition, render, safety, tool_name};
use super::*;
use crate::permission::rules::Scope;
use crate::tool::Safety;

fn check_name(server: &str, tool: &str, expected: &str) {
    assert_eq!(tool_name(server, tool), expected, "{server} / {tool}");
}

#[test]
fn tool_names_are_prefixed_and_cleaned() {
    check_name("fs", "read_file", "mcp_fs_read_file");
    check_name("my-srv", "get.thing/now", "mcp_my-srv_get_thing_now");
    check_name("fs", "é", "mcp_fs__");
    let long = "x".repeat(80);
    let a = tool_name("fs", &long);
    let b = tool_name("fs", &format!("{long}y"));
    assert_eq!((a.len(), b.len()), (64, 64));
    assert_ne!(a, b, "long names keep a hash of the whole");
}

#[test]
fn only_a_trusted_servers_read_only_hint_makes_a_tool_read_only() {
    let check = |trusted, hint, expected| assert_eq!(safety(trusted, hint), expected);
    check(true, Some(true), Safety::ReadOnly);
    check(true, Some(false), Safety::SideEffect);
    check(true, None, Safety::SideEffect);
    check(false, Some(true), Safety::SideEffect);
    check(false, None, Safety::SideEffect);
}

#[test]
fn a_definition_carries_the_schema_the_timeout_and_the_path_argument() {
    let mut server = McpServerConfig::new("fs", "srv");
    server.trusted = true;
    server.tool_timeout = Duration::from_secs(7);
    let tool = json!({
        "name": "write_file",
        "description": "Writes a file.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "annotations": {"readOnlyHint": false}
    });
    let def = definition(&server, &tool).unwrap();
    assert_eq!(def.name, "mcp_fs_write_file");
    assert_eq!(def.safety, Safety::SideEffect);
    assert_eq!(def.timeout, Some(Duration::from_secs(7)));
    assert_eq!(def.path_arg.as_deref(), Some("path"));
    assert_eq!(def.input_schema, tool["inputSchema"]);
    assert!(
        def.description
            .starts_with("[MCP server 'fs', tool 'write_file'] Writes")
    );
    let no_schema = json!({"name": "x"});
    assert!(definition(&server, &no_schema).is_err());
}

fn check_path(path_schema: Value, expected: Option<Value>) {
    let server = McpServerConfig::new("fs", "srv");
    let mut schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
    if !path_schema.is_null() {
        schema["properties"]["path"] = path_schema;
    }
    let tool = json!({"name": "write", "inputSchema": schema});
    let def = definition(&server, &tool).unwrap();
    assert_eq!(
        (
            def.path_arg.is_some(),
            def.input_schema.pointer("/properties/path").cloned()
        ),
        (expected.is_some(), expected),
        "{tool}"
    );
    assert_eq!(
        def.input_schema["properties"]["text"],
        json!({"type": "string"})
    );
}

#[test]
fn a_path_the_schema_does_not_type_as_a_string_escapes_the_gates() {
    let string = json!({"type": "string", "description": "where"});
    check_path(string.clone(), Some(string));
    check_path(json!(null), None);
    let narrowed = |declared: Value| Some(json!({"allOf": [declared, {"type": "string"}]}));
    check_path(json!({}), narrowed(json!({})));
    let any_of = json!({"anyOf": [{"type": "string"}, {"type": "array"}]});
    check_path(any_of.clone(), narrowed(any_of));
    check_path(json!({"type": "array"}), narrowed(json!({"type": "array"})));
    check_path(
        json!({"$ref": "#/$defs/p"}),
        narrowed(json!({"$ref": "#/$defs/p"})),
    );
}

fn check_render(result: Value, expected: Result<&str, &str>) {
    let got = render(&result);
    match expected {
        Ok(text) => assert_eq!(got, Ok(text.to_string()), "{result}"),
        Err(text) => assert_eq!(
            got.map_err(|e| e.message),
            Err(text.to_string()),
            "{result}"
        ),
    }
}

#[test]
fn results_map_text_and_structured_content_and_summarise_the_rest() {
    check_render(
        json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
        Ok("a\nb"),
    );
    check_render(
        json!({"content": [{"type": "text", "text": "7"}], "structuredContent": {"result": 7}}),
        Ok("7"),
    );
    check_render(
        json!({"content": [], "structuredContent": {"n": 2}}),
        Ok("{\"n\":2}"),
    );
    check_render(
        json!({"content": [{"type": "image", "mimeType": "image/png", "data": "AAAA"}]}),
        Ok("[image image/png, about 3 bytes]"),
    );
    check_render(
        json!({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "hi"}}]}),
        Ok("[resource file:///a]\nhi"),
    );
    check_render(
        json!({"content": [{"type": "resource", "resource": {"uri": "u", "blob": "AAAAAAAA", "mimeType": "x/y"}}]}),
        Ok("[resource u: x/y, about 6 bytes]"),
    );
    check_render(
        json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}),
        Err("no such file"),
    );
    check_render(
        json!({"content": [], "isError": true}),
        Err("the tool reported an error"),
    );
}

#[test]
fn a_huge_result_is_bounded_like_bash_output() {
    let big = "x".repeat(10 * MAX_RESULT);
    let out = render(&json!({"content": [{"type": "text", "text": big}]})).unwrap();
    assert!(out.len() < MAX_RESULT + 100, "{}", out.len());
    assert!(out.contains("bytes omitted"));
}

fn entry(toml_text: &str) -> BTreeMap<String, McpServerEntry> {
    #[derive(serde::Deserialize)]
    struct File {
        mcp_servers: BTreeMap<String, McpServerEntry>,
    }
    toml::from_str::<File>(toml_text).unwrap().mcp_servers
}

type Layer = (BTreeMap<String, McpServerEntry>, Scope, PathBuf);

fn merged(layers: &[Layer]) -> Result<Vec<McpServerConfig>, crate::config::ConfigError> {
    merged_with(layers, crate::trust::Trust::Trusted)
}

fn merged_with(
    layers: &[Layer],
    trust: crate::trust::Trust,
) -> Result<Vec<McpServerConfig>, crate::config::ConfigError> {
    let refs: Vec<_> = layers
        .iter()
        .map(|(e, s, p)| (e, *s, p.as_path()))
        .collect();
    merge(&refs, trust)
}

#[test]
fn an_untrusted_projects_server_never_starts_even_when_the_user_enabled_it() {
    use crate::trust::{Trust, Untrusted};
    let layers = [
        project("[mcp_servers.web]\ncommand = \"w\"\n"),
        local("[mcp_servers.web]\nenabled = true\n"),
        user("[mcp_servers.fs]\ncommand = \"a\"\n"),
    ];
    for why in [Untrusted::Never, Untrusted::Changed, Untrusted::Unrecorded] {
        let servers = merged_with(&layers, Trust::Untrusted(why)).unwrap();
        let state: Vec<(&str, Option<&str>)> = servers
            .iter()
            .map(|s| (s.name.as_str(), s.disabled.as_deref()))
            .collect();
        assert_eq!(state[0], ("fs", None), "the user's own server starts");
        assert_eq!(state[1].0, "web");
        assert!(
            state[1].1.is_some_and(|why| why.contains("not trusted")),
            "{state:?}"
        );
    }
    let trusted = merged_with(&layers, Trust::Trusted).unwrap();
    assert_eq!(
        trusted[1].disabled, None,
        "trusted, the user's enable holds"
    );
}

fn user(text: &str) -> Layer {
    (entry(text), Scope::User, "user.toml".into())
}
fn project(text: &str) -> Layer {
    (entry(text), Scope::Project, "project.toml".into())
}
fn local(text: &str) -> Layer {
    (entry(text), Scope::Local, "local.toml".into())
}

/// Each case: the layers, and per server (name, command, trusted, disabled?).
fn check_merge(layers: &[Layer], expected: &[(&str, &str, bool, bool)]) {
    let got: Vec<(String, String, bool, bool)> = merged(layers)
        .unwrap()
        .into_iter()
        .map(|s| (s.name, s.command, s.trusted, s.disabled.is_some()))
        .collect();
    let expected: Vec<(String, String, bool, bool)> = expected
        .iter()
        .map(|(n, c, t, d)| (n.to_string(), c.to_string(), *t, *d))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn a_project_cannot_start_trust_or_take_over_a_server_on_its_own() {
    // The user's server starts, untrusted unless said.
    check_merge(
        &[user("[mcp_servers.fs]\ncommand = \"a\"\n")],
        &[("fs", "a", false, false)],
    );
    // A project's server does not start until the user's config enables it,
    // and its `trusted` is ignored.
    let p = project("[mcp_servers.web]\ncommand = \"w\"\ntrusted = true\n");
    check_merge(std::slice::from_ref(&p), &[("web", "w", false, true)]);
    check_merge(
        &[
            p.clone(),
            local("[mcp_servers.web]\nenabled = true\ntrusted = true\n"),
        ],
        &[("web", "w", true, false)],
    );
    // A project never replaces the user's command, nor enables what the
    // user disabled; it may disable.
    check_merge(
        &[
            user("[mcp_servers.fs]\ncommand = \"mine\"\n"),
            project("[mcp_servers.fs]\ncommand = \"theirs\"\nenabled = true\n"),
        ],
        &[("fs", "mine", false, false)],
    );
    check_merge(
        &[
            user("[mcp_servers.fs]\ncommand = \"a\"\n"),
            project("[mcp_servers.fs]\nenabled = false\n"),
        ],
        &[("fs", "a", false, true)],
    );
}

#[test]
fn settings_merge_and_tool_filters_apply() {
    let servers = merged(&[
        user("[mcp_servers.fs]\ncommand = \"a\"\nargs = [\"--x\"]\nstartup_timeout = 2\ndisabled_tools = [\"rm\"]\n"),
        local("[mcp_servers.fs]\ntool_timeout = 0.5\n"),
    ])
    .unwrap();
    let fs = &servers[0];
    assert_eq!(fs.args, ["--x"]);
    assert_eq!(fs.startup_timeout, Duration::from_secs(2));
    assert_eq!(fs.tool_timeout, Duration::from_millis(500));
    assert!(fs.offers("read") && !fs.offers("rm"));
}

fn check_error(layers: &[Layer], file: &str, fragment: &str) {
    let err = merged(layers).expect_err(fragment);
    assert_eq!(err.path, file, "{err}");
    assert!(err.message.contains(fragment), "{err}");
}

#[test]
fn bad_entries_name_the_file_and_the_place() {
    check_error(
        &[user("[mcp_servers.fs]\ncommand = \"\"\n")],
        "user.toml",
        "mcp_servers.fs.command",
    );
    check_error(
        &[local("[mcp_servers.fs]\nargs = [\"x\"]\n")],
        "local.toml",
        "mcp_servers.fs.command",
    );
    check_error(
        &[local("[mcp_servers.fs]\ntrusted = true\n")],
        "local.toml",
        "no file gives its 'command'",
    );
    check_error(
        &[user(
            "[mcp_servers.fs]\ncommand = \"a\"\ntool_timeout = -1\n",
        )],
        "user.toml",
        "mcp_servers.fs.tool_timeout",
    );
    check_error(
        &[user("[mcp_servers.\"a b\"]\ncommand = \"a\"\n")],
        "user.toml",
        "mcp_servers.a b",
    );
}

#[test]
fn a_projects_mcp_json_is_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".mcp.json");
    let read = |text: &str| {
        std::fs::write(&path, text).unwrap();
        read_mcp_json(&path)
    };
    let entries = read(
        r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}}}}"#,
    )
    .unwrap();
    assert_eq!(entries["fs"].command.as_deref(), Some("npx"));
    assert_eq!(
        entries["fs"].args.as_deref(),
        Some(&["-y".to_string(), "srv".to_string()][..])
    );
    let err = read(r#"{"mcpServers": {"web": {"type": "http", "url": "x"}}}"#).unwrap_err();
    assert!(err.message.contains("mcpServers.web"), "{err}");
    let err = read(r#"{"mcpServers": {"web": {"args": []}}}"#).unwrap_err();
    assert!(
        err.message.contains("mcpServers.web: 'command' is missing"),
        "{err}"
    );
    let err = read("{not json").unwrap_err();
    assert_eq!(err.path, path.display().to_string());
    assert!(
        read_mcp_json(Path::new("/nonexistent/.mcp.json"))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_project_cannot_add_or_redirect_a_remote_server() {
    let url =
        |servers: &[McpServerConfig], i: usize| servers[i].remote.as_ref().map(|r| r.url.clone());
    // The user's remote server starts.
    let servers = merged(&[user(
        "[mcp_servers.web]\nurl = \"https://mcp.example.com/mcp\"\nbearer_token_env_var = \"WEB_TOKEN\"\n",
    )])
    .unwrap();
    assert_eq!(
        url(&servers, 0).as_deref(),
        Some("https://mcp.example.com/mcp")
    );
    assert_eq!(servers[0].disabled, None);
    // A project's is listed and never started, even enabled and trusted by
    // the user.
    let servers = merged(&[
        project("[mcp_servers.web]\nurl = \"https://evil.example/mcp\"\n"),
        local("[mcp_servers.web]\nenabled = true\ntrusted = true\n"),
    ])
    .unwrap();
    assert!(
        servers[0]
            .disabled
            .as_deref()
            .is_some_and(|why| why.contains("cannot add a remote server")),
        "{:?}",
        servers[0].disabled
    );
    // A project never moves the user's server elsewhere, nor turns a stdio
    // server into a remote one.
    let servers = merged(&[
        user("[mcp_servers.web]\nurl = \"https://mine.example/mcp\"\n"),
        project("[mcp_servers.web]\nurl = \"https://theirs.example/mcp\"\n"),
        user("[mcp_servers.fs]\ncommand = \"a\"\n"),
        project("[mcp_servers.fs]\nurl = \"https://theirs.example/mcp\"\n"),
    ])
    .unwrap();
    assert_eq!(url(&servers, 0), None, "fs stays a command");
    assert_eq!(servers[0].command, "a");
    assert_eq!(
        url(&servers, 1).as_deref(),
        Some("https://mine.example/mcp")
    );
    // Nor names which variable's value is sent to it.
    check_error(
        &[
            user("[mcp_servers.web]\nurl = \"https://mine.example/mcp\"\n"),
            project("[mcp_servers.web]\nbearer_token_env_var = \"OPENAI_API_KEY\"\n"),
        ],
        "project.toml",
        "need the url in the same file",
    );
}

#[test]
fn a_remote_entry_is_checked_and_its_secrets_come_from_the_environment() {
    check_error(
        &[user("[mcp_servers.web]\nurl = \"ftp://x\"\n")],
        "user.toml",
        "not an http:// or https:// URL",
    );
    check_error(
        &[user(
            "[mcp_servers.web]\nurl = \"https://x/mcp\"\ncommand = \"a\"\n",
        )],
        "user.toml",
        "a command or a url, not both",
    );
    check_error(
        &[user(
            "[mcp_servers.web]\nurl = \"https://x/mcp\"\nbearer_token_env_var = \"sk-live-123\"\n",
        )],
        "user.toml",
        "not an environment variable's name",
    );
    let mut servers = merged(&[user(
        "[mcp_servers.web]\nurl = \"https://x/mcp\"\nbearer_token_env_var = \"T\"\nenv_http_headers = { X-Key = \"K\" }\n",
    )])
    .unwrap();
    let remote = servers[0].remote.as_mut().unwrap();
    let missing = remote.resolve(|var| (var == "T").then(|| "tok".to_string()));
    assert_eq!(missing, Err(super::config::MissingCredential("K".into())));
    assert_eq!(
        missing.unwrap_err().to_string(),
        "the environment variable K is not set"
    );
    remote
        .resolve(|var| Some(format!("value-of-{var}")))
        .unwrap();
    assert_eq!(remote.secrets.bearer.as_deref(), Some("value-of-T"));
    assert_eq!(remote.secrets.headers["X-Key"], "value-of-K");
    assert!(
        !format!("{remote:?}").contains("value-of"),
        "secrets are never printed"
    );
}

/// One file's entry for server `s` in the generated layers.
#[derive(Debug, Clone)]
struct Declared {
    scope: Scope,
    /// 0: nothing, 1: a url, 2: a command.
    kind: u8,
    enabled: Option<bool>,
    trusted: Option<bool>,
    bearer: bool,
}

fn declared() -> impl proptest::strategy::Strategy<Value = Declared> {
    use proptest::prelude::*;
    (
        prop_oneof![Just(Scope::User), Just(Scope::Project), Just(Scope::Local)],
        0u8..3,
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        any::<bool>(),
    )
        .prop_map(|(scope, kind, enabled, trusted, bearer)| Declared {
            scope,
            kind,
            enabled,
            trusted,
            bearer,
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// Whatever the files say, in any order: a server that starts with a
    /// url has the url a user's own file gave, its token variable comes
    /// from that same file, and it is trusted only by the user's word.
    #[test]
    fn a_started_remote_server_is_always_the_users_own(
        files in proptest::collection::vec(declared(), 1..6),
        trusted_workspace in proptest::prelude::any::<bool>(),
    ) {
        let layers: Vec<Layer> = files
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut text = String::from("[mcp_servers.s]\n");
                let owner = if d.scope == Scope::Project { "project" } else { "user" };
                match d.kind {
                    1 => {
                        text.push_str(&format!("url = \"https://{owner}-{i}.example/mcp\"\n"));
                        if d.bearer {
                            text.push_str(&format!("bearer_token_env_var = \"{}_{i}\"\n", owner.to_uppercase()));
                        }
                    }
                    2 => text.push_str(&format!("command = \"{owner}-{i}\"\n")),
                    _ => {}
                }
                if let Some(on) = d.enabled {
                    text.push_str(&format!("enabled = {on}\n"));
                }
                if let Some(on) = d.trusted {
                    text.push_str(&format!("trusted = {on}\n"));
                }
                (entry(&text), d.scope, format!("file-{i}.toml").into())
            })
            .collect();
        let trust = if trusted_workspace {
            crate::trust::Trust::Trusted
        } else {
            crate::trust::Trust::Untrusted(crate::trust::Untrusted::Never)
        };
        let Ok(servers) = merged_with(&layers, trust) else {
            // A file without a command or url (or with nothing to merge)
            // is an error: nothing starts.
            return Ok(());
        };
        for server in servers.iter().filter(|s| s.disabled.is_none()) {
            if let Some(remote) = &server.remote {
                proptest::prop_assert!(remote.url.contains("//user-"), "{server:?}");
                if let Some(var) = &remote.bearer_token_env_var {
                    proptest::prop_assert!(var.starts_with("USER_"), "{server:?}");
                }
            }
            if server.trusted {
                proptest::prop_assert!(
                    files.iter().any(|d| d.scope != Scope::Project && d.trusted == Some(true)),
                    "{server:?}"
                );
            }
        }
    }
}
