//! `cadre restore list|apply`: the workspace's snapshots, offline. A
//! restore takes the lease of the session that recorded the snapshot, so it
//! is refused while that session runs in another process (use `/restore`
//! there); it records a snapshot first, so it can be undone, and stores a
//! `workspace.restored` event in the session's transcript and a note for the
//! model after its conversation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cadre_runtime::config::{Config, ConfigPaths};
use cadre_runtime::message::Message;
use cadre_runtime::snapshot::{Mark, SnapshotError, Snapshots};
use cadre_runtime::store::{LeaseOwner, Store, StoreError, store_path};

use crate::args::{RestoreAction, RestoreArgs};
use crate::config::Environment;
use crate::exit::{self, CliError};
use crate::followup::Followup;
use crate::render::restored_text;
use crate::sessions_cmd::when;

/// `cadre restore …`.
pub fn run(
    args: RestoreArgs,
    env: &Environment,
    config_dir: Option<&Path>,
) -> Result<u8, CliError> {
    let Some(data_dir) = args
        .data_dir
        .clone()
        .or_else(|| crate::default_data_dir(env))
    else {
        return Err(CliError::usage(
            "no data directory: pass --data-dir or set CADRE_HOME",
        ));
    };
    let mut store =
        Store::open(&store_path(&data_dir)).map_err(|e| CliError::config(e.to_string()))?;
    // `restore list SESSION` looks in that session's workspace.
    let (workspace, session) = match &args.action {
        RestoreAction::List {
            session: Some(spec),
        } => {
            let found = store
                .resolve(spec, None)
                .map_err(|e| CliError::usage(e.to_string()))?;
            (Some(PathBuf::from(found.workspace)), Some(found.id))
        }
        RestoreAction::List { session: None } | RestoreAction::Apply { .. } => {
            (args.workspace.clone().or(env.current_dir.clone()), None)
        }
    };
    let Some(workspace) = workspace else {
        return Err(CliError::usage(
            "cannot tell the current directory; pass --workspace",
        ));
    };
    let workspace = workspace
        .canonicalize()
        .map_err(|e| CliError::usage(format!("--workspace {}: {e}", workspace.display())))?;
    let paths = ConfigPaths {
        user: config_dir.map(|d| d.join("config.toml")),
        workspace: Some(workspace.clone()),
        explicit: args.config.clone(),
        trust_book: config_dir.map(|d| d.join(cadre_runtime::trust::TRUST_FILE)),
    };
    let config = Config::load(&paths).map_err(|e| CliError::config(e.to_string()))?;
    // What counts as the workspace now uses the session's own cap, even
    // where recording is off.
    let cap = crate::config::snapshot_cap(&config.settings.snapshots);
    let snapshots = Snapshots::new(&data_dir, &workspace, cap);
    let current = env.current_dir.as_ref().and_then(|d| d.canonicalize().ok());
    let followup = Followup::new(&data_dir, crate::default_data_dir(env).as_deref())
        .workspace(&workspace, current.as_deref());
    match args.action {
        RestoreAction::List { .. } => {
            let listed = snapshots.list(session.as_deref()).map_err(snapshot_error)?;
            if listed.is_empty() {
                crate::errln!("no snapshots of {}", workspace.display());
            }
            for s in listed {
                let turn = match s.mark.turn {
                    Some(turn) => format!("turn {turn}"),
                    None => s.mark.label.clone(),
                };
                crate::outln!(
                    "{}  {}  {:<5}  {}  {}  {} changed since",
                    &s.id[..12],
                    s.mark.session,
                    s.mark.agent,
                    when(s.time as f64),
                    turn,
                    s.changed_since
                );
            }
            Ok(exit::SUCCESS)
        }
        RestoreAction::Apply { snapshot, dry_run } => {
            let found = snapshots.find(&snapshot).map_err(snapshot_error)?;
            if dry_run {
                let report = snapshots.restore(&found.id, None).map_err(snapshot_error)?;
                crate::outln!("{}", restored_text(&report.into_event(true), &followup));
                return Ok(exit::SUCCESS);
            }
            let session_id = found.mark.session.clone();
            let stored = store
                .session(&session_id)
                .map_err(|e| CliError::config(e.to_string()))?
                .is_some();
            let owner = LeaseOwner::this_process();
            if stored {
                store
                    .acquire_lease(&session_id, &owner)
                    .map_err(|e| match e {
                        StoreError::Leased { holder, .. } => CliError::tempfail(format!(
                            "session {session_id} is running ({holder}); restore from its \
                             shell with /restore {snapshot}, or once it has stopped"
                        )),
                        other => CliError::tempfail(other.to_string()),
                    })?;
            }
            let before = Mark {
                session: session_id.clone(),
                agent: "main".into(),
                turn: None,
                label: format!("before restoring {} (cadre restore apply)", &found.id[..12]),
            };
            let restored = snapshots.restore(&found.id, Some(&before));
            let event = restored.map(|report| (report.note(), report.into_event(false)));
            if stored {
                if let Ok((note, event)) = &event
                    && let Ok(json) = serde_json::to_string(event)
                {
                    // The session's transcript says what happened to its
                    // workspace, and its conversation tells the model.
                    let seq = store
                        .conversation(&session_id)
                        .map_or(0, |messages| messages.len() as i64);
                    let note: Vec<_> = note
                        .iter()
                        .map(|note| (seq, Arc::new(Message::user(note.clone()))))
                        .collect();
                    let _ = store.append(&session_id, &note, &[json], &[]);
                }
                let _ = store.release_lease(&session_id, &owner);
            }
            let (_, event) = event.map_err(snapshot_error)?;
            crate::outln!("{}", restored_text(&event, &followup));
            Ok(exit::SUCCESS)
        }
    }
}

fn snapshot_error(err: SnapshotError) -> CliError {
    match err {
        SnapshotError::NotFound(_) | SnapshotError::Ambiguous(_) => {
            CliError::usage(err.to_string())
        }
        SnapshotError::Git(_) | SnapshotError::Task(_) => CliError::internal(err.to_string()),
    }
}
