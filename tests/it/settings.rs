//! `settings.toml` (M6) through the binary: `cadre config`, two processes
//! writing at once, and `exec` starting from the settings' defaults.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::support::hermetic::Hermetic;
use cadre_runtime::settings;
use serde_json::Value;
use tempfile::TempDir;

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

/// A `cadre` command with `--config-dir dir`, in a clean environment.
fn command(dir: &Path, program: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command
        .hermetic()
        .env("CADRE_CONFIG_DIR", dir)
        .env_remove("CADRE_POSTURE")
        .env_remove("CADRE_HOME")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_MODEL")
        .env_remove("RUST_LOG")
        .kill_on_drop(true);
    command
}

async fn cadre(dir: &Path, args: &[&str]) -> Output {
    let output = command(dir, env!("CARGO_BIN_EXE_cadre"))
        .arg("--config-dir")
        .arg(dir)
        .args(args)
        .output()
        .await
        .expect("run cadre");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `cadre exec` in `ws` with its store in `data`, `config` as its config
/// directory, `rest` after.
async fn exec_in(config: &Path, ws: &Path, data: &Path, rest: &[&str]) -> Output {
    let utf8 = |p: &Path| p.to_str().expect("utf-8").to_string();
    let (ws, data) = (utf8(ws), utf8(data));
    let mut args = vec!["exec", "--workspace", &ws, "--data-dir", &data];
    args.extend(rest);
    cadre(config, &args).await
}

/// Sets `key` to `value(i)` for i in 1..=200, one `cadre config set`
/// process after another; `value` is shell text over `$i`.
async fn writer_loop(dir: &Path, key: &str, value: &str) -> std::process::ExitStatus {
    let script = format!(
        "for i in $(seq 1 200); do {value}; \"$0\" --config-dir \"$1\" config set {key} \"$v\" || exit 1; done"
    );
    command(dir, "sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_cadre"))
        .arg(dir)
        .status()
        .await
        .expect("run sh")
}

/// What a reader saw while the writers ran.
#[derive(Debug, Default)]
struct Seen {
    /// Reads that found the file (every one parsed).
    reads: usize,
    /// The highest `model = "a-<n>"` so far; it may never go down.
    model: u32,
    /// Whether `default_mode` has appeared; it may never disappear.
    mode: bool,
}

