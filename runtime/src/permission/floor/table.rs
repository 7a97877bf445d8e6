//! What the floor recognises: publish-like commands, detaching programs,
//! wrappers it looks through, and the markers it scans unparsed text for.

/// How a publish-like command is recognised after its program.
pub(super) enum Shape {
    /// These words lead the operands, options allowed before and between
    /// them (`git -C x push`, `docker image push`, `gh release create`).
    Leading(&'static [&'static str]),
    /// Any operand starts with one of these: build tools take a list of
    /// goals or tasks (`mvn clean deploy`, `gradle publishToMavenLocal`).
    AnyOperand(&'static [&'static str]),
}

/// Commands that publish, push or deploy: hard-blocked in every posture
/// (P4). Programs are compared by their last path component
/// (`/usr/bin/git`, `./gradlew`).
pub(super) static PUBLISH: &[(&str, Shape)] = &[
    ("git", Shape::Leading(&["push"])),
    ("git", Shape::Leading(&["send-email"])),
    ("git", Shape::Leading(&["svn", "dcommit"])),
    ("git", Shape::Leading(&["p4", "submit"])),
    ("hg", Shape::Leading(&["push"])),
    ("svn", Shape::Leading(&["commit"])),
    ("svn", Shape::Leading(&["ci"])),
    ("jj", Shape::Leading(&["git", "push"])),
    ("cargo", Shape::Leading(&["publish"])),
    ("cargo", Shape::Leading(&["yank"])),
    ("npm", Shape::Leading(&["publish"])),
    ("npm", Shape::Leading(&["unpublish"])),
    ("yarn", Shape::Leading(&["publish"])),
    ("yarn", Shape::Leading(&["npm", "publish"])),
    ("pnpm", Shape::Leading(&["publish"])),
    ("bun", Shape::Leading(&["publish"])),
    ("docker", Shape::Leading(&["push"])),
    ("docker", Shape::Leading(&["image", "push"])),
    ("docker", Shape::Leading(&["manifest", "push"])),
    ("podman", Shape::Leading(&["push"])),
    ("podman", Shape::Leading(&["image", "push"])),
    ("podman", Shape::Leading(&["manifest", "push"])),
    ("buildah", Shape::Leading(&["push"])),
    ("helm", Shape::Leading(&["push"])),
    ("twine", Shape::Leading(&["upload"])),
    ("poetry", Shape::Leading(&["publish"])),
    ("uv", Shape::Leading(&["publish"])),
    ("flit", Shape::Leading(&["publish"])),
    ("hatch", Shape::Leading(&["publish"])),
    ("pdm", Shape::Leading(&["publish"])),
    ("gem", Shape::Leading(&["push"])),
    ("dotnet", Shape::Leading(&["nuget", "push"])),
    ("nuget", Shape::Leading(&["push"])),
    ("pod", Shape::Leading(&["trunk", "push"])),
    ("mix", Shape::Leading(&["hex.publish"])),
    ("vsce", Shape::Leading(&["publish"])),
    ("ovsx", Shape::Leading(&["publish"])),
    ("gh", Shape::Leading(&["release", "create"])),
    ("gh", Shape::Leading(&["release", "upload"])),
    ("gh", Shape::Leading(&["pr", "merge"])),
    ("gh", Shape::Leading(&["pr", "create"])),
    ("glab", Shape::Leading(&["mr", "merge"])),
    ("glab", Shape::Leading(&["release", "create"])),
    ("fly", Shape::Leading(&["deploy"])),
    ("flyctl", Shape::Leading(&["deploy"])),
    ("firebase", Shape::Leading(&["deploy"])),
    ("netlify", Shape::Leading(&["deploy"])),
    ("vercel", Shape::Leading(&["deploy"])),
    ("mvn", Shape::AnyOperand(&["deploy"])),
    ("mvnw", Shape::AnyOperand(&["deploy"])),
    ("gradle", Shape::AnyOperand(&["publish"])),
    ("gradlew", Shape::AnyOperand(&["publish"])),
];

/// Programs that keep work running after the call ends (P4).
pub(super) const DETACHERS: &[&str] = &[
    "nohup",
    "setsid",
    "disown",
    "daemonize",
    "at",
    "batch",
    "systemd-run",
    "start-stop-daemon",
];

/// tmux commands that start or drive work in a server that outlives the
/// call; `new` and `new-session` only with `-d` (without it they need a
/// terminal and fail).
pub(super) const TMUX_DETACHED: &[&str] = &[
    "new-window",
    "neww",
    "split-window",
    "splitw",
    "respawn-pane",
    "respawnp",
    "respawn-window",
    "respawnw",
    "run-shell",
    "run",
    "send-keys",
    "send",
];

/// Programs that destroy a filesystem or stop the machine. `mkfs.*` is
/// matched by prefix.
pub(super) const MACHINE_WRECKERS: &[&str] = &[
    "mkfs", "mke2fs", "mkswap", "wipefs", "shutdown", "reboot", "halt", "poweroff",
];

