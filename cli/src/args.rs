//! The command line as plain data (clap), before any validation.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// cadre: an actor-based runtime for coding agents.
#[derive(Debug, Parser)]
#[command(name = "cadre", version, about, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// cadre's configuration directory, holding settings.toml and the user's
    /// config.toml (default: the platform config dir + cadre).
    #[arg(long, global = true, env = "CADRE_CONFIG_DIR", value_name = "DIR")]
    pub config_dir: Option<PathBuf>,

    /// What to do (none: the interactive shell).
    #[command(subcommand)]
    pub command: Option<Command>,

    /// A first message: `cadre "Fix the failing test"` opens the shell and
    /// sends it.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// The shell's session flags (`cadre` with no subcommand); refused
    /// before a subcommand, which would ignore them.
    #[command(flatten)]
    pub session: SessionArgs,

    /// The shell's nodes, for its sub-agents and delegated workflows' steps.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one prompt to completion without a terminal UI.
    Exec(Box<ExecArgs>),
    /// Read or change user defaults in settings.toml.
    #[command(after_help = config_help())]
    Config(ConfigArgs),
    /// List, inspect and fork stored sessions.
    Sessions(SessionsArgs),
    /// Answer a session's plan questionnaire without running it.
    Plan(PlanArgs),
    /// List the workspace's snapshots, or put the workspace back as one
    /// recorded it.
    Restore(RestoreArgs),
    /// The configured MCP servers: started, listed, stopped.
    Mcp(McpArgs),
    /// Validate, run, resume, list, show and cancel workflows.
    Workflow(WorkflowArgs),
    /// Run step agents for coordinators on other machines (docs/cluster.md).
    #[command(mut_arg("resume", |a| a.hide(true)), mut_arg("continue_latest", |a| a.hide(true)))]
    Node(Box<NodeArgs>),
    /// Show, pause, resume, clear a stored session's goal, or change its budget.
    Goal(crate::goal_cmd::GoalArgs),
    /// Show, grant or revoke the trust of this workspace's project config.
    Trust(crate::trust_cmd::TrustArgs),
    /// Serve the Agent Client Protocol on stdin/stdout, for an editor
    /// (docs/editors.md).
    Acp(Box<AcpArgs>),
}

/// `cadre acp`.
#[derive(Debug, Args)]
#[command(
    after_help = "An editor starts `cadre acp` and speaks JSON-RPC to it over stdin and stdout \
(docs/editors.md). Each editor session is a cadre session in the editor's working directory, with \
this command's model, posture, mode and rules; its approvals are asked in the editor. Logs go to \
stderr."
)]
pub struct AcpArgs {
    /// The model, posture, mode and rules every session starts with.
    #[command(flatten)]
    pub session: SessionArgs,
}

/// `cadre node`.
#[derive(Debug, Args)]
#[command(
    after_help = "The cluster secret comes from $CADRE_CLUSTER_SECRET or --secret-file; a node refuses \
to start without one, and refuses every peer that does not prove it. --posture and --mode are the \
most this node lets any agent do; --deny and --ask rules (and the configuration's) are added to every \
agent's, allow rules never are."
)]
pub struct NodeArgs {
    /// The address coordinators connect to.
    #[arg(long, default_value = "127.0.0.1:7070", value_name = "ADDR")]
    pub listen: String,
    /// A coordinator to connect to (one started with --cluster-listen). Repeatable.
    #[arg(long = "connect", value_name = "HOST:PORT")]
    pub connect: Vec<String>,
    /// Agents run at once.
    #[arg(long, default_value_t = 4)]
    pub slots: u32,
    /// The node's name in the cluster (default: node-<port>).
    #[arg(long)]
    pub name: Option<String>,
    /// A workspace served: PATH (the same path here as on the coordinator)
    /// or COORDINATOR_PATH=LOCAL_PATH. Repeatable.
    #[arg(long = "serve", value_name = "PATH[=LOCAL]", required = true)]
    pub serve: Vec<String>,
    /// A file holding the cluster secret (default: $CADRE_CLUSTER_SECRET).
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// Milliseconds a connecting peer has to prove the secret before it is
    /// closed.
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub handshake_timeout_ms: u64,
    /// Connections not yet authenticated at once; more are closed at once.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub max_unauthenticated: usize,
    /// The model, limits and rules agents run with here.
    #[command(flatten)]
    pub session: SessionArgs,
}

