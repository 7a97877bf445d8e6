//! `bash`: one shell command in the workspace.
//!
//! The command runs under the sandbox (`crate::sandbox`): its walls
//! (namespaces, Landlock, seccomp, limits) confine it by the call's mode
//! and posture, it starts from an allow-listed environment (plus, for a
//! line proven read-only, git configuration that keeps a repository from
//! naming a program git runs: `command_environment`), its output is kept
//! as a bounded head and tail,
//! and it runs in its own process group, killed when the command ends, when
//! it prints past the limit, and when the call is dropped (timeout,
//! cancel), so a call leaves no process behind.

use serde_json::{Value, json};

use super::{MAX_OUTPUT, required_str};
use crate::permission::classify::{classify_command, forced_environment};
use crate::sandbox::{CommandSpec, Finished, OutputLimits, Policy, Reach, run, session_tmp};
use crate::tool::definition::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};

/// Runs a shell command.
pub struct Bash(ToolDefinition);

impl Bash {
    pub fn new() -> Self {
        let definition = ToolDefinition::new(
            "bash",
            "Run a shell command with `bash -c` in the workspace root and return its exit \
             code, stdout and stderr. A non-zero exit is reported as an error.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line"}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            Safety::SideEffect,
        );
        Self(definition.classifying_calls().as_shell())
    }
}

impl Tool for Bash {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    /// Read-only when `classify_command` proves the command read-only;
    /// a call without a string `command` is side-effect.
    fn classify(&self, args: &Value) -> Safety {
        args.get("command")
            .and_then(Value::as_str)
            .map_or(Safety::SideEffect, |command| {
                classify_command(command).safety
            })
    }

    fn unproven_because(&self, args: &Value) -> Option<String> {
        let command = args.get("command").and_then(Value::as_str)?;
        let classified = classify_command(command);
        (classified.safety == Safety::SideEffect).then_some(classified.reason)
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let command = required_str(&args, "command")?;
            let tmp = session_tmp(&ctx.session_dir);
            let root = ctx.workspace.root();
            let policy = Policy::resolve(ctx.mode(), ctx.posture(), root, &tmp, &ctx.sandbox);
            let env = command_environment(command, &ctx.sandbox.env);
            let finished = run(CommandSpec {
                script: command,
                cwd: root,
                policy: &policy,
                env: &env,
                tmp: &tmp,
                limits: OutputLimits {
                    head: MAX_OUTPUT / 4,
                    tail: MAX_OUTPUT / 4,
                    kill_after: ctx.sandbox.max_output,
                },
                stdin: None,
            })
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
            let text = report(&finished, &policy, ctx.sandbox.max_output);
            if finished.status.success() && !finished.killed_for_output {
                Ok(text)
            } else {
                Err(ToolError::failed(text))
            }
        })
    }
}

/// The environment a command line runs with: the sandbox's, and for a line
/// proven read-only the git configuration no repository can undo
/// (`forced_environment`), since the reader lets git run there unasked.
/// A line that is not read-only was approved as written and runs git as a
/// person would.
pub(crate) fn command_environment(
    command: &str,
    base: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env = base.to_vec();
    if classify_command(command).safety == Safety::ReadOnly {
        let forced = forced_environment();
        env.retain(|(name, _)| !forced.iter().any(|(f, _)| f == name));
        env.extend(forced);
    }
    env
}

