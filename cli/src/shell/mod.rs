//! `cadre` with no subcommand: a line-based shell on one session.
//!
//! It shows the same event stream as `exec` (streamed assistant text, tool
//! calls and results, permission decisions) as it comes, asks approval
//! prompts and plan questionnaires inline, and maps slash commands to `Op`s.
//! Ctrl-C cancels the running turn; twice at an idle prompt it leaves.
//!
//! # Layout
//! - [`commands`]: what a typed line means (slash commands, answers); pure.
//! - [`controller`]: the session logic: inputs and events in, `Op`s and
//!   notices out; no I/O.
//! - [`view`]: the text of events and notices; no I/O.
//! - [`terminal`]: rustyline's reader thread and the printer.
//! - [`workflow`]: `/workflow FILE`, a workflow run as an overlay.
//!
//! This module only wires them: the terminal and the view could be
//! replaced by a full-screen UI without touching the controller.

pub mod commands;
pub mod controller;
pub mod terminal;
pub mod view;
pub mod workflow;

use std::path::PathBuf;

use cadre_runtime::Mode;
use cadre_runtime::protocol::{Envelope, Event, ModelSource};
use cadre_runtime::settings::Settings;

use crate::config::RunConfig;
use crate::exit::{self, CliError};
use crate::launch::{Launched, launch};

use self::controller::{Controller, Facts, Input, Notice};
use self::terminal::{Next, Terminal};
use self::view::View;