/// Where a run's steps may go besides this process (docs/cluster.md).
#[derive(Debug, Clone, Default, Args)]
pub struct ClusterArgs {
    /// Nodes to run steps on, HOST:PORT (repeatable or comma-separated;
    /// default: the configuration's `[cluster] nodes`).
    #[arg(long = "nodes", value_delimiter = ',', value_name = "HOST:PORT")]
    pub nodes: Vec<String>,
    /// Steps this process runs itself at once besides the nodes (default:
    /// the configuration's, else 0: only while no node serves the workspace).
    #[arg(long)]
    pub local_slots: Option<u32>,
    /// Also accept nodes that connect here (`cadre node --connect`).
    #[arg(long, value_name = "ADDR")]
    pub cluster_listen: Option<String>,
    /// A file holding the cluster secret (default: $CADRE_CLUSTER_SECRET).
    #[arg(long = "secret-file", id = "cluster_secret_file", value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// Milliseconds a node may leave a heartbeat unanswered before it is
    /// lost and its running steps fail.
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub node_timeout: u64,
}

/// `cadre restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: RestoreAction,

    /// The workspace (default: the current directory).
    #[arg(long = "workspace", id = "restore_workspace", global = true)]
    pub workspace: Option<PathBuf>,

    /// Where sessions are stored (default: $CADRE_HOME, else the platform data dir + cadre).
    #[arg(
        long = "data-dir",
        id = "restore_data_dir",
        env = "CADRE_HOME",
        global = true
    )]
    pub data_dir: Option<PathBuf>,

    /// A configuration file read after the user, project and local ones.
    #[arg(long = "config", id = "restore_config", global = true)]
    pub config: Option<PathBuf>,
}

/// `cadre restore list|apply`.
#[derive(Debug, Subcommand)]
pub enum RestoreAction {
    /// Snapshots, newest first: id, session, turn, time, files changed since.
    List {
        /// Only this session's: an id, a unique id prefix, or `latest`
        /// (default: every session's in the workspace).
        session: Option<String>,
    },
    /// Put the workspace back: changed files restored, deleted ones
    /// recreated, files created since removed; ignored files left alone.
    /// The session's conversation is kept. Refused while the session runs.
    Apply {
        /// The snapshot's id, or a unique prefix of four or more characters.
        snapshot: String,
        /// Report what would change, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `cadre mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: McpAction,
}

/// `cadre mcp list|serve`.
#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Start every configured server, list its state, its tools and their
    /// safety, and stop it.
    List(McpListArgs),
    /// Be an MCP server on stdin/stdout: another agent delegates to cadre
    /// through its `run` and `workflow` tools (docs/mcp.md).
    #[command(
        after_help = "The tools run sessions and workflows with this command's model, rules and \
posture; a caller's posture only narrows it. No one can be asked: a call the posture would ask \
about is denied, and the answer says why."
    )]
    Serve(Box<McpServeArgs>),
}

/// `cadre mcp list`.
#[derive(Debug, Args)]
pub struct McpListArgs {
    /// The workspace, whose `.mcp.json` and `.cadre` config are read
    /// (default: the current directory).
    #[arg(long = "workspace", id = "mcp_workspace")]
    pub workspace: Option<PathBuf>,

    /// A configuration file read after the user, project and local ones.
    #[arg(long = "config", id = "mcp_config")]
    pub config: Option<PathBuf>,
}

/// `cadre mcp serve`.
#[derive(Debug, Args)]
pub struct McpServeArgs {
    /// The model, the widest posture, the mode and the rules of every
    /// run; `--workspace` is the default workspace of a call that names
    /// none.
    #[command(flatten)]
    pub session: SessionArgs,
}