/// What the model reads of a finished command: its exit, its output (head
/// and tail of each stream), and what cadre did to it.
fn report(finished: &Finished, policy: &Policy, max_output: u64) -> String {
    let code = finished
        .status
        .code()
        .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
    let mut text = format!("exit code: {code}\n");
    if !finished.stdout.is_empty() {
        text.push_str(&finished.stdout.render());
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if !finished.stderr.is_empty() {
        text.push_str("[stderr]\n");
        text.push_str(&finished.stderr.render());
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if finished.killed_for_output {
        text.push_str(&format!(
            "[cadre: the command printed more than {} MiB in all ({} bytes seen); its process \
             group was killed]\n",
            max_output / (1024 * 1024),
            finished.stdout.total() + finished.stderr.total(),
        ));
    }
    if finished.output_abandoned {
        text.push_str(
            "[cadre: a process that left the command's process group still held its output \
             open; reading stopped]\n",
        );
    }
    // Say where a refusal may come from, only when one shows.
    let refused = [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
    ]
    .iter()
    .any(|m| text.contains(m));
    if finished.confined && !finished.status.success() && refused {
        text.push_str(&format!(
            "[sandbox: {}; the refusal above may come from it]\n",
            describe(policy)
        ));
    }
    text
}

/// The sandbox in one phrase, for the model.
fn describe(policy: &Policy) -> &'static str {
    match policy.reach {
        Reach::ReadOnly => {
            "read-only: nothing is writable but /dev/null and $TMPDIR, and there is no network"
        }
        Reach::Workspace => {
            "workspace-write: only the workspace (but .git and .cadre), $TMPDIR and the \
             configured writable roots are writable"
        }
        Reach::Everywhere => {
            "full access: everything is writable but the workspace's .git and .cadre and \
             cadre's configuration and data directories"
        }
    }
}

#[cfg(test)]
mod tests {
    //! The embedded-git-dir attack through real bash and git: a repository
    //! commits `vendor/lib/{HEAD,config,objects,refs}` naming
    //! `core.fsmonitor`, and its own `.git/config` names one too.

    use std::path::Path;
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    }

    /// A hostile repository; the script it names records that it ran.
    fn hostile(root: &Path) -> std::path::PathBuf {
        let marker = root.join("ran");
        git(root, &["init", "-q", "-b", "main", "."]);
        git(
            root,
            &[
                "-c",
                "user.name=x",
                "-c",
                "user.email=x@x",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "init",
            ],
        );
        let lib = root.join("vendor/lib");
        std::fs::create_dir_all(lib.join("objects")).expect("dir");
        std::fs::create_dir_all(lib.join("refs/heads")).expect("dir");
        std::fs::write(lib.join("HEAD"), "ref: refs/heads/main\n").expect("write");
        std::fs::write(
            lib.join("config"),
            "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ../..\n\
             \tfsmonitor = sh vendor/attack.sh\n",
        )
        .expect("write");
        std::fs::write(
            root.join("vendor/attack.sh"),
            format!("touch '{}'\n", marker.display()),
        )
        .expect("write");
        git(root, &["config", "core.fsmonitor", "sh vendor/attack.sh"]);
        marker
    }

    /// Runs `line` as the bash tool does: bash with no profile, from a
    /// cleared environment plus the sandbox's variables and
    /// `command_environment`.
    fn run(root: &Path, line: &str, forced: bool) -> bool {
        let base = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            ),
            ("HOME".to_string(), root.display().to_string()),
        ];
        let env = if forced {
            command_environment(line, &base)
        } else {
            base
        };
        Command::new("bash")
            .args(["--noprofile", "--norc", "-c", line])
            .current_dir(root)
            .env_clear()
            .envs(env)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("bash runs")
            .status
            .success()
    }

    #[test]
    fn read_only_git_does_not_run_what_a_hostile_repository_names() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical");
        let marker = hostile(&root);
        // The attack is real: without the forced configuration git runs it.
        assert!(run(&root, "git status", false));
        assert!(marker.exists(), "the repository's fsmonitor runs unforced");
        std::fs::remove_file(&marker).expect("remove");
        let lines = [
            "git status",
            "git status --short",
            "git log --oneline",
            "git diff",
            "git stash list",
            "git -C vendor/lib status",
            "git --git-dir=vendor/lib status",
            "git --work-tree=. --git-dir=vendor/lib status",
            "cd vendor/lib && git status",
            "cd vendor/lib; git log",
            "GIT_DIR=vendor/lib git status",
        ];
        let mut got = Vec::new();
        for line in lines {
            let read_only = classify_command(line).safety == Safety::ReadOnly;
            if read_only {
                let ok = run(&root, line, true);
                got.push((
                    line,
                    format!("ran, ok={ok}, script ran={}", marker.exists()),
                ));
            } else {
                got.push((line, "refused".to_string()));
            }
            let _ = std::fs::remove_file(&marker);
        }
        let ran = |ok: bool| format!("ran, ok={ok}, script ran=false");
        let want = vec![
            ("git status", ran(true)),
            ("git status --short", ran(true)),
            ("git log --oneline", ran(true)),
            ("git diff", ran(true)),
            ("git stash list", ran(true)),
            ("git -C vendor/lib status", "refused".into()),
            ("git --git-dir=vendor/lib status", "refused".into()),
            (
                "git --work-tree=. --git-dir=vendor/lib status",
                "refused".into(),
            ),
            ("cd vendor/lib && git status", "refused".into()),
            ("cd vendor/lib; git log", "refused".into()),
            ("GIT_DIR=vendor/lib git status", "refused".into()),
        ];
        pretty_assertions::assert_eq!(got, want);
        // Were the reader wrong about `cd`, git itself would refuse the
        // embedded repository.
        let env = command_environment("git status", &[]);
        let status = Command::new("bash")
            .args(["--noprofile", "--norc", "-c", "cd vendor/lib && git status"])
            .current_dir(&root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &root)
            .envs(env)
            .output()
            .expect("bash runs");
        assert!(!status.status.success());
        assert!(!marker.exists(), "the embedded repository's fsmonitor ran");
    }
}