/// Runs the shell until the person leaves; exits 0. A mode the person
/// chooses (and the session accepts) becomes the startup default in
/// `settings` (M6), even when it is the mode already active.
pub async fn run(config: RunConfig, settings: Option<Settings>) -> Result<u8, CliError> {
    // A person is here: Ask becomes an approval prompt.
    let Launched {
        handle,
        mut events,
        host,
        session_id,
        attached,
        mode_source,
        model_source,
    } = launch(&config, true).await?;
    let (found_tx, mut found) = tokio::sync::mpsc::unbounded_channel();
    let lookups = Lookups {
        attached,
        session_id: session_id.clone(),
        found: found_tx,
        workspace: config.workspace.clone(),
        config_dir: settings
            .as_ref()
            .and_then(|s| s.path().parent().map(PathBuf::from)),
    };
    // Before the terminal: rustyline saves the SIGINT handler around each
    // line and puts it back after, so the shell's must be in place first.
    let mut interrupts = interrupts();
    if model_source == ModelSource::Demo {
        crate::errln!("{}", crate::exec::DEMO_START);
    }
    let mut terminal = Terminal::start(config.data_dir.join("shell_history")).await;
    let mut view = View::new(
        crate::render::TextView::default()
            .with_followup(config.followup.clone())
            .with_tool_output_lines(config.tool_output_lines),
    );
    // The mode last asked for with `/mode`: persisted when the session
    // accepts it, forgotten when it refuses.
    let mut chosen: Option<Mode> = None;
    // Startup modes being saved: their receipts are shown before the shell
    // leaves, even after a `/quit` typed right behind the `/mode`.
    let mut saving: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    // A `/workflow` run shown over the session, while it runs.
    let mut overlay: Option<workflow::Overlay> = None;
    let mut shell = Controller::new(Facts {
        session_id,
        mode: config.mode,
        posture: config.posture,
        model: String::new(),
        workspace: config.workspace.display().to_string(),
        data_dir: config.data_dir.clone(),
    });

    // `cadre "PROMPT"`: the first line, as if typed at the prompt once the
    // session has said hello.
    let mut first = config.prompt.clone();
    // While the turn waits for the model: when to say so next. The prompt
    // line is the line editor's, so a notice line, not a spinner.
    let mut waiting = Waiting::default();

    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(Envelope { mut event, .. }) = event else { break };
                crate::launch::stamp(&mut event, mode_source, model_source);
                if let Some(piece) = view.event(&event) {
                    terminal.show(piece);
                }
                waiting.after(&event);
                match &event {
                    Event::ModeChanged { mode } if chosen == Some(*mode) => {
                        chosen = None;
                        saving.extend(persist_default_mode(settings.clone(), *mode, lookups.found.clone()));
                    }
                    Event::OpRejected { op, .. } if op == "set_mode" || op == "plan" => chosen = None,
                    _ => {}
                }
                for op in shell.event(&event) {
                    let _ = handle.submit(op);
                }
                if matches!(event, Event::SessionStarted { .. })
                    && let Some(line) = first.take()
                {
                    terminal.echo(&line);
                    react(&mut shell, &handle, None, &view, &mut terminal, &lookups, Input::Line(line));
                }
                if matches!(event, Event::SessionStopped { .. }) {
                    break;
                }
            }
            () = waiting.due() => {
                terminal.show(crate::render::Piece {
                    stream: crate::render::Stream::Err,
                    text: waiting.notice(),
                });
            }
            out = async {
                match overlay.as_mut() {
                    // Its events first, its end once they are all shown.
                    Some(o) => tokio::select! {
                        biased;
                        Some(envelope) = o.events.recv() => Ok(envelope),
                        report = &mut o.handle.done => Err(report),
                    },
                    None => std::future::pending().await,
                }
            } => match out {
                Ok(envelope) => {
                    if let Some(o) = overlay.as_mut() {
                        o.saw(&envelope.event);
                    }
                    if let Some(piece) = view.event(&envelope.event) {
                        terminal.show(piece);
                    }
                    // Its steps' prompts are answered like the session's own.
                    for op in shell.event(&envelope.event) {
                        route(&handle, overlay.as_ref(), op);
                    }
                }
                Err(report) => {
                    let text = match report {
                        Ok(report) => crate::workflow_view::table(&report),
                        Err(_) => "the workflow stopped without a report\n".to_string(),
                    };
                    terminal.show(crate::render::Piece { stream: crate::render::Stream::Err, text });
                    overlay = None;
                }
            },
            input = terminal.next() => match input {
                Some((Input::Line(line), reply)) if workflow::parse(&line).is_some() => {
                    let text = match workflow::parse(&line) {
                        Some(Ok(workflow::Request::Run(_))) if overlay.is_some() => {
                            "a workflow is running; /workflow cancel stops it\n".to_string()
                        }
                        Some(Ok(workflow::Request::Run(file))) => {
                            match workflow::run(&host, &config, &lookups.session_id, &file).await {
                                Ok(started) => {
                                    overlay = Some(started);
                                    String::new()
                                }
                                Err(why) => format!("{why}\n"),
                            }
                        }
                        Some(Ok(workflow::Request::Cancel(target))) => match &overlay {
                            Some(o) => {
                                o.handle.cancel(target.as_deref().unwrap_or("*"));
                                String::new()
                            }
                            None => "no workflow is running\n".to_string(),
                        },
                        Some(Err(usage)) => format!("usage: {usage}\n"),
                        None => String::new(),
                    };
                    if !text.is_empty() {
                        terminal.show(crate::render::Piece { stream: crate::render::Stream::Err, text });
                    }
                    terminal.answer(reply, Next::Read);
                }
                Some((input, reply)) => {
                    if let Input::Line(line) = &input
                        && let commands::Line::Command(commands::Command::Mode(Some(mode))) =
                            commands::parse(line)
                    {
                        chosen = Some(mode);
                    }
                    let next = react(&mut shell, &handle, overlay.as_ref(), &view, &mut terminal, &lookups, input);
                    terminal.answer(reply, next);
                }
                // The reader is gone (it could not start, say): as Ctrl-D.
                None => {
                    react(&mut shell, &handle, overlay.as_ref(), &view, &mut terminal, &lookups, Input::Eof);
                }
            },
            // Ctrl-C while the reader is between two lines arrives as SIGINT.
            Some(()) = interrupts.recv() => {
                react(&mut shell, &handle, overlay.as_ref(), &view, &mut terminal, &lookups, Input::Interrupt);
            }
            Some(notice) = found.recv() => terminal.show(view.notice(&notice)),
        }
    }
    if terminal.reading() {
        // The session stopped on its own while the reader waits in raw mode:
        // it must be let go by a line, not abandoned.
        terminal.show(view.notice(&Notice::SessionGone));
        if let Some((_, reply)) = terminal.next().await {
            terminal.answer(reply, Next::Stop);
        }
    }
    handle.stopped().await;
    lookups.attached.mcp.shutdown().await;
    host.close().await;
    // The receipts of startup modes still being saved, and what lookups
    // found, before the terminal goes.
    for save in saving {
        let _ = save.await;
    }
    while let Ok(notice) = found.try_recv() {
        terminal.show(view.notice(&notice));
    }
    // A new session nothing was asked of (a shell opened and left) is not
    // kept: `sessions list` and `--continue` show sessions that did work.
    if config.resume == crate::config::Resume::New {
        forget_if_unused(&config.data_dir, &lookups.session_id).await;
    }
    terminal.finish();
    if model_source == ModelSource::Demo {
        crate::errln!("{}", crate::exec::DEMO_END);
    }
    Ok(exit::SUCCESS)
}