/// `cadre workflow`.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 every step verified or finalized; 1 some step failed or was \
blocked; 2 an invalid file or bad usage; 75 an infrastructure failure (the store is busy, the \
run is leased to another process); 130 interrupted."
)]
pub struct WorkflowArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: WorkflowAction,
}

/// `cadre workflow validate|run|resume|list|show|cancel`.
#[derive(Debug, Subcommand)]
pub enum WorkflowAction {
    /// Check a workflow file; every finding is printed FILE:LINE:COL: message.
    Validate(WorkflowValidateArgs),
    /// Run a workflow file.
    // The session flags' `--resume`/`--continue` are refused here (a run
    // resumes with `workflow resume`): not shown.
    #[command(mut_arg("resume", |a| a.hide(true)), mut_arg("continue_latest", |a| a.hide(true)))]
    Run(Box<WorkflowRunArgs>),
    /// Run what a stored run left unfinished (never what it finished).
    #[command(mut_arg("resume", |a| a.hide(true)), mut_arg("continue_latest", |a| a.hide(true)))]
    Resume(Box<WorkflowResumeArgs>),
    /// The most recent runs.
    List {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Where runs are stored (default: $CADRE_HOME, else the platform data dir + cadre).
        #[arg(long, env = "CADRE_HOME")]
        data_dir: Option<PathBuf>,
    },
    /// One run: its steps and their states.
    Show {
        /// A run id, a unique prefix, or `latest`.
        run: String,
        /// Where runs are stored.
        #[arg(long, env = "CADRE_HOME")]
        data_dir: Option<PathBuf>,
    },
    /// Cancel a run, one step (`STEP`) or one item (`STEP[i]`); the rest
    /// runs on.
    Cancel {
        /// A run id, a unique prefix, or `latest`.
        run: String,
        /// `STEP` or `STEP[i]` (default: the whole run).
        target: Option<String>,
        /// Where runs are stored.
        #[arg(long, env = "CADRE_HOME")]
        data_dir: Option<PathBuf>,
    },
}

/// `cadre workflow validate`.
#[derive(Debug, Args)]
pub struct WorkflowValidateArgs {
    /// The workflow file (TOML).
    pub file: PathBuf,
    /// A variable, `KEY=VALUE`, over the file's `[vars]`. Repeatable.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    pub vars: Vec<String>,
    /// The workspace, whose configuration names the roles (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// A configuration file read after the user, project and local ones.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// `cadre workflow run`.
#[derive(Debug, Args)]
pub struct WorkflowRunArgs {
    /// The workflow file (TOML).
    pub file: PathBuf,
    /// A variable, `KEY=VALUE`, over the file's `[vars]`. Repeatable.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    pub vars: Vec<String>,
    /// Step instances running at once, at most (the file's `max_parallel` caps it too).
    #[arg(long)]
    pub max_parallel: Option<u32>,
    /// Print what would launch (instances, roles, models, budget) and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub output_format: OutputFormat,
    /// Nodes to run steps on.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The session flags: model, posture, directories.
    #[command(flatten)]
    pub session: SessionArgs,
}

/// `cadre workflow resume`.
#[derive(Debug, Args)]
pub struct WorkflowResumeArgs {
    /// A run id, a unique prefix, or `latest`.
    pub run: String,
    /// Also run again what failed (and so what it blocked).
    #[arg(long)]
    pub retry_failed: bool,
    /// Step instances running at once, at most.
    #[arg(long)]
    pub max_parallel: Option<u32>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub output_format: OutputFormat,
    /// Nodes to run steps on.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The session flags: model, posture, directories.
    #[command(flatten)]
    pub session: SessionArgs,
}

/// `cadre sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: SessionsAction,

    /// Where sessions are stored (default: $CADRE_HOME, else the platform data dir + cadre).
    // An id of its own: a global argument's value is also recorded under
    // its id on the command above, where `data_dir` is the shell's flag.
    #[arg(
        long = "data-dir",
        id = "sessions_data_dir",
        value_name = "DIR",
        env = "CADRE_HOME",
        global = true
    )]
    pub data_dir: Option<PathBuf>,
}

