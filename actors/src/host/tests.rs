use std::io;

use super::HostError;
use crate::kernel::StartError;

#[test]
fn host_errors_read_as_the_strings_they_replaced() {
    let check = |err: HostError, text: &str| assert_eq!(err.to_string(), text, "{err:?}");
    check(
        HostError::UnknownBuiltin("rm_rf".into()),
        "there is no built-in tool \"rm_rf\"",
    );
    check(
        HostError::Workspace {
            path: "/nope".into(),
            source: io::Error::new(io::ErrorKind::NotFound, "gone"),
        },
        "workspace /nope: gone",
    );
    check(
        HostError::NoSession("no session id starts with 'x'".into()),
        "no session id starts with 'x'",
    );
    check(
        HostError::StoreThread(io::Error::other("no threads")),
        "the session could not start: the store's thread could not start: no threads",
    );
    check(
        HostError::from(StartError::Actor("boom".into())),
        "the session could not start: the agent could not start: boom",
    );
}
