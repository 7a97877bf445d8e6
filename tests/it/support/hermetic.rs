//! Every `cadre` a test starts gets a home of its own: no test reads or
//! writes the real user's settings, configuration or data (a `/mode plan`
//! typed in a real shell once made six tests fail). The variables cadre's
//! platform directories come from point into one temporary home per test
//! binary; a test that wants a home of its own sets `HOME` after this.
//!
//! The toolchain stays where it is: `CARGO_HOME` and `RUSTUP_HOME` keep the
//! real ones, so a check that runs `cargo test` still finds the compiler.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Variables of the caller's that would steer a cadre run.
const STEERING: &[&str] = &[
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "CADRE_HOME",
    "CADRE_MODE",
    "CADRE_POSTURE",
    "CADRE_CONFIG_DIR",
    "CADRE_CLUSTER_SECRET",
    "RUST_LOG",
    "NO_COLOR",
    "XDG_RUNTIME_DIR",
];

/// The test binary's home: made once, empty but for the directories the
/// platform layout expects.
pub fn home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("cadre-it-home-{}", std::process::id()));
        for sub in [".config", ".local/share", ".cache", ".local/state"] {
            std::fs::create_dir_all(dir.join(sub)).expect("test home");
        }
        dir
    })
}

/// The variables a hermetic `cadre` gets: the test home, and the real
/// toolchain homes.
pub fn vars() -> Vec<(String, PathBuf)> {
    let home = home();
    let mut vars = vec![
        ("HOME".to_string(), home.to_path_buf()),
        ("XDG_CONFIG_HOME".to_string(), home.join(".config")),
        ("XDG_DATA_HOME".to_string(), home.join(".local/share")),
        ("XDG_CACHE_HOME".to_string(), home.join(".cache")),
        ("XDG_STATE_HOME".to_string(), home.join(".local/state")),
    ];
    let real_home = std::env::var_os("HOME").map(PathBuf::from);
    for (var, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        let path = std::env::var_os(var)
            .map(PathBuf::from)
            .or_else(|| real_home.as_ref().map(|h| h.join(default)));
        if let Some(path) = path {
            vars.push((var.to_string(), path));
        }
    }
    vars
}

/// A command made hermetic: the steering variables removed, the test home
/// set.
pub trait Hermetic {
    /// Applies both; later `env` calls still override.
    fn hermetic(&mut self) -> &mut Self;
}

impl Hermetic for std::process::Command {
    fn hermetic(&mut self) -> &mut Self {
        for var in STEERING {
            self.env_remove(var);
        }
        self.envs(vars())
    }
}

impl Hermetic for tokio::process::Command {
    fn hermetic(&mut self) -> &mut Self {
        for var in STEERING {
            self.env_remove(var);
        }
        self.envs(vars())
    }
}
