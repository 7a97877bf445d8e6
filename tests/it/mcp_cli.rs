//! `cadre mcp list`, `cadre restore list|apply`, and MCP servers in `cadre
//! exec`: the rmcp fixture and the official Python SDK's server that
//! `.ci/run` installs, over stdio and over streamable HTTP.

use std::path::Path;

use pretty_assertions::assert_eq;

use crate::mcp::fixture;
use crate::support::cli::{cadre, dirs, events, exec_json, of_type, s};

/// The Python SDK's server, and the interpreter that runs it.
fn python_server() -> (String, String) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/mcp/fastmcp_server.py"
    );
    ("python3".to_string(), script.to_string())
}

/// Whether Python's `mcp` package is importable. `.ci/run` installs it; a
/// machine without it skips the two tests that need it, saying so in the
/// test output (not captured), instead of failing the whole run.
fn python_mcp() -> bool {
    static FOUND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let found = *FOUND.get_or_init(|| {
        std::process::Command::new("python3")
            .args(["-c", "import mcp"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !found {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: Python's mcp package is not installed \
             (python3 -m pip install 'mcp>=1.10'; .ci/run installs it)"
        );
    }
    found
}

/// A config file naming the fixture (trusted, as `fx`) and the Python
/// server (untrusted, as `py`).
fn write_config(dir: &Path) -> String {
    let (python, script) = python_server();
    let path = dir.join("cadre.toml");
    std::fs::write(
        &path,
        format!(
            "[mcp_servers.fx]\ncommand = \"{}\"\ntrusted = true\n\n\
             [mcp_servers.py]\ncommand = \"{python}\"\nargs = [\"{script}\"]\nstartup_timeout = 30\n",
            fixture().display()
        ),
    )
    .expect("config");
    path.display().to_string()
}

#[tokio::test]
async fn mcp_list_shows_servers_tools_and_safety_and_a_projects_server_waits_for_the_user() {
    if !python_mcp() {
        return;
    }
    let (ws, data) = dirs();
    let config = write_config(data.path());
    // The project's own server is listed but not started.
    std::fs::write(
        ws.path().join(".mcp.json"),
        r#"{"mcpServers": {"repo": {"command": "/bin/sh", "args": ["-c", "touch started"]}}}"#,
    )
    .expect(".mcp.json");
    let out = cadre(&[
        "mcp",
        "list",
        "--workspace",
        s(ws.path()),
        "--config",
        &config,
    ])
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = out.stdout;
    for line in [
        "fx  running  trusted",
        "  mcp_fx_read_file  read_only",
        "  mcp_fx_write_file  side_effect",
        "  mcp_fx_sneaky_delete  read_only",
        "py  running  untrusted",
        "  server: notes",
        "  mcp_py_read_note  side_effect",
        "  mcp_py_multiply  side_effect",
        "repo  disabled: declared by the project",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
    assert!(
        !ws.path().join("started").exists(),
        "a project's server ran"
    );
}

#[tokio::test]
async fn exec_runs_a_third_party_servers_tool_through_the_gates() {
    if !python_mcp() {
        return;
    }
    let (ws, data) = dirs();
    let config = write_config(data.path());
    std::fs::write(ws.path().join("note.txt"), "from the workspace").expect("note");
    let script = data.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[response]]
mode = "plan"
iteration = 1
[[response.tool_calls]]
name = "mcp_py_read_note"
arguments = { path = "note.txt" }
[[response.tool_calls]]
name = "mcp_fx_read_file"
arguments = { path = "note.txt" }

[[response]]
mode = "plan"
iteration = 2
text = "read"

[[response]]
mode = "work"
iteration = 1
[[response.tool_calls]]
name = "mcp_py_multiply"
arguments = { a = 6, b = 7 }
[[response.tool_calls]]
name = "mcp_py_write_note"
arguments = { path = "out.txt", text = "written by python" }

[[response]]
mode = "work"
iteration = 2
text = "done"
"#,
    )
    .expect("script");
    let flags = ["--script", s(&script), "--config", &config];
    let mut plan = flags.to_vec();
    plan.extend(["--mode", "plan"]);
    let out = exec_json(None, (&ws, &data), &plan, "read it").await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results: Vec<(String, String)> = of_type(&events(&out), "tool.result")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap_or_default().to_string(),
                e["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    // Plan: the untrusted server's read is refused, the trusted one's runs.
    assert_eq!(
        results,
        [
            ("mcp_py_read_note".to_string(), "error".to_string()),
            ("mcp_fx_read_file".to_string(), "ok".to_string())
        ]
    );

    let mut work = flags.to_vec();
    work.extend(["--mode", "work", "--posture", "bypass"]);
    let out = exec_json(None, (&ws, &data), &work, "multiply").await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results: Vec<String> = of_type(&events(&out), "tool.result")
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["name"].as_str().unwrap_or_default(),
                e["output"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            "mcp_py_multiply 42".to_string(),
            "mcp_py_write_note wrote 17 characters to out.txt".to_string()
        ]
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).expect("out"),
        "written by python"
    );
}

/// The Python SDK's server over streamable HTTP on a free loopback port,
/// killed when dropped.
struct PythonHttp {
    _child: tokio::process::Child,
    url: String,
}

impl PythonHttp {
    /// Starts it and waits until it accepts connections (the SDK imports
    /// slowly on a loaded machine).
    async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let (python, script) = python_server();
        let child = tokio::process::Command::new(python)
            .args([script.as_str(), "--http", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the Python server");
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Self {
                    _child: child,
                    url: format!("http://127.0.0.1:{port}/mcp"),
                };
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("the Python server never listened on port {port}");
    }
}

#[tokio::test]
async fn a_third_party_server_over_streamable_http_is_listed_and_its_tools_run_through_the_gates() {
    if !python_mcp() {
        return;
    }
    let server = PythonHttp::start().await;
    let (ws, data) = dirs();
    let config = data.path().join("cadre.toml");
    std::fs::write(
        &config,
        format!("[mcp_servers.pyhttp]\nurl = \"{}\"\n", server.url),
    )
    .expect("config");
    let config = config.display().to_string();
    let out = cadre(&[
        "mcp",
        "list",
        "--workspace",
        s(ws.path()),
        "--config",
        &config,
    ])
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    for line in [
        "pyhttp  running  untrusted",
        "  server: notes",
        "  mcp_pyhttp_read_note  side_effect",
        "  mcp_pyhttp_multiply  side_effect",
    ] {
        assert!(out.stdout.contains(line), "no {line:?} in:\n{}", out.stdout);
    }

    let script = data.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "mcp_pyhttp_multiply"
arguments = { a = 6, b = 7 }

[[response]]
iteration = 2
text = "done"
"#,
    )
    .expect("script");
    let results = |out: &crate::support::cli::Output| -> Vec<String> {
        of_type(&events(out), "tool.result")
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e["status"].as_str().unwrap_or_default(),
                    e["output"].as_str().unwrap_or_default()
                )
            })
            .collect()
    };
    // Untrusted, its tool may change things: exec has no one to ask, and
    // Plan refuses it whatever the rules say.
    let flags = ["--script", s(&script), "--config", &config];
    let out = exec_json(None, (&ws, &data), &flags, "multiply").await;
    assert!(
        results(&out)[0].starts_with("error "),
        "{:?}",
        results(&out)
    );
    let mut plan = flags.to_vec();
    plan.extend(["--allow", "mcp_pyhttp_multiply", "--mode", "plan"]);
    let out = exec_json(None, (&ws, &data), &plan, "multiply").await;
    assert!(
        results(&out)[0].starts_with("error "),
        "{:?}",
        results(&out)
    );
    // Allowed by a rule in Work, it runs on the remote server.
    let mut allowed = flags.to_vec();
    allowed.extend(["--allow", "mcp_pyhttp_multiply"]);
    let out = exec_json(None, (&ws, &data), &allowed, "multiply").await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(results(&out), ["ok 42".to_string()]);
}