/// Applies an input: submits its ops, shows its notices, says whether to
/// read on.
fn react(
    shell: &mut Controller,
    handle: &cadre_actors::SessionHandle,
    overlay: Option<&workflow::Overlay>,
    view: &View,
    terminal: &mut Terminal,
    lookups: &Lookups,
    input: Input,
) -> Next {
    if shell.quitting() {
        // Shutdown is on its way; nothing else is worth sending.
        return Next::Stop;
    }
    let escape = input == Input::Escape;
    let reaction = shell.input(input);
    // An Esc that cancelled nothing clears the line being typed.
    let nothing = reaction.ops.is_empty() && reaction.notices.is_empty();
    for notice in &reaction.notices {
        terminal.show(view.notice(notice));
        lookups.answer(notice);
    }
    for op in reaction.ops {
        route(handle, overlay, op);
    }
    if reaction.quit {
        Next::Stop
    } else if escape && nothing {
        Next::ClearLine
    } else {
        Next::Read
    }
}

/// Sends an op to the session, or an answer to one of the overlay run's
/// prompts to that run.
fn route(
    handle: &cadre_actors::SessionHandle,
    overlay: Option<&workflow::Overlay>,
    op: cadre_runtime::protocol::Op,
) {
    match (op, overlay) {
        (
            cadre_runtime::protocol::Op::Approve {
                id,
                decision,
                reason,
            },
            Some(o),
        ) if o.asked(&id) => {
            o.handle.approve(&id, decision, reason);
        }
        // A session that is gone says so with `session.stopped`.
        (op, _) => {
            let _ = handle.submit(op);
        }
    }
}

/// What `/mcp` and `/restore` look up, off the shell's loop: the answer
/// comes back as a notice on `found` (so does a saved startup mode).
struct Lookups {
    attached: crate::attach::Attached,
    session_id: String,
    found: tokio::sync::mpsc::UnboundedSender<Notice>,
    /// For `/trust`: the workspace and the configuration directory that
    /// keeps the user's trust record.
    workspace: PathBuf,
    config_dir: Option<PathBuf>,
}

impl Lookups {
    fn answer(&self, notice: &Notice) {
        let found = self.found.clone();
        if let Notice::Trust(action) = notice {
            let (action, workspace) = (*action, self.workspace.clone());
            let config_dir = self.config_dir.clone();
            tokio::task::spawn_blocking(move || {
                let text = crate::trust_cmd::apply(action, &workspace, config_dir.as_deref())
                    .unwrap_or_else(|err| err.message);
                let _ = found.send(Notice::Found(text));
            });
            return;
        }
        if let Notice::McpServers = notice {
            let mcp = self.attached.mcp.clone();
            tokio::spawn(async move {
                let text = cadre_runtime::mcp::render_reports(&mcp.reports().await);
                let _ = found.send(Notice::Found(text));
            });
        } else if let Notice::Snapshots = notice {
            let Some(snapshots) = self.attached.snapshots.clone() else {
                let off = "snapshots are off ([snapshots] enabled = false)";
                let _ = found.send(Notice::Found(off.into()));
                return;
            };
            let session = self.session_id.clone();
            tokio::task::spawn_blocking(move || {
                let _ = found.send(Notice::Found(match snapshots.list(Some(&session)) {
                    Ok(listed) => snapshot_lines(&listed),
                    Err(err) => format!("the snapshots could not be listed: {err}"),
                }));
            });
        }
    }
}

