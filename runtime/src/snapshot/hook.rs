//! The tool layer's snapshot hook for one turn.

use std::sync::Arc;

use tokio::sync::OnceCell;

use super::{Mark, SnapshotError, Snapshots};
use crate::tool::{SnapshotFuture, Snapshotter};

/// Records the workspace once per turn, before its first call that may
/// change files. Built by the agent for each turn; a failed snapshot is
/// tried again at the next such call.
#[derive(Debug)]
pub struct TurnSnapshotter {
    snapshots: Arc<Snapshots>,
    mark: Mark,
    /// The snapshot's id once taken.
    taken: OnceCell<String>,
}

impl TurnSnapshotter {
    /// The hook for the turn `mark` names.
    pub fn new(snapshots: Arc<Snapshots>, mark: Mark) -> Self {
        Self {
            snapshots,
            mark,
            taken: OnceCell::new(),
        }
    }

    /// The snapshot taken in this turn, if any yet.
    pub fn taken(&self) -> Option<&str> {
        self.taken.get().map(String::as_str)
    }
}

impl Snapshotter for TurnSnapshotter {
    fn before_change(&self) -> SnapshotFuture<'_> {
        Box::pin(async move {
            self.taken
                .get_or_try_init(|| async {
                    let (snapshots, mark) = (self.snapshots.clone(), self.mark.clone());
                    let taken = tokio::task::spawn_blocking(move || snapshots.take(&mark))
                        .await
                        .map_err(|e| SnapshotError::Task(e.to_string()))??;
                    tracing::debug!(id = %taken.id, new = taken.new, "workspace snapshot");
                    Ok::<_, SnapshotError>(taken.id)
                })
                .await
                .map(|_| ())
        })
    }
}
