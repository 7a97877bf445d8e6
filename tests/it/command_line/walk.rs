//! Walking documented commands as a new user would: in a fresh copy of
//! the repository (no build output, no git directory), with a home, data
//! and configuration of its own, each command run by `sh` with the built
//! `cadre` first on the PATH. `cargo run -- ` becomes `cadre `, and paths
//! under `/tmp/` move under the walk's own temporary directory, so walks
//! run side by side and leave nothing behind.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

use super::clean;
use crate::support::cli::Output;

/// A documented command and the exit code its documentation promises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Documented {
    /// The command, continuation lines joined, comments dropped.
    pub line: String,
    /// The exit code it should end with.
    pub code: i32,
}

/// A fresh copy of the repository and a home to run commands in.
pub(crate) struct Walk {
    root: TempDir,
}

impl Walk {
    pub fn new() -> Self {
        let root = TempDir::new().expect("walk");
        copy_tree(
            Path::new(env!("CARGO_MANIFEST_DIR")),
            &root.path().join("clone"),
        );
        for dir in ["home", "tmp"] {
            std::fs::create_dir_all(root.path().join(dir)).expect("dir");
        }
        Self { root }
    }

    /// The copy of the repository, where commands run.
    pub fn clone_dir(&self) -> PathBuf {
        self.root.path().join("clone")
    }

    /// Where `/tmp/…` in a command leads.
    pub fn tmp(&self, rest: &str) -> PathBuf {
        self.root.path().join("tmp").join(rest)
    }

    /// Runs `line` as the documentation shows it.
    pub async fn sh(&self, line: &str) -> Output {
        let line = line.replace("cargo run -- ", "cadre ").replace(
            "/tmp/",
            &format!("{}/", self.root.path().join("tmp").display()),
        );
        let bin = Path::new(env!("CARGO_BIN_EXE_cadre"))
            .parent()
            .expect("the binary's directory");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let home = self.root.path().join("home");
        let out = clean(tokio::process::Command::new("sh"))
            .args(["-c", &line])
            .current_dir(self.clone_dir())
            .env("PATH", path)
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            // `mktemp -d` in a command makes its directory here too.
            .env("TMPDIR", self.root.path().join("tmp"))
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .expect("run sh");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs every command in order; each must end as documented.
    pub async fn all(&self, commands: &[Documented]) -> Vec<Output> {
        let mut outputs = Vec::new();
        for command in commands {
            let out = self.sh(&command.line).await;
            assert_eq!(
                out.code, command.code,
                "`{}` ended with {}\nstdout:\n{}\nstderr:\n{}",
                command.line, out.code, out.stdout, out.stderr
            );
            outputs.push(out);
        }
        outputs
    }
}

/// The commands in `lines` of a shell block: `cadre …` or `cargo run -- …`
/// (other programs are not walked), continuation lines joined, `# …`
/// comments dropped. `code` is what each should exit with.
pub(crate) fn commands<'a>(lines: impl IntoIterator<Item = &'a str>, code: i32) -> Vec<Documented> {
    let mut found = Vec::new();
    let mut pending: Option<String> = None;
    for line in lines {
        let line = line.trim();
        let (text, continues) = match line.strip_suffix('\\') {
            Some(text) => (text.trim_end(), true),
            None => (line, false),
        };
        let text = without_comment(text);
        let joined = match pending.take() {
            Some(mut start) => {
                start.push(' ');
                start.push_str(text);
                start
            }
            None if text.starts_with("cadre ") || text.starts_with("cargo run -- ") => {
                text.to_string()
            }
            None => continue,
        };
        if continues {
            pending = Some(joined);
        } else {
            found.push(Documented { line: joined, code });
        }
    }
    found
}

/// `text` up to a ` # comment` that stands outside quotes.
fn without_comment(text: &str) -> &str {
    let mut quote = None;
    let mut last = ' ';
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if last.is_whitespace() => return text[..i].trim_end(),
            _ => {}
        }
        last = c;
    }
    text
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            copy_tree(&entry.path(), &to.join(&name));
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(&name)).expect("copy");
        }
    }
}
