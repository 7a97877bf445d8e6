//! The commands cadre prints for a person to run next (answer a plan,
//! resume a session, undo a restore), written so that pasting one works: it
//! carries the flags that found this run's store, configuration and model,
//! and names the session by id rather than `latest`, which another store or
//! a later session would read differently.

use std::path::{Path, PathBuf};

use crate::config::ModelChoice;

/// The flags a follow-up command needs to land where this run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Followup {
    /// `--data-dir DIR`, when the store is not the default one (a flag or
    /// `CADRE_HOME` chose it, and a pasted command may run without either).
    data_dir: Option<PathBuf>,
    /// `--config-dir DIR`, when it is not the default one: settings decide
    /// the mode and posture of a run.
    config_dir: Option<PathBuf>,
    /// The model flags of `exec`: `--script FILE`, or `--base-url URL
    /// --model NAME` (the key stays in the environment).
    model: Vec<String>,
    /// `--workspace DIR` for `restore`, when the workspace is not the
    /// current directory.
    workspace: Option<PathBuf>,
}

impl Followup {
    /// Follow-ups on the store in `data_dir`; `default` is the store a
    /// command finds with no flag and no `CADRE_HOME`.
    pub fn new(data_dir: &Path, default: Option<&Path>) -> Self {
        Self {
            data_dir: (Some(data_dir) != default).then(|| data_dir.to_path_buf()),
            ..Self::default()
        }
    }

    /// Also the configuration directory, unless it is the default one.
    pub fn config_dir(mut self, dir: Option<&Path>, default: Option<&Path>) -> Self {
        self.config_dir = dir.filter(|d| Some(*d) != default).map(Path::to_path_buf);
        self
    }

    /// Also the model a resumed run should ask.
    pub fn model(mut self, model: &ModelChoice) -> Self {
        self.model = match model {
            ModelChoice::Script(path) => vec!["--script".into(), path.display().to_string()],
            ModelChoice::Server {
                base_url, model, ..
            } => vec![
                "--base-url".into(),
                base_url.clone(),
                "--model".into(),
                model.clone(),
            ],
            ModelChoice::ScriptText { .. } | ModelChoice::Demo | ModelChoice::Client(_) => {
                Vec::new()
            }
        };
        self
    }

    /// Also the workspace, for `restore`, unless it is the current directory.
    pub fn workspace(mut self, workspace: &Path, current: Option<&Path>) -> Self {
        self.workspace = (Some(workspace) != current).then(|| workspace.to_path_buf());
        self
    }

    /// `cadre WORDS…` on this store (`plan`, `sessions`).
    pub fn offline(&self, words: &[&str]) -> String {
        let mut line = command(words);
        push_path(&mut line, "--data-dir", self.data_dir.as_deref());
        line
    }

    /// `cadre exec WORDS…` on this store, with this configuration and model.
    pub fn exec(&self, words: &[&str]) -> String {
        let mut line = command(&[&["exec"], words].concat());
        push_path(&mut line, "--data-dir", self.data_dir.as_deref());
        push_path(&mut line, "--config-dir", self.config_dir.as_deref());
        for word in &self.model {
            line.push(' ');
            line.push_str(&quote(word));
        }
        line
    }

    /// How to run an approved plan of `session`, whose posture is
    /// `posture`. `exec` cannot ask a person, so under `suggest` or `never`
    /// its writes would be denied: the command then says `--posture auto`
    /// (a guardian model reviews each change), and the shell, which asks.
    pub fn implement(&self, session: &str, posture: cadre_runtime::permission::Posture) -> String {
        use cadre_runtime::permission::Posture;
        match posture {
            Posture::Auto | Posture::Bypass => self.exec(&["--resume", session]),
            Posture::Suggest | Posture::Never => {
                let mut shell = command(&["--resume", session]);
                push_path(&mut shell, "--data-dir", self.data_dir.as_deref());
                push_path(&mut shell, "--config-dir", self.config_dir.as_deref());
                for word in &self.model {
                    shell.push(' ');
                    shell.push_str(&quote(word));
                }
                format!(
                    "{} (or in the shell, which asks before each change: {shell}; exec cannot ask, so under posture auto a guardian model reviews each change)",
                    self.exec(&["--resume", session, "--posture", "auto"])
                )
            }
        }
    }

    /// `cadre restore WORDS…` on this store and workspace.
    pub fn restore(&self, words: &[&str]) -> String {
        let mut line = command(&[&["restore"], words].concat());
        push_path(&mut line, "--data-dir", self.data_dir.as_deref());
        push_path(&mut line, "--workspace", self.workspace.as_deref());
        line
    }
}

fn command(words: &[&str]) -> String {
    let mut line = String::from("cadre");
    for word in words {
        line.push(' ');
        line.push_str(&quote(word));
    }
    line
}

fn push_path(line: &mut String, flag: &str, path: Option<&Path>) {
    if let Some(path) = path {
        line.push_str(&format!(" {flag} {}", quote(&path.display().to_string())));
    }
}

/// A word as a POSIX shell reads it back: as is when it is made only of
/// characters no shell treats specially, else in single quotes.
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests;