#[tokio::test]
async fn restore_list_and_apply_put_back_what_an_exec_turn_changed() {
    let (ws, data) = dirs();
    std::fs::write(ws.path().join("a.txt"), "original").expect("a");
    std::fs::write(ws.path().join("gone.txt"), "keep me").expect("gone");
    let script = data.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
[[response]]
iteration = 1
[[response.tool_calls]]
name = "write_file"
arguments = { path = "a.txt", content = "edited" }
[[response.tool_calls]]
name = "write_file"
arguments = { path = "new.txt", content = "created" }
[[response.tool_calls]]
name = "bash"
arguments = { command = "rm gone.txt" }

[[response]]
iteration = 2
text = "done"
"#,
    )
    .expect("script");
    let out = exec_json(
        None,
        (&ws, &data),
        &["--script", s(&script), "--posture", "bypass"],
        "change things",
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let session = events(&out)[0]["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    let common = ["--workspace", s(ws.path()), "--data-dir", s(data.path())];

    let mut args = vec!["restore", "list", session.as_str()];
    args.extend(common);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    assert!(
        lines[0].contains("turn 1") && lines[0].ends_with("3 changed since"),
        "{}",
        lines[0]
    );
    let id = lines[0].split_whitespace().next().expect("id").to_string();

    let mut args = vec!["restore", "apply", id.as_str(), "--dry-run"];
    args.extend(common);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("dry run"), "{}", out.stdout);
    assert!(ws.path().join("new.txt").exists());

    let mut args = vec!["restore", "apply", id.as_str()];
    args.extend(common);
    let out = cadre(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    for line in [
        "restore  a.txt",
        "recreate gone.txt",
        "remove   new.txt",
        "undo with: cadre restore apply ",
    ] {
        assert!(out.stdout.contains(line), "no {line:?} in:\n{}", out.stdout);
    }
    let read = |name: &str| std::fs::read_to_string(ws.path().join(name)).ok();
    assert_eq!(
        (read("a.txt"), read("gone.txt"), read("new.txt")),
        (Some("original".into()), Some("keep me".into()), None)
    );

    // The session's conversation ends with a note for the model.
    let store = cadre::runtime::store::Store::open(&cadre::runtime::store::store_path(data.path()))
        .expect("store");
    let conversation = store.conversation(&session).expect("conversation");
    match conversation.last() {
        Some(cadre::runtime::message::Message::User { content }) => {
            assert!(content.contains("Removed: new.txt"), "{content}");
        }
        other => panic!("no note: {other:?}"),
    }

    let mut args = vec!["restore", "apply", "0000"];
    args.extend(common);
    let out = cadre(&args).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("no snapshot '0000'"), "{}", out.stderr);
}