/// This session's snapshots, one line each, newest first.
fn snapshot_lines(listed: &[cadre_runtime::snapshot::SnapshotInfo]) -> String {
    if listed.is_empty() {
        return "no snapshots yet: one is taken before a turn's first change".into();
    }
    let mut lines: Vec<String> = listed
        .iter()
        .map(|s| {
            let turn = s
                .mark
                .turn
                .map_or_else(|| s.mark.label.clone(), |t| format!("turn {t}"));
            format!(
                "{}  {}  {turn}  {} changed since",
                &s.id[..12],
                crate::sessions_cmd::when(s.time as f64),
                s.changed_since
            )
        })
        .collect();
    lines.push("/restore SNAPSHOT [--dry-run] puts the workspace back".into());
    lines.join("\n")
}

/// Writes `default_mode` off the async threads and says how it went (the
/// receipt, or why it was not saved); the session goes on either way. The
/// task writing it, if one was started.
fn persist_default_mode(
    settings: Option<Settings>,
    mode: Mode,
    receipts: tokio::sync::mpsc::UnboundedSender<Notice>,
) -> Option<tokio::task::JoinHandle<()>> {
    let Some(settings) = settings else {
        let _ = receipts.send(Notice::ModeSaved {
            mode,
            error: Some("there is no configuration directory".into()),
        });
        return None;
    };
    Some(tokio::task::spawn_blocking(move || {
        let error = settings
            .set("default_mode", mode.as_str())
            .err()
            .map(|e| e.to_string());
        let _ = receipts.send(Notice::ModeSaved { mode, error });
    }))
}

/// Removes the session from the store if nothing was asked of it; a store
/// that cannot be opened keeps it (it is only clutter).
async fn forget_if_unused(data_dir: &std::path::Path, session_id: &str) {
    let path = cadre_runtime::store::store_path(data_dir);
    let id = session_id.to_string();
    let forgotten = tokio::task::spawn_blocking(move || {
        cadre_runtime::store::Store::open(&path)?.forget_if_unused(&id)
    })
    .await;
    if let Ok(Err(err)) = forgotten {
        tracing::debug!(%err, "an unused session was kept");
    }
}

/// SIGINTs, for a Ctrl-C typed while the terminal is not in raw mode. The
/// handler is installed before this returns; it also keeps SIGINT from
/// killing the shell.
fn interrupts() -> tokio::sync::mpsc::UnboundedReceiver<()> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::interrupt()) {
            // The stream keeps a signal that arrives between two polls.
            Ok(mut sigint) => {
                tokio::spawn(async move {
                    while sigint.recv().await.is_some() {
                        if tx.send(()).is_err() {
                            return;
                        }
                    }
                });
            }
            Err(err) => tracing::warn!(%err, "Ctrl-C between two lines cannot be caught"),
        }
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            if tx.send(()).is_err() {
                return;
            }
        }
    });
    rx
}

/// The shell's notice while a turn waits for the model or a tool runs
/// (`… running bash (7 s)`): after [`Waiting::FIRST`] of silence, then every
/// [`Waiting::AGAIN`]; the wait starts, changes and ends as
/// [`crate::spinner::doing`] says.
#[derive(Debug, Default)]
struct Waiting {
    /// Since when, and when to say so next.
    since: Option<(tokio::time::Instant, tokio::time::Instant)>,
    /// What it waits for: the model, or a running tool.
    label: String,
}

impl Waiting {
    const FIRST: std::time::Duration = std::time::Duration::from_secs(2);
    const AGAIN: std::time::Duration = std::time::Duration::from_secs(5);

    fn after(&mut self, event: &Event) {
        match crate::spinner::doing(event) {
            // A new wait, or another kind of one (a tool started, the model
            // asked again): counted from now.
            Some(Some(label)) if self.since.is_none() || label != self.label => {
                let now = tokio::time::Instant::now();
                self.since = Some((now, now + Self::FIRST));
                self.label = label;
            }
            Some(None) => self.since = None,
            Some(Some(_)) | None => {}
        }
    }

    /// Resolves when a notice is due; never while nothing waits.
    async fn due(&self) {
        match self.since {
            Some((_, next)) => tokio::time::sleep_until(next).await,
            None => std::future::pending().await,
        }
    }

    /// The notice, and the next one scheduled.
    fn notice(&mut self) -> String {
        let Some((since, _)) = self.since else {
            return String::new();
        };
        let now = tokio::time::Instant::now();
        self.since = Some((since, now + Self::AGAIN));
        format!(
            "  … {} ({} s)\n",
            self.label,
            now.duration_since(since).as_secs()
        )
    }
}