/// `systemctl` verbs that stop or switch the machine.
pub(super) const SYSTEMCTL_WRECKERS: &[&str] = &[
    "poweroff",
    "reboot",
    "halt",
    "kexec",
    "suspend",
    "hibernate",
    "emergency",
    "rescue",
];

/// Where a wrapped command starts.
pub(super) enum Wraps {
    /// At any later word that is not an option: a wrapper's own options are
    /// not parsed, so none of them can hide the command (`sudo -u x cmd`,
    /// `timeout 5 cmd`, `env X=1 cmd`).
    AnyLaterWord,
    /// Right after one of these words (`find . -exec cmd {} \;`).
    After(&'static [&'static str]),
}

/// Programs that run a command given in their arguments.
pub(super) static WRAPPERS: &[(&str, Wraps)] = &[
    ("sudo", Wraps::AnyLaterWord),
    ("doas", Wraps::AnyLaterWord),
    ("env", Wraps::AnyLaterWord),
    ("nohup", Wraps::AnyLaterWord),
    ("setsid", Wraps::AnyLaterWord),
    ("time", Wraps::AnyLaterWord),
    ("nice", Wraps::AnyLaterWord),
    ("ionice", Wraps::AnyLaterWord),
    ("timeout", Wraps::AnyLaterWord),
    ("stdbuf", Wraps::AnyLaterWord),
    ("xargs", Wraps::AnyLaterWord),
    ("parallel", Wraps::AnyLaterWord),
    ("command", Wraps::AnyLaterWord),
    ("builtin", Wraps::AnyLaterWord),
    ("exec", Wraps::AnyLaterWord),
    ("eval", Wraps::AnyLaterWord),
    ("watch", Wraps::AnyLaterWord),
    ("flock", Wraps::AnyLaterWord),
    ("chronic", Wraps::AnyLaterWord),
    ("unbuffer", Wraps::AnyLaterWord),
    ("caffeinate", Wraps::AnyLaterWord),
    ("fakeroot", Wraps::AnyLaterWord),
    ("chroot", Wraps::AnyLaterWord),
    ("runuser", Wraps::AnyLaterWord),
    ("strace", Wraps::AnyLaterWord),
    ("ltrace", Wraps::AnyLaterWord),
    ("torsocks", Wraps::AnyLaterWord),
    ("proxychains", Wraps::AnyLaterWord),
    ("ssh", Wraps::AnyLaterWord),
    ("npx", Wraps::AnyLaterWord),
    ("daemonize", Wraps::AnyLaterWord),
    ("systemd-run", Wraps::AnyLaterWord),
    (
        "find",
        Wraps::After(&["-exec", "-execdir", "-ok", "-okdir"]),
    ),
];

/// Where a program finds a command line another shell runs.
pub(super) enum Strings {
    /// The word after `-c` or a short-option cluster holding `c` (`-lc`).
    AfterC,
    /// The value of one of these options (`su -c '…'`, `env -S '…'`).
    OptionValue(&'static [&'static str]),
    /// Any later word: the words are joined into a command line
    /// (`eval '…'`, `ssh host '…'`, `watch '…'`). Unquoted words are also
    /// wrapped commands ([`WRAPPERS`]), so only words with blanks or shell
    /// operators need parsing.
    EveryWord,
}

/// Programs that hand a string to a shell: each such string is parsed and
/// checked like the call's own command line. A shell given neither `-c` nor
/// a script reads its commands from its input, which the floor cannot see.
pub(super) static RUNS_STRINGS: &[(&str, Strings)] = &[
    ("sh", Strings::AfterC),
    ("bash", Strings::AfterC),
    ("zsh", Strings::AfterC),
    ("dash", Strings::AfterC),
    ("ksh", Strings::AfterC),
    ("mksh", Strings::AfterC),
    ("fish", Strings::AfterC),
    ("busybox", Strings::AfterC),
    ("su", Strings::OptionValue(&["-c", "--command"])),
    ("runuser", Strings::OptionValue(&["-c", "--command"])),
    ("script", Strings::OptionValue(&["-c", "--command"])),
    ("flock", Strings::OptionValue(&["-c", "--command"])),
    ("env", Strings::OptionValue(&["-S", "--split-string"])),
    ("eval", Strings::EveryWord),
    ("watch", Strings::EveryWord),
    ("ssh", Strings::EveryWord),
    ("parallel", Strings::EveryWord),
];

/// Shells that read commands from their input when given no `-c` and no
/// script.
pub(super) const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh", "fish"];

/// Programs that reach the network, reported to the reviewer.
pub(super) const NETWORK: &[&str] = &[
    "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "telnet", "ftp", "socat",
];

/// Whole words that block a command line that does not parse: the floor
/// cannot see its structure, so it fails closed on anything that could
/// detach, publish or wreck the machine.
pub(super) const UNPARSED_MARKERS: &[&str] = &[
    "nohup",
    "setsid",
    "disown",
    "daemonize",
    "crontab",
    "systemd-run",
    "publish",
    "unpublish",
    "push",
    "upload",
    "deploy",
    "dcommit",
    "mkfs",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
];

/// Devices that writing to harms nothing.
pub(super) const HARMLESS_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
];