/// `cadre sessions list|show|fork`.
#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// The most recently active sessions.
    List {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// One session: its state, admitted messages, waiting questionnaire,
    /// and its conversation (what a compaction replaced is one line).
    Show {
        /// An id, a unique id prefix, or `latest`.
        session: String,
        /// Also list the messages compactions replaced (they stay stored).
        #[arg(long)]
        full: bool,
    },
    /// Copy a session's conversation into a new session (its parent recorded).
    Fork {
        /// An id, a unique id prefix, or `latest`.
        session: String,
    },
    /// The permission audit: every decision not made by a person at a
    /// prompt (the session's and its sub-agents'), oldest first.
    Audit {
        /// An id, a unique id prefix, or `latest`.
        session: String,
        /// One JSON record per line (tool, exact arguments, posture,
        /// verdict, layer, rule and scope, risk, reason) instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `cadre plan approve|revise|withdraw|defer SESSION`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The answer.
    #[arg(value_enum)]
    pub verdict: PlanVerdict,

    /// The session: an id, a unique id prefix, or `latest`.
    pub session: String,

    /// What to change (required with revise).
    #[arg(long)]
    pub feedback: Option<String>,

    /// Where sessions are stored (default: $CADRE_HOME, else the platform data dir + cadre).
    #[arg(long, env = "CADRE_HOME")]
    pub data_dir: Option<PathBuf>,
}

/// An answer to a plan questionnaire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanVerdict {
    /// Implement the plan: `exec --resume` runs it.
    Approve,
    /// Send it back with --feedback; a follow-up turn revises it in Plan mode.
    Revise,
    /// Drop it: back to Work, nothing implemented.
    Withdraw,
    /// Not now: nothing changes.
    Defer,
}

/// `cadre config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// What to do with the settings.
    #[command(subcommand)]
    pub action: ConfigAction,
}

/// `cadre config get|set|list`.
#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Print a setting's value (exit 1 if it is not set).
    Get {
        /// A dotted key, e.g. default_mode or plan.agent_entry.
        key: String,
    },
    /// Set a setting, keeping every other one.
    Set {
        /// A dotted key, e.g. default_mode or plan.agent_entry.
        key: String,
        /// The value, checked against the key.
        value: String,
    },
    /// Print every setting as `key = value`.
    List,
}

/// The known keys and the exit codes, for `cadre config --help`.
fn config_help() -> String {
    let mut help = String::from("Settings:\n");
    for known in cadre_runtime::settings::KNOWN_KEYS {
        help.push_str(&format!("  {:<18} {}\n", known.key, known.about));
    }
    help.push_str(
        "\nSettings are the lowest-precedence defaults: flags > environment > config files > \
         settings. When your config.toml sets the same thing, `get` and `set` say so on stderr \
         and `list` notes it after the line. Config-file keys (base_url, roles, …) are not \
         settings: write them in config.toml.\n\nExit codes: 0 done; 1 `get` of a key that is not set (\"KEY is not set\" \
         on stderr); 2 an unknown key, a bad value, or a settings file that cannot be read \
         or parsed.",
    );
    help
}

/// How `exec` prints the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people: the answer on stdout, progress on stderr.
    Text,
    /// One JSON object at the end.
    Json,
    /// One JSON event per line as it happens (see docs/stream-json.md).
    StreamJson,
}

