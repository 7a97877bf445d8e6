//! `cadre trust` (and the shell's `/trust`): a workspace's trust — which
//! project files it covers, what an untrusted project's config loses — and
//! granting or revoking it in the user's own record
//! (`cadre_runtime::trust`). Also the notice a session prints when it
//! ignored part of an untrusted project's config.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use cadre_runtime::config::{Config, ConfigPaths};
use cadre_runtime::trust::{Review, TRUST_FILE, TrustBook};

use crate::exit::CliError;

/// `cadre trust`.
#[derive(Debug, Args)]
#[command(
    after_help = "Until you trust a workspace, its project config (.cadre/config.toml, a committed \
.cadre/config.local.toml, .mcp.json) only narrows: its allow rules, roles, model, MCP servers and \
other keys that widen or steer are ignored (docs/security/paths.md lists every key). Trust is kept \
in your configuration directory, for the files as they are now: when they change, the workspace is \
untrusted again."
)]
pub struct TrustArgs {
    /// What to do (default: show).
    #[command(subcommand)]
    pub action: Option<TrustAction>,

    /// The workspace (default: the current directory).
    #[arg(
        long = "workspace",
        id = "trust_workspace",
        value_name = "DIR",
        global = true
    )]
    pub workspace: Option<PathBuf>,
}

/// `cadre trust show|yes|no`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum TrustAction {
    /// This workspace's trust, the files it covers and what is ignored
    /// while it is not trusted.
    Show,
    /// Trust the project's config as it is now (read it first).
    #[command(visible_alias = "grant")]
    Yes,
    /// Stop trusting it.
    #[command(visible_alias = "revoke")]
    No,
}

/// `cadre trust …`.
pub fn run(
    args: TrustArgs,
    current_dir: Option<PathBuf>,
    config_dir: Option<&Path>,
) -> Result<u8, CliError> {
    let Some(workspace) = args.workspace.or(current_dir) else {
        return Err(CliError::usage(
            "cannot tell the current directory; pass --workspace",
        ));
    };
    let text = apply(
        args.action.unwrap_or(TrustAction::Show),
        &workspace,
        config_dir,
    )?;
    crate::outln!("{text}");
    Ok(crate::exit::SUCCESS)
}

/// Carries out `action` for `workspace` and says what it found or did.
pub fn apply(
    action: TrustAction,
    workspace: &Path,
    config_dir: Option<&Path>,
) -> Result<String, CliError> {
    let Some(dir) = config_dir else {
        return Err(CliError::usage(
            "no configuration directory to keep trust in: pass --config-dir or set CADRE_CONFIG_DIR",
        ));
    };
    let book = TrustBook::in_dir(dir);
    let review = review(workspace, dir)?;
    let project = &review.project;
    let shown = project.workspace.display();
    match action {
        TrustAction::Show => Ok(show(&review, &book)),
        TrustAction::Yes if project.files.is_empty() => {
            Ok(format!("nothing to trust: {shown} has no project config"))
        }
        TrustAction::Yes => {
            book.grant(project)
                .map_err(|e| CliError::config(e.to_string()))?;
            Ok(format!(
                "trusted the project config of {shown} as it is now ({}); sessions started from \
                 now on apply it whole, until it changes",
                files(&review)
            ))
        }
        TrustAction::No => {
            let was = book
                .revoke(&project.workspace)
                .map_err(|e| CliError::config(e.to_string()))?;
            Ok(if was {
                format!("{shown} is no longer trusted; its project config only narrows")
            } else {
                format!("{shown} was not trusted")
            })
        }
    }
}

/// The workspace's trust as a session there would load it.
fn review(workspace: &Path, config_dir: &Path) -> Result<Review, CliError> {
    let paths = ConfigPaths {
        user: Some(config_dir.join("config.toml")),
        workspace: Some(workspace.to_path_buf()),
        explicit: None,
        trust_book: Some(config_dir.join(TRUST_FILE)),
    };
    let config = Config::load(&paths).map_err(|e| CliError::config(e.to_string()))?;
    config
        .trust
        .ok_or_else(|| CliError::internal("the workspace's trust was not reviewed"))
}

fn files(review: &Review) -> String {
    let names: Vec<String> = review
        .project
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    names.join(", ")
}

/// `cadre trust show`.
fn show(review: &Review, book: &TrustBook) -> String {
    let files = match files(review) {
        none if none.is_empty() => "none: there is nothing to trust".to_string(),
        some => some,
    };
    let ignored: Vec<String> = review
        .ignored
        .iter()
        .filter(|i| !i.keys.is_empty())
        .map(|i| format!("{} ({})", i.keys.join(", "), i.file.display()))
        .collect();
    let ignored = match (review.trust.is_trusted(), ignored.is_empty()) {
        (_, true) => "nothing: the project config only narrows".to_string(),
        (false, false) => ignored.join("; "),
        (true, false) => format!("nothing (while untrusted: {})", ignored.join("; ")),
    };
    let mut lines = vec![
        format!("workspace  {}", review.project.workspace.display()),
        format!("files      {files}"),
        format!("trust      {}", review.trust.describe()),
        format!("ignored    {ignored}"),
        format!("record     {}", book.path().display()),
    ];
    if !review.trust.is_trusted() && !review.project.files.is_empty() {
        lines.push("read the files, then `cadre trust yes` trusts them as they are now".into());
    }
    lines.join("\n")
}

/// Prints, once at a session's start, what distrust ignored, and the
/// configured hooks of events this version does not run.
pub fn warn(config: &Config) {
    if let Some(notice) = config.trust.as_ref().and_then(Review::notice) {
        crate::errln!("cadre: {}", crate::printable::printable(&notice));
    }
    let idle = config.hooks.not_run();
    if !idle.is_empty() {
        crate::errln!(
            "cadre: hooks of {} are configured but not run by this version (docs/hooks.md)",
            idle.join(", ")
        );
    }
}
