//! Remote MCP servers over streamable HTTP: the rmcp fixture served over
//! HTTP (`mcp_fixture --http`) behind a bearer token, reached by `cadre
//! exec` and `cadre mcp list`, and by the library's `McpServer` across a
//! restart of the server.

use std::path::Path;

use cadre::runtime::mcp::{McpServer, McpServerConfig};
use pretty_assertions::assert_eq;
use tokio::io::AsyncBufReadExt;

use crate::mcp::fixture;
use crate::support::cli::{Output, cadre_with, dirs, events, of_type, s};

/// The fixture over HTTP, killed when dropped.
struct HttpFixture {
    child: tokio::process::Child,
    url: String,
}

impl HttpFixture {
    /// Serves at `addr` (port 0: any), requiring `token` when given.
    async fn start(addr: &str, token: Option<&str>) -> Self {
        let mut command = tokio::process::Command::new(fixture());
        command
            .args(["--http", addr])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        match token {
            Some(token) => command.env("MCP_FIXTURE_TOKEN", token),
            None => command.env_remove("MCP_FIXTURE_TOKEN"),
        };
        let mut child = command.spawn().expect("the HTTP fixture");
        let stdout = child.stdout.take().expect("stdout");
        let url = tokio::io::BufReader::new(stdout)
            .lines()
            .next_line()
            .await
            .expect("read the fixture's URL")
            .expect("the fixture prints its URL");
        Self { child, url }
    }

    /// Its `host:port`.
    fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }

    async fn stop(mut self) {
        self.child.kill().await.expect("kill the fixture");
    }
}

/// A user config naming the fixture at `url` as `remote`, its token in
/// `FX_TOKEN`.
fn config(dir: &Path, url: &str) -> String {
    let path = dir.join("cadre.toml");
    std::fs::write(
        &path,
        format!("[mcp_servers.remote]\nurl = \"{url}\"\nbearer_token_env_var = \"FX_TOKEN\"\n"),
    )
    .expect("config");
    path.display().to_string()
}

#[tokio::test]
async fn a_remote_servers_tool_runs_through_the_gates_with_its_token_from_the_environment() {
    let server = HttpFixture::start("127.0.0.1:0", Some("s3cret")).await;
    let (ws, data) = dirs();
    let config = config(data.path(), &server.url);
    let script = data.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "mcp_remote_add"
arguments = { a = 2, b = 3 }

[[response]]
iteration = 2
text = "done"
"#,
    )
    .expect("script");
    let run = |flags: &'static [&'static str], token: &'static str| {
        let (ws, data, config, script) = (
            s(ws.path()).to_string(),
            s(data.path()).to_string(),
            config.clone(),
            script.display().to_string(),
        );
        async move {
            let mut args = vec![
                "exec",
                "--workspace",
                &ws,
                "--data-dir",
                &data,
                "--config",
                &config,
                "--script",
                &script,
                "--output-format",
                "stream-json",
            ];
            args.extend(flags);
            args.push("add them");
            cadre_with(&args, &[("FX_TOKEN", token)]).await
        }
    };
    let result = |out: &Output| {
        let events = events(out);
        of_type(&events, "tool.result")
            .first()
            .map(|r| (r["status"].to_string(), r["output"].to_string()))
            .expect("a tool result")
    };

    // An untrusted server's tool may change things: exec has no one to ask.
    let out = run(&[], "s3cret").await;
    let (status, output) = result(&out);
    assert_eq!(status, "\"error\"", "{output}");
    // Allowed by a rule, it runs, with the token from the environment.
    let out = run(&["--allow", "mcp_remote_add"], "s3cret").await;
    assert_eq!(
        result(&out),
        ("\"ok\"".to_string(), "\"5\"".to_string()),
        "{}",
        out.stderr
    );
    // Plan refuses it, whatever the rules say.
    let out = run(&["--allow", "mcp_remote_add", "--mode", "plan"], "s3cret").await;
    assert_eq!(result(&out).0, "\"error\"");

    // A wrong token is refused by the server, and said so.
    let list = |token: Option<&'static str>| {
        let (ws, config) = (s(ws.path()).to_string(), config.clone());
        async move {
            let args = ["mcp", "list", "--workspace", &ws, "--config", &config];
            let vars: Vec<(&str, &str)> = token.map(|t| ("FX_TOKEN", t)).into_iter().collect();
            cadre_with(&args, &vars).await
        }
    };
    let out = list(Some("s3cret")).await;
    assert!(
        out.stdout.contains("remote  running  untrusted"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("  mcp_remote_add  side_effect"),
        "{}",
        out.stdout
    );
    let out = list(Some("wrong")).await;
    assert!(
        out.stdout.contains("refused the credentials"),
        "{}",
        out.stdout
    );
    let out = list(None).await;
    assert!(
        out.stdout
            .contains("remote  disabled: the environment variable FX_TOKEN is not set"),
        "{}",
        out.stdout
    );
    // The token is never printed.
    let out = list(Some("s3cret")).await;
    assert!(!out.stdout.contains("s3cret") && !out.stderr.contains("s3cret"));
    server.stop().await;
}

#[tokio::test]
async fn a_remote_server_down_is_said_plainly_and_is_reached_again_once_back() {
    let server = HttpFixture::start("127.0.0.1:0", None).await;
    let (ws, _data) = dirs();
    let addr = server.addr();
    let mut config = McpServerConfig::remote("remote", server.url.clone());
    config.trusted = true;
    let remote = McpServer::new(config, ws.path());
    let tools = remote.start().await.expect("the remote server starts");
    assert!(tools.iter().any(|t| t["name"] == "add"), "{tools:?}");
    let add = serde_json::json!({"a": 20, "b": 22});
    assert_eq!(remote.call("add", add.clone()).await.expect("a call"), "42");

    server.stop().await;
    let down = remote
        .call("add", add.clone())
        .await
        .expect_err("the server is down");
    assert!(
        down.message.contains("remote MCP server 'remote'"),
        "{}",
        down.message
    );

    let back = HttpFixture::start(&addr, None).await;
    let again = remote.call("add", add).await;
    assert_eq!(again.map_err(|e| e.message).as_deref(), Ok("42"));
    remote.shutdown().await;
    back.stop().await;

    // A server that is not there at all fails to start, saying so.
    let missing = McpServer::new(
        McpServerConfig::remote("gone", format!("http://{addr}/mcp")),
        ws.path(),
    );
    let failure = missing.start().await.expect_err("nothing listens");
    assert!(
        failure.message.contains("could not be reached"),
        "{failure}"
    );
}
