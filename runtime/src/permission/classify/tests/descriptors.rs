//! Writes through descriptor aliases (`/dev/stdout`, `/dev/fd/N`,
//! `/proc/self/fd/N`, …): read-only only while the descriptor still holds
//! what the command was given. Every spelling is tried with every way of
//! re-pointing the descriptor first.

use super::{RO, check};

/// Spellings of fd `{}` as bash hands them to the kernel.
const SPELLINGS: &[&str] = &[
    "/dev/fd/{}",
    "/proc/self/fd/{}",
    "/proc/thread-self/fd/{}",
    "//dev//fd/{}",
    "/dev/./fd/{}",
    "/dev/fd/../fd/{}",
    "/proc/self/../self/fd/{}",
    "'/dev/fd/{}'",
    "\"/proc/self/fd/\"{}",
];

/// The named aliases of fds 1 and 2.
fn spellings(fd: u32) -> Vec<String> {
    let mut out: Vec<String> = SPELLINGS
        .iter()
        .map(|s| s.replace("{}", &fd.to_string()))
        .collect();
    out.push(
        if fd == 1 {
            "/dev/stdout"
        } else {
            "/dev/stderr"
        }
        .to_string(),
    );
    out.push(
        if fd == 1 {
            "/dev/std\\out"
        } else {
            "/dev/'stderr'"
        }
        .to_string(),
    );
    out
}

const WRITES: &[&str] = &[">", ">>", ">|", "&>", "&>>", ">&"];

#[test]
fn an_alias_of_the_given_output_is_read_only() {
    let mut cases: Vec<(String, &str)> = Vec::new();
    for fd in [1, 2] {
        for alias in spellings(fd) {
            for op in WRITES {
                cases.push((format!("echo x {op}{alias}"), RO));
            }
            cases.push((format!("echo x {fd}>{alias}"), RO));
            // Copied from the other given output: still the call's own.
            cases.push((format!("echo x 2>&1 >{alias}"), RO));
            cases.push((format!("ls | grep x >{alias}"), RO));
        }
    }
    let cases: Vec<(&str, &str)> = cases.iter().map(|(c, w)| (c.as_str(), *w)).collect();
    check(&cases);
}

/// Ways to point fd `{}` at `F` (or elsewhere) before the alias is opened.
const REPOINTS: &[&str] = &[
    "{}<F",
    "{}< F",
    "{}<.git/config",
    "{}<>F",
    "{}>F",
    "3<F {}<&3",
    "3<F {}>&3",
    "{}<&0",
    "{}>&-",
];

const ALIAS_WRITE: &str = "writes to whatever it holds";

#[test]
fn an_alias_of_a_repointed_descriptor_writes_what_it_holds() {
    let mut cases: Vec<(String, String)> = Vec::new();
    for fd in [1, 2] {
        for alias in spellings(fd) {
            for repoint in REPOINTS {
                let repoint = repoint.replace("{}", &fd.to_string());
                // `{}>F` is refused for its own write first.
                let want = if repoint.contains("<>") {
                    "'<>' opens 'F' for writing".to_string()
                } else if repoint.ends_with(">F") {
                    "output redirection to 'F'".to_string()
                } else {
                    ALIAS_WRITE.to_string()
                };
                for op in [">", ">>", "&>"] {
                    cases.push((format!("printf x {repoint} {op}{alias}"), want.clone()));
                }
            }
            // `&>F` points both outputs at F.
            cases.push((format!("echo 0<F &>/dev/null >{alias}"), ALIAS_WRITE.into()));
        }
    }
    for alias in ["/dev/fd/3", "/proc/self/fd/3", "/dev/fd/0", "/dev/stdin"] {
        cases.push((format!("echo x 3<F >{alias}"), ALIAS_WRITE.into()));
        cases.push((format!("echo x >{alias}"), ALIAS_WRITE.into()));
    }
    for foreign in [
        "/proc/1/fd/1",
        "/proc/$$/fd/1",
        "/proc/$PPID/fd/1",
        "/dev/fd/$n",
    ] {
        cases.push((format!("echo x >{foreign}"), "output redirection to".into()));
    }
    let cases: Vec<(&str, &str)> = cases
        .iter()
        .map(|(c, w)| (c.as_str(), w.as_str()))
        .collect();
    check(&cases);
}

/// The descriptors an `exec` points persist, and `exec` is not read-only.
#[test]
fn exec_redirections_are_not_read_only() {
    check(&[
        (
            "exec 3<F; echo x >/dev/fd/3",
            "`exec` is not a known read-only program",
        ),
        (
            "exec 1<F; echo x >/dev/stdout",
            "`exec` is not a known read-only program",
        ),
    ]);
}
