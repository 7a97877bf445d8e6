//! Command lines from a grammar: known programs with options drawn from
//! their real option sets (allowed and not), commands that change the
//! workspace, every kind of quoting and expansion, braces, arithmetic,
//! redirections, assignments, compound commands and here-documents.
//!
//! Every path a line names is relative and stays inside the sandbox's
//! workspace or its parent (the sandbox root), so even a line the
//! classifier wrongly accepts can only change the sandbox.

mod extra;

use super::super::options::Spec;
use super::super::table::{PROGRAMS, Syntax};

/// A small seeded generator (xorshift64*), so a seed reproduces a run.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// One of `items`.
    fn one(&mut self, items: &[&'static str]) -> &'static str {
        items[self.below(items.len())]
    }
}

/// Operands: files of the sandbox, names that do not exist yet, refs.
const OPERANDS: &[&str] = &[
    "README.md",
    "src",
    "src/lib.rs",
    "sub",
    "sub/a.txt",
    "data.json",
    "link",
    ".",
    "-",
    "F",
    "NAME",
    "HEAD",
    "HEAD~1",
    "main",
    "feature",
    "v1",
    "x",
    "--",
    "1",
    "+%s",
    "*.rs",
    "../d",
    "a}b",
    "}\"'",
];

/// Values for options that take one.
const VALUES: &[&str] = &[
    "1",
    "2",
    "5",
    "x",
    "F",
    "%h",
    "%G?",
    "README.md",
    "-o",
    "--output=F",
    "HEAD",
    "refname",
    ",",
    "always",
    "C",
    "sh",
    "touch F",
];

/// Real options a program accepts that its allow-list leaves out (they
/// write, run something, or negate or abbreviate a listed one), by
/// program; each is tried as often as a listed one.
const EXTRA: &[(&str, &[&str])] = &[
    (
        "sort",
        &[
            "-o",
            "--output=",
            "--compress-program=",
            "-T",
            "--out=",
            "-mo",
        ],
    ),
    ("uniq", &["--help"]),
    ("date", &["-s", "--set=", "--se"]),
    ("file", &["-C", "--compile", "-p", "--preserve-date"]),
    ("tree", &["-o", "-R", "-H"]),
    ("rg", &["--pre=", "--pre-glob=", "--hostname-bin="]),
    ("ls", &["--hyper", "--no-color", "--colo"]),
    ("cat", &["--number-n"]),
    ("grep", &["--colo", "--no-filename-x"]),
    ("head", &["--line"]),
    ("diff", &["-l", "--paginate"]),
];

/// Commands that change the workspace, the repository or the shell.
const MARKERS: &[&str] = &[
    "touch F",
    "touch MARK",
    "touch -d 2000-01-01 README.md",
    "rm README.md",
    "rm -rf ../d",
    "rm -f src/lib.rs",
    "mkdir D",
    "cp README.md F",
    "mv data.json F",
    "ln -s x F",
    "chmod 600 README.md",
    "sed -i s/a/b/ README.md",
    "tee F",
    "truncate -s0 README.md",
    "install -m 644 README.md F",
    "dd of=F",
    "xargs touch",
    "eval touch F",
    "sort -o F README.md",
    "sort -mo F README.md",
    "find . -fprint F",
    "find sub -delete",
    "find . -name a.txt -exec rm {} ;",
    "uniq README.md F",
    "printf -v PATH x",
    "printf -v x F",
    "git branch NAME",
    "git branch -v NAME",
    "git branch --list --no-list NAME",
    "git branch -v --no-verbose NAME",
    "git branch -m feature NAME",
    "git branch -D feature",
    "git tag NAME",
    "git tag -n5 NAME",
    "git tag -d v1",
    "git checkout -b NAME",
    "git switch -c NAME",
    "git commit --allow-empty -m x",
    "git config x.y z",
    "git stash",
    "git reset --soft HEAD~1",
    "git update-ref refs/heads/NAME HEAD",
    "git log --output=F",
    "git diff --output=F",
    "git -c core.pager=touch\\ F log",
    "git notes add -m x",
];

/// Lines that set up or use a variable whose value runs a command when
/// evaluated as arithmetic or as a prompt.
const HOSTILE: &[&str] = &[
    "y='a[$(touch F)]'; echo $((y))",
    "y='a[$(touch F)]'; echo $[y]",
    "y='a[$(touch F)]'; [[ $y -eq 1 ]]",
    "y='a[$(touch F)]'; let y",
    "y='a[$(touch F)]'; declare -i x=y",
    "y='$(touch F)'; echo ${y@P}",
    "x='a[$(touch F)]'; printf -v \"$x\" 1",
    "LANG=${x:-$(touch F)} ls",
    "echo ${x:-$(rm -rf ../d)}",
    "echo \"${x:-`touch F`}\"",
    "a[$(touch F)]=1 ls",
    "cat <<EOF\n$(touch F)\nEOF",
    "cat <<'EOF'\n$(touch F)\nEOF",
    "ls() { touch F; }; ls",
    "(touch F)",
    "{ touch F; }",
    "if true; then touch F; fi",
    "for i in F; do touch $i; done",
    "case x in x) touch F;; esac",
    "ls # ; touch F",
    "ls \\\n; touch F",
    "alias ls='touch F'; ls",
    "trap 'touch F' EXIT",
    "set -x; PS4='$(touch F)' ls",
    "export PATH=.; ls",
    "read x < README.md",
    "mapfile x < README.md",
    ". /dev/null",
    "source /dev/null",
    "exec ls",
    "{x}>F ls",
    "ls >F",
    "ls >|F",
    "ls &>F",
    "ls 2>>F",
    "ls <>F",
    "ls >&F",
];

/// Assignments before a command.
const ASSIGNMENTS: &[&str] = &[
    "LANG=C",
    "LC_ALL=C.UTF-8",
    "TZ=UTC",
    "NO_COLOR=1",
    "COLUMNS=80",
    "FOO=1",
    "PATH=.",
    "GIT_PAGER='touch F'",
    "GIT_EXTERNAL_DIFF='touch F'",
    "PS4='$(touch F)'",
    "LANG=${x:-C}",
    "LC_ALL=$(touch F)",
    "LANG+=x",
    "LC_ALL[0]=C",
];

/// Redirections after a command.
const REDIRECTS: &[&str] = &[
    "2>/dev/null",
    "2>&1",
    ">/dev/null",
    "< README.md",
    "<<< 'a b'",
    ">&2",
    "2>&-",
    "> /dev/stderr",
    "> F",
    ">> F",
    "&> F",
    "< $x",
    "> ${x:-F}",
];

/// One command line.
pub(super) fn line(rng: &mut Rng) -> String {
    if rng.chance(6) {
        return rng.one(HOSTILE).to_string();
    }
    if rng.chance(12) {
        return soup(rng);
    }
    let count = 1 + rng.below(3).min(rng.below(3));
    let mut out = String::new();
    for i in 0..count {
        if i > 0 {
            let joins = [" | ", " && ", " || ", "; ", "\n", " |& ", " & "];
            let background = usize::from(rng.chance(5));
            out.push_str(rng.one(&joins[..6 + background]));
        }
        out.push_str(&command(rng));
    }
    if rng.chance(3) {
        out.push_str(" # touch F");
    }
    out
}

fn command(rng: &mut Rng) -> String {
    let mut words: Vec<String> = Vec::new();
    if rng.chance(12) {
        words.push(rng.one(ASSIGNMENTS).to_string());
    }
    let roll = rng.below(100);
    if roll < 18 {
        let marker = rng.one(MARKERS);
        words.extend(marker.split(' ').map(|w| shape(rng, w)));
    } else if roll < 22 {
        words.push(shaped(rng, &["cd", "pwd", "true", "false", "echo", "type"]));
        words.push(shaped(rng, &["sub", "src", ".", "-n", "-e", "ls", "x"]));
    } else {
        let program = rng.pick(PROGRAMS);
        words.push(shape(rng, program.name));
        match &program.syntax {
            Syntax::Options(spec) => options(rng, program.name, spec, &mut words),
            Syntax::Git => git(rng, &mut words),
            Syntax::Find => find(rng, &mut words),
            Syntax::Printf => {
                if rng.chance(20) {
                    words.push(shape(rng, "-v"));
                    words.push("PATH".into());
                }
                words.push(shaped(rng, &["%s\\n", "%d", "%q", "x"]));
                operands(rng, &mut words);
            }
            Syntax::Echo | Syntax::Ignored | Syntax::Bare => operands(rng, &mut words),
            Syntax::Sed => extra::sed(rng, &mut words),
            Syntax::Expression => extra::expr(rng, &mut words),
            Syntax::Builtin => extra::builtin(rng, &mut words),
        }
    }
    if rng.chance(15) {
        words.push(rng.one(REDIRECTS).to_string());
    }
    words.join(" ")
}

/// Options of a getopt program: from its allow-list and its [`EXTRA`]
/// ones, alone, clustered, abbreviated or negated, then operands.
fn options(rng: &mut Rng, program: &str, spec: &Spec, words: &mut Vec<String>) {
    // What only waits (`sleep 5`, `tail -f`) is left out: it would only
    // reach the deadline.
    if program == "sleep" {
        words.push(shape(rng, "0"));
        return;
    }
    let extra = EXTRA
        .iter()
        .find(|(p, _)| *p == program)
        .map_or(&[][..], |(_, e)| *e);
    for _ in 0..rng.below(4) {
        let option = if !extra.is_empty() && rng.chance(25) {
            rng.one(extra).to_string()
        } else {
            listed_option(rng, spec)
        };
        if program == "tail"
            && ["f", "F", "-follow", "-retry", "-pid"]
                .iter()
                .any(|f| option.contains(f))
        {
            continue;
        }
        words.push(valued(rng, &option));
    }
    operands(rng, words);
}

/// A listed option, sometimes spelled as getopt would also accept.
fn listed_option(rng: &mut Rng, spec: &Spec) -> String {
    let shorts: Vec<char> = spec.short.chars().filter(|c| *c != ':').collect();
    let longs: Vec<&str> = std::iter::once(spec.long)
        .chain(spec.more_long.iter().copied())
        .flat_map(str::split_ascii_whitespace)
        .collect();
    if !shorts.is_empty() && (longs.is_empty() || rng.chance(50)) {
        let mut cluster = String::from("-");
        for _ in 0..=rng.below(3) {
            cluster.push(*rng.pick(&shorts));
        }
        return cluster;
    }
    if longs.is_empty() {
        return "--help".into();
    }
    let long = rng.pick(&longs).trim_end_matches(['=', '[', ']']);
    match rng.below(10) {
        0 => format!("--no-{long}"),
        1 if long.len() > 3 => format!("--{}", &long[..long.len() - 1]),
        2 => format!("--{long}="),
        _ => format!("--{long}"),
    }
}

/// An option, with a value attached or following when it ends in `=`.
fn valued(rng: &mut Rng, option: &str) -> String {
    let value = rng.one(VALUES);
    if option.ends_with('=') {
        return format!("{option}{}", shape(rng, value));
    }
    if rng.chance(30) {
        format!("{} {}", shape(rng, option), shape(rng, value))
    } else {
        shape(rng, option)
    }
}

fn operands(rng: &mut Rng, words: &mut Vec<String>) {
    for _ in 0..rng.below(4) {
        words.push(shaped(rng, OPERANDS));
    }
}

fn git(rng: &mut Rng, words: &mut Vec<String>) {
    if rng.chance(20) {
        return extra::git_verbs(rng, words);
    }
    if rng.chance(10) {
        words.push(
            rng.one(&["-C .", "--no-pager", "-P", "-c x=y", "--git-dir=.git", "-p"])
                .to_string(),
        );
    }
    let sub = rng.one(&[
        "status",
        "diff",
        "log",
        "show",
        "branch",
        "tag",
        "blame",
        "ls-files",
        "rev-parse",
        "remote",
        "grep",
        "describe",
        "for-each-ref",
        "cat-file",
        "shortlog",
        "rev-list",
        "merge-base",
        "ls-tree",
    ]);
    words.push(shape(rng, sub));
    let options: &[&str] = match sub {
        "branch" => &[
            "-l",
            "--list",
            "-a",
            "-v",
            "-vv",
            "--no-list",
            "--no-verbose",
            "--contains",
            "--sort=",
            "--format=",
            "-d",
            "-D",
            "-m",
            "-c",
            "-f",
            "--force",
            "-u",
            "--edit-description",
            "--show-current",
            "--abbrev",
            "-t",
        ],
        "tag" => &[
            "-l",
            "--list",
            "-n5",
            "-n",
            "-d",
            "-a",
            "-m",
            "-f",
            "--contains",
            "--no-list",
        ],
        "log" | "show" | "shortlog" | "rev-list" => &[
            "--oneline",
            "-n",
            "-5",
            "--format=",
            "--pretty=",
            "--stat",
            "--output=",
            "--ext-diff",
            "--textconv",
            "--show-signature",
            "-p",
            "--graph",
            "--all",
            "--no-walk",
            "--outp=",
            "--grep",
            "--decorate",
            "--follow",
            "-S",
            "--no-such",
        ],
        "diff" => &[
            "--stat",
            "--cached",
            "--output=",
            "--ext-diff",
            "--textconv",
            "--no-index",
            "-U3",
            "--word-diff=",
            "--name-only",
            "-R",
            "--no-ext-diff",
        ],
        "grep" => &[
            "-n",
            "-e",
            "-O",
            "--open-files-in-pager=",
            "-i",
            "-l",
            "--cached",
        ],
        "cat-file" => &["-p", "-t", "--textconv", "--filters", "--batch"],
        _ => &["-v", "--help", "-q", "--all", "--no-such", "-z"],
    };
    for _ in 0..rng.below(4) {
        let option = rng.one(options).to_string();
        words.push(valued(rng, &option));
    }
    operands(rng, words);
}

fn find(rng: &mut Rng, words: &mut Vec<String>) {
    words.push(shaped(rng, &[".", "sub", "src"]));
    let primaries: &[&str] = &[
        "-name a.txt",
        "-type f",
        "-print",
        "-maxdepth 1",
        "-newer README.md",
        "-printf %p\\n",
        "-name -delete",
        "-delete",
        "-fprint F",
        "-fprintf F %p",
        "-fls F",
        "-exec touch F ;",
        "-execdir touch F ;",
        "-ok touch F ;",
        "-o",
        "!",
        "-newermt 2000-01-01",
    ];
    for _ in 0..rng.below(4) {
        let primary = rng.one(primaries);
        words.extend(primary.split(' ').map(|w| shape(rng, w)));
    }
}

/// `text` written in one of the many ways bash reads (or misreads) it.
pub(super) fn shape(rng: &mut Rng, text: &str) -> String {
    let plain_ok = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=,+@%-".contains(c));
    match rng.below(100) {
        0..=44 if plain_ok => text.to_string(),
        0..=54 => single(text),
        55..=62 => double(text),
        63..=67 => {
            // Split in two, each half quoted its own way.
            let at = text
                .char_indices()
                .nth(rng.below(text.chars().count().max(1)))
                .map_or(0, |(i, _)| i);
            format!("{}{}", single(&text[..at]), double(&text[at..]))
        }
        68..=71 => text
            .chars()
            .map(|c| {
                if rng.chance(30) && c != '\n' {
                    format!("\\{c}")
                } else {
                    c.to_string()
                }
            })
            .collect(),
        72..=75 => format!("$\"{}\"", text.replace(['"', '\\', '$', '`'], "")),
        76..=79 => {
            let escaped: String = text
                .chars()
                .map(|c| match (c, rng.below(3)) {
                    ('\'' | '\\', _) => format!("\\{c}"),
                    (c, 0) if c.is_ascii() => format!("\\x{:02x}", c as u32),
                    (c, 1) if c.is_ascii() => format!("\\{:03o}", c as u32),
                    (c, _) => c.to_string(),
                })
                .collect();
            format!("$'{escaped}'")
        }
        80..=83 => format!("{{\"{}\",F}}", text.replace(['"', '\\', '$', '`'], "")),
        84..=86 => format!("{{{},}}", single(text)),
        87..=89 if plain_ok => format!("{{{text},x}}"),
        90..=91 => format!("${{x:-{}}}", single(text)),
        92 => format!(
            "\"${{x:+{}}}\"",
            text.replace(['"', '\\', '$', '`', '}'], "")
        ),
        93 if text.contains('}') => format!("\"${{x:-'{}'}}\"", text.replace('\'', "")),
        93 => format!("$(echo {})", single(text)),
        94 => format!("{}$((0))", single(text)),
        95 if plain_ok => format!("{text}*"),
        96 if plain_ok => format!("~{text}"),
        _ => single(text),
    }
}

/// One of `items`, shaped.
fn shaped(rng: &mut Rng, items: &[&'static str]) -> String {
    let text = rng.one(items);
    shape(rng, text)
}

fn single(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

fn double(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A random string over characters that mean something to bash, behind a
/// program that exists nowhere: mostly for the argv oracle.
fn soup(rng: &mut Rng) -> String {
    const ALPHABET: &[&str] = &[
        "a", "b", "-", "=", ",", "{", "}", "~", "*", "?", "[", "]", "#", "$", "!", "%", "\\", "'",
        "\"", " ", " ", " ", ";", "|", "&", "<", ">", "(", ")", "\n", "\t", "é", "中", "x", ".",
        "/", ":", "@", "+", "^", "`", "$'", "$\"", "${", "$(", "((", "2>", "\\\n",
    ];
    let mut out = String::from(rng.one(&["X ", "cat ", "ls ", "echo ", "git log ", "sort "]));
    for _ in 0..rng.below(14) {
        out.push_str(rng.one(ALPHABET));
    }
    out
}