/// Waits, without polling, until process `pid` has exited (or is gone).
fn exited(pid: i32) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let Some(pid) = Pid::from_raw(pid) else {
        return true;
    };
    let Ok(fd) = pidfd_open(pid, PidfdFlags::empty()) else {
        return true;
    };
    // A pidfd becomes readable once its process has exited.
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let patience = Timespec {
        tv_sec: crate::support::PATIENCE.as_secs() as i64,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&patience)).is_ok_and(|ready| ready == 1)
}

#[tokio::test]
async fn no_mcp_server_outlives_its_exec() {
    let (ws, data) = dirs();
    let pidfile = data.path().join("fx.pid");
    let config = data.path().join("cadre.toml");
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.fx]\ncommand = \"{}\"\nenv = {{ MCP_FIXTURE_PIDFILE = \"{}\" }}\n",
            fixture().display(),
            pidfile.display()
        ),
    )
    .expect("config");
    let script = data.path().join("script.toml");
    std::fs::write(
        &script,
        "[[response]]\niteration = 1\n[[response.tool_calls]]\nname = \"mcp_fx_add\"\n\
         arguments = { a = 1, b = 1 }\n\n[[response]]\niteration = 2\ntext = \"done\"\n",
    )
    .expect("script");
    let out = exec_json(
        None,
        (&ws, &data),
        &[
            "--script",
            s(&script),
            "--config",
            s(&config),
            "--posture",
            "bypass",
        ],
        "add",
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&out);
    assert_eq!(of_type(&events, "tool.result")[0]["output"], "2");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("the server wrote its pid")
        .parse()
        .expect("pid");
    let gone = tokio::task::spawn_blocking(move || exited(pid))
        .await
        .expect("wait");
    assert!(gone, "the MCP server {pid} outlived cadre");
}

#[tokio::test]
async fn a_bad_server_entry_exits_2_naming_the_file_and_the_place() {
    let (ws, data) = dirs();
    std::fs::write(
        ws.path().join(".mcp.json"),
        r#"{"mcpServers": {"web": {"type": "http", "url": "https://example.invalid"}}}"#,
    )
    .expect(".mcp.json");
    let out = cadre(&["mcp", "list", "--workspace", s(ws.path())]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(".mcp.json: mcpServers.web.type"),
        "{}",
        out.stderr
    );
    let config = data.path().join("bad.toml");
    std::fs::write(&config, "[mcp_servers.fs]\ncomand = \"x\"\n").expect("config");
    std::fs::remove_file(ws.path().join(".mcp.json")).expect("rm");
    let out = exec_json(None, (&ws, &data), &["--config", s(&config)], "hi").await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("bad.toml") && out.stderr.contains("comand"),
        "{}",
        out.stderr
    );
}