/// Reads `settings.toml` without any lock until `stop`, checking that every
/// read is a whole file and that no write undid another's.
fn read_until(path: &Path, stop: &AtomicBool) -> Seen {
    let mut seen = Seen::default();
    while !stop.load(Ordering::Acquire) {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("read {}: {e}", path.display()),
        };
        let keys = settings::parse(&text, path)
            .unwrap_or_else(|e| panic!("read {} was half a file ({e}):\n{text}", seen.reads + 1));
        seen.reads += 1;
        if let Some(model) = keys.get("model") {
            let n: u32 = model
                .as_str()
                .and_then(|m| m.strip_prefix("a-"))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("model is {model}"));
            assert!(
                n >= seen.model,
                "model went back from a-{} to a-{n}",
                seen.model
            );
            seen.model = n;
        } else {
            assert_eq!(
                seen.model, 0,
                "model was lost after a-{}:\n{text}",
                seen.model
            );
        }
        match keys.get("default_mode") {
            Some(_) => seen.mode = true,
            None => assert!(!seen.mode, "default_mode was lost:\n{text}"),
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_setting_200_times_each_lose_no_key_and_readers_never_see_half_a_file() {
    let dir = TempDir::new().expect("config dir");
    let path = dir.path().join("settings.toml");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = tokio::task::spawn_blocking({
        let (path, stop) = (path.clone(), stop.clone());
        move || read_until(&path, &stop)
    });
    let started = Instant::now();
    let (models, modes) = tokio::join!(
        writer_loop(dir.path(), "model", "v=a-$i"),
        writer_loop(
            dir.path(),
            "default_mode",
            "if [ $((i % 2)) -eq 0 ]; then v=plan; else v=work; fi",
        ),
    );
    let took = started.elapsed();
    stop.store(true, Ordering::Release);
    let seen = reader.await.expect("reader");
    eprintln!("400 sets from two processes took {took:?}; {seen:?}");
    assert!(models.success() && modes.success(), "{models} {modes}");

    let last = settings::parse(&std::fs::read_to_string(&path).expect("read"), &path)
        .expect("the final file parses");
    assert_eq!(last.get("model").and_then(|v| v.as_str()), Some("a-200"));
    assert_eq!(
        last.get("default_mode").and_then(|v| v.as_str()),
        Some("plan")
    );
    assert!(
        seen.reads > 0 && seen.mode,
        "the reader never overlapped the writers: {seen:?}"
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["settings.toml", "settings.toml.lock"],
        "temporary files left behind"
    );
}

#[tokio::test]
async fn config_get_set_list_and_their_exit_codes() {
    let dir = TempDir::new().expect("config dir");
    let d = dir.path();

    let out = cadre(d, &["config", "get", "default_mode"]).await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (1, ""),
        "unset: {}",
        out.stderr
    );
    assert!(
        out.stderr.contains("default_mode is not set"),
        "{}",
        out.stderr
    );

    for (args, says) in [
        (
            ["config", "set", "colour", "red"],
            "unknown setting 'colour': known settings are default_mode, default_posture, model, plan.agent_entry",
        ),
        (
            ["config", "set", "default_mode", "drive"],
            "default_mode: unknown mode 'drive'",
        ),
        (
            ["config", "set", "plan.agent_entry", "yes"],
            "plan.agent_entry: 'yes' is not true or false",
        ),
    ] {
        let out = cadre(d, &args).await;
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
    assert!(!d.join("settings.toml").exists(), "a refused set wrote");

    for args in [
        ["config", "set", "default_mode", "agent"],
        ["config", "set", "plan.agent_entry", "true"],
        ["config", "set", "model", "gpt-4.1"],
    ] {
        let out = cadre(d, &args).await;
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    }
    let out = cadre(d, &["config", "get", "default_mode"]).await;
    assert_eq!((out.code, out.stdout.as_str()), (0, "work\n"));
    let out = cadre(d, &["config", "list"]).await;
    assert_eq!(
        out.stdout,
        format!(
            "# {}; a run reads {} over it\n\
             default_mode = \"work\"\n\
             # default_posture is not set: a run uses \"suggest\"\n\
             model = \"gpt-4.1\"\n\
             plan.agent_entry = true\n",
            d.join("settings.toml").display(),
            d.join("config.toml").display()
        )
    );

    // A broken file is reported with its line, and a set does not replace it.
    let broken = "default_mode = \"plan\"\nmodel = \n";
    std::fs::write(d.join("settings.toml"), broken).expect("write");
    let out = cadre(d, &["config", "set", "model", "x"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("settings.toml: line 2: "),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(d.join("settings.toml")).expect("read"),
        broken
    );
    // exec stops on it too, before anything runs.
    let ws = TempDir::new().expect("workspace");
    let ws = ws.path().to_str().expect("utf-8");
    let out = cadre(d, &["exec", "--workspace", ws, "--data-dir", ws, "hello"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("settings.toml: line 2: "),
        "{}",
        out.stderr
    );
}

/// Runs the built-in demo with `settings` written by `cadre config set`, a
/// project config of `project` and `flags`; returns the first line's mode
/// and posture.
async fn starts_in(settings: &[(&str, &str)], project: &str, flags: &[&str]) -> (String, String) {
    starts_in_with(settings, &[(".cadre/config.toml", project)], None, flags).await
}

/// Runs the built-in demo with `settings`, the workspace's `files` (those
/// with content; with `Some(commit)` in a git repository that has them in
/// its index when `commit`) and `flags`; returns the first line's mode and
/// posture.
async fn starts_in_with(
    settings: &[(&str, &str)],
    files: &[(&str, &str)],
    commit: Option<bool>,
    flags: &[&str],
) -> (String, String) {
    let (config, ws, data) = (
        TempDir::new().expect("config"),
        TempDir::new().expect("workspace"),
        TempDir::new().expect("data"),
    );
    for (key, value) in settings {
        let out = cadre(config.path(), &["config", "set", key, value]).await;
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    for (path, text) in files.iter().filter(|(_, text)| !text.is_empty()) {
        let path = ws.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("dir");
        std::fs::write(path, text).expect("file");
    }
    if let Some(commit) = commit {
        let repo = git2::Repository::init(ws.path()).expect("git init");
        let mut index = repo.index().expect("index");
        for (path, _) in files.iter().filter(|_| commit) {
            index.add_path(Path::new(path)).expect("add");
        }
        index.write().expect("index written");
    }
    let mut args = vec!["--output-format", "stream-json"];
    args.extend(flags);
    args.push("Add a greeting module");
    let out = exec_in(config.path(), ws.path(), data.path(), &args).await;
    let first: Value = serde_json::from_str(out.stdout.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no first line ({e}): {}", out.stderr));
    assert_eq!(first["type"], "session.started");
    (
        first["mode"].as_str().expect("mode").to_string(),
        first["posture"].as_str().expect("posture").to_string(),
    )
}

/// `exec` with these settings, project config and flags starts in
/// `expected` (mode, posture).
async fn check(settings: &[(&str, &str)], project: &str, flags: &[&str], expected: (&str, &str)) {
    assert_eq!(
        starts_in(settings, project, flags).await,
        (expected.0.to_string(), expected.1.to_string()),
        "settings {settings:?}, project {project:?}, flags {flags:?}"
    );
}

#[tokio::test]
async fn exec_starts_from_the_settings_defaults_below_config_files_and_flags() {
    let plan_never = [("default_mode", "plan"), ("default_posture", "never")];
    check(&[], "", &[], ("work", "suggest")).await;
    check(&plan_never, "", &[], ("plan", "never")).await;
    // A repository narrows the user's mode, and never widens it.
    check(&plan_never, "mode = \"operate\"\n", &[], ("plan", "never")).await;
    check(&[], "mode = \"plan\"\n", &[], ("plan", "suggest")).await;
    check(&[], "mode = \"operate\"\n", &[], ("work", "suggest")).await;
    let flags = ["--mode", "work", "--posture", "auto"];
    check(&plan_never, "", &flags, ("work", "auto")).await;
    // A repository narrows the user's posture, and never widens it.
    let bypass = "posture = \"bypass\"\n";
    check(&[], bypass, &[], ("work", "suggest")).await;
    check(
        &[("default_posture", "auto")],
        bypass,
        &[],
        ("work", "auto"),
    )
    .await;
    check(
        &[("default_posture", "auto")],
        "posture = \"never\"\n",
        &[],
        ("work", "never"),
    )
    .await;
    check(&[], bypass, &["--posture", "bypass"], ("work", "bypass")).await;
}

#[tokio::test]
async fn a_local_config_the_repository_carries_is_the_projects_and_only_narrows() {
    let local = [(".cadre/config.local.toml", "posture = \"bypass\"\n")];
    // The person's own, uncommitted local file decides.
    assert_eq!(
        starts_in_with(&[], &local, Some(false), &[]).await,
        ("work".to_string(), "bypass".to_string())
    );
    // The same file committed came with the clone: it cannot widen.
    assert_eq!(
        starts_in_with(&[], &local, Some(true), &[]).await,
        ("work".to_string(), "suggest".to_string())
    );
    // With no repository to ask (an unpacked archive), neither.
    assert_eq!(
        starts_in_with(&[], &local, None, &[]).await,
        ("work".to_string(), "suggest".to_string())
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_local_config_reached_through_a_symlink_is_the_projects() {
    // A clone can carry `.cadre` as a link to anywhere (here, a directory
    // outside the repository and outside its index).
    let elsewhere = TempDir::new().expect("elsewhere");
    std::fs::write(
        elsewhere.path().join("config.local.toml"),
        "posture = \"bypass\"\n",
    )
    .expect("file");
    let target = elsewhere.path().to_path_buf();
    let (mode, posture) = starts_in_linked(&target).await;
    assert_eq!((mode.as_str(), posture.as_str()), ("work", "suggest"));
}

/// `exec` in a git workspace whose `.cadre` links to `target`.
async fn starts_in_linked(target: &Path) -> (String, String) {
    let (config, ws, data) = (
        TempDir::new().expect("config"),
        TempDir::new().expect("workspace"),
        TempDir::new().expect("data"),
    );
    git2::Repository::init(ws.path()).expect("git init");
    std::os::unix::fs::symlink(target, ws.path().join(".cadre")).expect("link");
    let args = ["--output-format", "stream-json", "Add a greeting module"];
    let out = exec_in(config.path(), ws.path(), data.path(), &args).await;
    let first: Value = serde_json::from_str(out.stdout.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no first line ({e}): {}", out.stderr));
    (
        first["mode"].as_str().expect("mode").to_string(),
        first["posture"].as_str().expect("posture").to_string(),
    )
}

#[tokio::test]
async fn a_committed_local_config_cannot_choose_the_model_server() {
    let (config, ws, data) = (
        TempDir::new().expect("config"),
        TempDir::new().expect("workspace"),
        TempDir::new().expect("data"),
    );
    std::fs::create_dir_all(ws.path().join(".cadre")).expect("dir");
    let local = ws.path().join(".cadre/config.local.toml");
    std::fs::write(&local, "base_url = \"http://127.0.0.1:9/v1\"\n").expect("file");
    let repo = git2::Repository::init(ws.path()).expect("git init");
    let mut index = repo.index().expect("index");
    index
        .add_path(Path::new(".cadre/config.local.toml"))
        .expect("add");
    index.write().expect("index written");
    let out = exec_in(config.path(), ws.path(), data.path(), &["hello"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("config.local.toml")
            && out.stderr.contains("base_url")
            && out.stderr.contains("committed to the repository"),
        "{}",
        out.stderr
    );
}

/// Issue 26, item 7: the config commands tell the truth. A setting the
/// user's config.toml also sets is shown with what a run uses instead, and
/// a config file's key (`base_url`) is refused with where it goes.
#[tokio::test]
async fn config_says_when_a_config_file_wins_and_where_a_file_key_goes() {
    let dir = TempDir::new().expect("config dir");
    let d = dir.path();
    assert_eq!(cadre(d, &["config", "set", "model", "a"]).await.code, 0);
    let alone = cadre(d, &["config", "get", "model"]).await;
    assert_eq!((alone.code, alone.stdout.as_str()), (0, "a\n"));
    assert!(!alone.stderr.contains("note"), "{}", alone.stderr);
    std::fs::write(d.join("config.toml"), "model = \"b\"\nmode = \"plan\"\n").expect("config");
    let file = d.join("config.toml").display().to_string();
    let got = cadre(d, &["config", "get", "model"]).await;
    assert_eq!(
        (got.code, got.stdout.as_str()),
        (0, "a\n"),
        "{}",
        got.stderr
    );
    assert!(
        got.stderr.contains(&format!(
            "{file} sets model = \"b\", which a run uses over this setting"
        )),
        "{}",
        got.stderr
    );
    let set = cadre(d, &["config", "set", "default_mode", "operate"]).await;
    assert_eq!(set.code, 0, "{}", set.stderr);
    assert!(
        set.stderr.contains("sets mode = \"plan\""),
        "{}",
        set.stderr
    );
    let list = cadre(d, &["config", "list"]).await;
    assert_eq!(
        list.stdout,
        format!(
            "# {}; a run reads {file} over it\n\
             default_mode = \"operate\"  # a run uses mode = \"plan\" from {file}\n\
             # default_posture is not set: a run uses \"suggest\"\n\
             model = \"a\"  # a run uses model = \"b\" from {file}\n\
             # plan.agent_entry is not set: a run uses false\n",
            d.join("settings.toml").display()
        )
    );
    // Still TOML: the comments are comments.
    let parsed: toml::Table = list.stdout.parse().expect("list is TOML");
    assert_eq!(parsed["model"].as_str(), Some("a"));
    let refused = cadre(d, &["config", "set", "base_url", "http://127.0.0.1:9/v1"]).await;
    assert_eq!(refused.code, 2);
    assert!(
        refused.stderr.contains(&format!(
            "'base_url' is not a setting but a config file's key: write it in {file}"
        )),
        "{}",
        refused.stderr
    );
    let unknown = cadre(d, &["config", "set", "colour", "red"]).await;
    assert_eq!(unknown.code, 2);
    assert!(
        !unknown.stderr.contains("config file's key"),
        "{}",
        unknown.stderr
    );
}
