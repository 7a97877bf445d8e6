//! An offline command's hold on a session: the lease a running session
//! keeps, taken for the length of one write, so `cadre plan …` or
//! `cadre goal pause` cannot race a process that runs the session (which
//! would answer the same plan, or later overwrite the goal).

use cadre_runtime::store::{LeaseOwner, Store, StoreError};

use crate::exit::CliError;

/// Runs `write` holding `session_id`'s lease, and gives the lease up after
/// it whatever it returns. While another process runs the session the write
/// does not start: exit 75, naming the session and the holder, and `there`
/// saying what to do instead in the process that runs it.
pub fn with_lease<T>(
    store: &mut Store,
    session_id: &str,
    there: &str,
    write: impl FnOnce(&mut Store) -> Result<T, CliError>,
) -> Result<T, CliError> {
    let owner = LeaseOwner::this_process();
    store
        .acquire_lease(session_id, &owner)
        .map_err(|e| match e {
            StoreError::Leased { holder, .. } => CliError::tempfail(format!(
                "session {session_id} is running in another process ({holder}); \
                 {there}, or here once it has stopped"
            )),
            other if other.is_retryable() => CliError::tempfail(other.to_string()),
            other => CliError::internal(other.to_string()),
        })?;
    let written = write(store);
    // A release that fails leaves a lease no live process holds: the next
    // process on this machine takes it over at once.
    let _ = store.release_lease(session_id, &owner);
    written
}
