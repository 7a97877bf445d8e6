//! Where a session keeps its files.
//!
//! The data directory is chosen by the host (`--data-dir`, else
//! `CADRE_HOME`, else the platform data directory + `cadre`); this module
//! only names what lies inside it.

use std::path::{Path, PathBuf};

/// The root of cadre's stored state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDir(PathBuf);

impl DataDir {
    /// A data directory at `path` (created on first use).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self(path.into())
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The files of one session.
    pub fn session(&self, id: &str) -> SessionPaths {
        SessionPaths {
            dir: self.0.join("sessions").join(id),
        }
    }
}

/// The files of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPaths {
    /// `<data dir>/sessions/<id>`.
    pub dir: PathBuf,
}

impl SessionPaths {
    /// `<session dir>/artifacts`, where the plan lives.
    pub fn artifacts(&self) -> PathBuf {
        self.dir.join("artifacts")
    }

    /// The canonical plan file, `<session dir>/artifacts/plan.md`.
    pub fn plan_file(&self) -> PathBuf {
        self.artifacts().join("plan.md")
    }

    /// Creates the session and artifacts directories.
    pub fn create(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(self.artifacts())
    }
}
