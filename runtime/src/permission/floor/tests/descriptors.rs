//! The floor reads writes through descriptor aliases as writes to the file
//! the descriptor holds, and names what it cannot place.

use super::check;

#[test]
fn a_write_through_an_alias_is_a_write_to_what_the_descriptor_holds() {
    check(&[
        ("echo x >/dev/stdout", "safe: classified read-only"),
        ("echo x >/dev/fd/2", "safe: classified read-only"),
        (
            "printf x 1<notes.txt >/dev/stdout",
            "unproven: redirects output to: notes.txt (through '/dev/stdout')",
        ),
        (
            "printf x 2<notes.txt 2>/proc/self/fd/2",
            "unproven: redirects output to: notes.txt (through '/proc/self/fd/2')",
        ),
        (
            "exec 3<notes.txt; echo x >/dev/fd/3",
            "unproven: redirects output to: notes.txt (through '/dev/fd/3')",
        ),
        (
            "exec 3<.git/config; echo x >/dev/fd/3",
            "blocked: inside a .git directory",
        ),
        (
            "printf x 1<.git/config >/dev/stdout",
            "blocked: inside a .git directory",
        ),
        (
            "printf x 3<.git/config 1>&3 >>/dev/stdout",
            "blocked: inside a .git directory",
        ),
        (
            "echo x | tee /dev/stdout 1<.git/config",
            "blocked: inside a .git directory",
        ),
        (
            "dd if=x of=/dev/stdout 1<.git/hooks/pre-commit",
            "blocked: inside a .git directory",
        ),
        (
            "sed -n 'w /dev/fd/4' x 4<.git/config",
            "blocked: inside a .git directory",
        ),
        ("echo x >/dev/fd/5", "unplaced: it writes '/dev/fd/5'"),
        ("echo x >/proc/1/fd/1", "unplaced: it writes '/proc/1/fd/1'"),
        ("echo x | tee /dev/fd/7", "unplaced: it writes '/dev/fd/7'"),
        ("echo x 1>&- >/dev/stdout", "unproven: not proven read-only"),
    ]);
}

#[test]
fn a_write_target_known_only_when_it_runs_is_unplaced() {
    check(&[
        (
            "d=.gi; echo x > ${d}t/hooks/pre-commit",
            "unplaced: it writes '${d}t/hooks/pre-commit' (a variable)",
        ),
        (
            "tee \"$(printf '.%sdre' ca)/x\"",
            "unplaced: it writes '$(…)/x' as an operand of `tee` (a command substitution)",
        ),
        (
            "echo x > $'\\x2e'cadre/config.toml",
            "unplaced: it writes '.cadre/config.toml' (ANSI-C quoting",
        ),
        ("cp a ${x:-b}", "unplaced: as an operand of `cp`"),
        (
            "echo x > ~-/y",
            "unplaced: a tilde expansion other than the home",
        ),
        (
            "echo x > $HOME/notes",
            "unproven: redirects output to: $HOME/notes",
        ),
        ("echo x > out.txt", "unproven: redirects output to: out.txt"),
        ("cat $F | grep x", "unproven: not proven read-only"),
    ]);
}
