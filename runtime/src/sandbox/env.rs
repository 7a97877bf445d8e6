//! The environment a command gets: an allow-list of the host's variables.
//!
//! bash reads code from its environment before it reads the command:
//! `BASH_ENV` names a file it sources, an exported function
//! (`BASH_FUNC_ls%%`) replaces a program, `PROMPT_COMMAND`, `PS4`,
//! `SHELLOPTS` and `BASHOPTS` change what runs, `GLOBIGNORE` and `CDPATH`
//! change what words mean. A command therefore starts from an empty
//! environment plus the variables below, which also keeps the host's
//! secrets (API keys, tokens) out of the model's reach.

/// Variables passed through when the host has them.
pub const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "TZ",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "JAVA_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
];

/// Prefixes of variables passed through (`LC_ALL`, `LC_CTYPE`, …).
pub const ALLOWED_PREFIXES: &[&str] = &["LC_"];

/// Variables never passed, even when configured: each makes bash run or
/// read something the command does not say, or (the cluster secret) lets
/// whoever holds it join the cluster.
pub const NEVER: &[&str] = &[
    "CADRE_CLUSTER_SECRET",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "GLOBIGNORE",
    "CDPATH",
    "TMPDIR",
    "TMP",
    "TEMP",
];

/// Prefixes of variables never passed (exported functions).
pub const NEVER_PREFIXES: &[&str] = &["BASH_FUNC_"];

/// `PATH` when the host gives none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether `name` may be passed to a command; `extra` names more variables
/// to pass (`[sandbox] env`), never one of [`NEVER`].
pub fn passes(name: &str, extra: &[String]) -> bool {
    let never = NEVER.contains(&name) || NEVER_PREFIXES.iter().any(|p| name.starts_with(p));
    let allowed = ALLOWED.contains(&name)
        || ALLOWED_PREFIXES.iter().any(|p| name.starts_with(p))
        || extra.iter().any(|e| e == name);
    allowed && !never
}

/// The host's variables a command gets, in the host's order; `PATH` is
/// always set.
pub fn inherited(
    vars: impl IntoIterator<Item = (String, String)>,
    extra: &[String],
) -> Vec<(String, String)> {
    let mut kept: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(name, _)| passes(name, extra))
        .collect();
    if !kept.iter().any(|(name, _)| name == "PATH") {
        kept.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    kept
}