/// `cadre exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The prompt; `-` reads it from stdin, as does no PROMPT when stdin is
    /// not a terminal (optional with --resume or --continue, which run what
    /// the session had queued).
    pub prompt: Option<String>,

    /// Read the prompt from this file (`-`: stdin), with no limit on its size.
    #[arg(long, value_name = "FILE", conflicts_with = "prompt")]
    pub prompt_file: Option<PathBuf>,

    /// Approve a plan submitted for approval as soon as the turn ends, and
    /// run its implementation.
    #[arg(long, conflicts_with = "plan_only")]
    pub approve_plan: bool,

    /// Stop once a plan waits for approval; print its path and approval id.
    #[arg(long)]
    pub plan_only: bool,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub output_format: OutputFormat,

    /// Also write the answer (the last message of the last turn, which a
    /// text run alone prints on stdout) to FILE, in any output format.
    #[arg(long, value_name = "FILE")]
    pub output_last_message: Option<PathBuf>,

    /// A goal to drive to a verified end.
    #[command(flatten)]
    pub goal: crate::goal_cmd::GoalFlags,

    /// Nodes to run sub-agents (and delegated workflows' steps) on.
    #[command(flatten)]
    pub cluster: ClusterArgs,

    /// The session: model, mode, permissions, directories.
    #[command(flatten)]
    pub session: SessionArgs,
}

/// The flags that set up a session, shared by `cadre exec` and the shell.
#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// Resume a stored session: its id, a unique id prefix, or `latest`.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    pub resume: Option<String>,

    /// Resume the most recent session in this workspace.
    #[arg(long = "continue")]
    pub continue_latest: bool,

    /// Interaction mode: plan, work (agent, act, normal) or operate
    /// (default: $CADRE_MODE, else the config's `mode`, else the settings'
    /// `default_mode`, which the shell's /mode saves, else work). A resumed
    /// session keeps its own mode unless this (or CADRE_MODE) is given.
    #[arg(long)]
    pub mode: Option<String>,

    /// Permission posture: suggest (ask), auto (auto-review), bypass
    /// (full-access) or never (default: the config's `posture`, else the
    /// settings' `default_posture`, else suggest).
    /// exec cannot ask a person, so under suggest anything the floor cannot
    /// prove safe is denied; the shell asks.
    #[arg(long, env = "CADRE_POSTURE")]
    pub posture: Option<String>,

    /// A rule allowing calls for this run, e.g. 'bash(cargo test:*)'. Repeatable.
    #[arg(long = "allow", value_name = "RULE")]
    pub allow: Vec<String>,

    /// A rule that asks a person (exec denies instead), e.g. 'write_file(Cargo.toml)'. Repeatable.
    #[arg(long = "ask", value_name = "RULE")]
    pub ask: Vec<String>,

    /// A rule denying calls, e.g. 'bash(git push:*)'. Repeatable.
    #[arg(long = "deny", value_name = "RULE")]
    pub deny: Vec<String>,

    /// A configuration file read after the user, project and local ones.
    #[arg(long)]
    pub config: Option<PathBuf>,

    /// Sub-agents running at once (clamped to 1..=128; default: the config's, else 8).
    #[arg(long)]
    pub max_subagents: Option<u32>,

    /// The workspace root (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,

    /// Where sessions are stored (default: $CADRE_HOME, else the platform data dir + cadre).
    #[arg(long, env = "CADRE_HOME")]
    pub data_dir: Option<PathBuf>,

    /// Base URL of an OpenAI-compatible server, including /v1.
    #[arg(long, env = "OPENAI_BASE_URL")]
    pub base_url: Option<String>,

    /// The model name (required with --base-url; default: the config's
    /// `model`, else the settings' `model`).
    #[arg(long, env = "OPENAI_MODEL")]
    pub model: Option<String>,

    /// A model script file (TOML, or JSON by extension) instead of a server.
    #[arg(long, conflicts_with = "base_url")]
    pub script: Option<PathBuf>,

    /// Model requests one turn may make before it fails.
    #[arg(long, default_value_t = 50)]
    pub max_iterations: u32,

    /// Retries of a failed model request (429, 5xx, connection errors, dropped streams).
    #[arg(long, default_value_t = 4)]
    pub max_retries: u32,

    /// Seconds a tool call may run before it times out.
    #[arg(long, default_value_t = 120)]
    pub tool_timeout: u64,

    /// Ask the server for whole responses instead of streams.
    #[arg(long)]
    pub no_stream: bool,
}
