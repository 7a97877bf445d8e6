//! Paths the line builds when it runs, and descriptor aliases, decided
//! end to end: the bash tool's classification, the protected paths, the
//! floor and every posture, with and without rules that allow everything.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::{POSTURES, ROOT, builtin, roots, rules};
use crate::permission::call::{Call, RealPaths};
use crate::permission::classify::classify_command;
use crate::permission::rules::RuleSet;
use crate::permission::{Evaluation, Policy, Posture, Verdict, evaluate};

/// What `evaluate` comes to for a `bash` call classified as the tool does.
fn decide(command: &str, posture: Posture, interactive: bool, rules: &RuleSet) -> String {
    let protected = roots();
    let policy = Policy {
        posture,
        rules,
        interactive,
        plan_file: None,
        protected: &protected,
    };
    let def = builtin("bash");
    let args = json!({ "command": command });
    let real = RealPaths::new();
    let safety = classify_command(command).safety;
    let call = Call::new(def, &args, safety, std::path::Path::new(ROOT)).with_real_paths(&real);
    match evaluate(&policy, &call) {
        Evaluation::Decided(d) => format!(
            "{} by {}",
            match d.verdict {
                Verdict::Allow => "allow",
                Verdict::Deny => "deny",
            },
            d.layer.label()
        ),
        Evaluation::AskPerson { .. } => "ask".into(),
        Evaluation::Review { .. } => "review".into(),
    }
}

/// Ways to write the path `{}`: redirections and writing programs.
const ROUTES: &[&str] = &[
    "echo x > {}",
    "printf x >> {}",
    "echo x &> {}",
    "echo x >| {}",
    "echo x | tee {}",
    "echo x | tee -a {}",
    "cp /tmp/x {}",
    "mv /tmp/x {}",
    "dd if=/tmp/x of={}",
    "install /tmp/x {}",
    "sudo tee {} < /tmp/x",
    "ln -sf /tmp/x {}",
];

/// Spellings of `.git/hooks/pre-commit` and `.cadre/config.local.toml`
/// that only exist once the line runs, each with what it needs set first.
const BUILT: &[(&str, &str)] = &[
    ("d=.gi; ", "${d}t/hooks/pre-commit"),
    ("d=.gi; ", "\"${d}t\"/hooks/pre-commit"),
    ("d=.gi; ", "\"$d\"t/hooks/pre-commit"),
    ("d=.gitx; ", "${d:0:4}/hooks/pre-commit"),
    ("d=.gix; ", "${d/x/t}/hooks/pre-commit"),
    ("d=.gix; ", "${d%x}t/hooks/pre-commit"),
    ("", "${d:-.git}/hooks/pre-commit"),
    ("", "\"$(printf '.%sdre' ca)\"/config.local.toml"),
    ("", "$(echo .git)/hooks/pre-commit"),
    ("", "`echo .cadre`/config.local.toml"),
    ("", "$'\\x2e'git/hooks/pre-commit"),
    ("", "$'\\056cadre'/config.local.toml"),
    ("", "$\".git\"/hooks/pre-commit"),
    ("", "$((0)).git/hooks/pre-commit"),
    ("", ".gi?/hooks/pre-commit"),
    ("", ".[g]it/hooks/pre-commit"),
    ("", ".ca*/config.local.toml"),
    ("", ".{g,x}it/hooks/pre-commit"),
    ("", "{.git,x}/hooks/pre-commit"),
    ("", "{x,.cadre}/config.local.toml"),
    ("", "\".\"{git,x}/hooks/pre-commit"),
    ("X=.git; ", "$X/hooks/pre-commit"),
    ("", "$GIT_DIR/hooks/pre-commit"),
    ("", "~+/.git/hooks/pre-commit"),
];

#[test]
fn a_write_target_built_when_the_line_runs_is_never_allowed_unreviewed() {
    let rule_sets = [rules(&[]), rules(&["bash", "*"])];
    let mut wrong = Vec::new();
    let mut cases = 0;
    for (setup, target) in BUILT {
        for route in ROUTES {
            let command = format!("{setup}{}", route.replace("{}", target));
            for posture in POSTURES {
                for interactive in [true, false] {
                    for set in &rule_sets {
                        cases += 1;
                        let got = decide(&command, posture, interactive, set);
                        let fine = match got.as_str() {
                            "deny by deterministic floor" => true,
                            // A person or the guardian sees it.
                            "ask" => posture == Posture::Suggest,
                            "review" => posture == Posture::Auto,
                            "deny by posture" => posture != Posture::Bypass,
                            _ => false,
                        };
                        if !fine {
                            wrong.push(format!("`{command}` {posture} {interactive}: {got}"));
                        }
                    }
                }
            }
        }
    }
    assert_eq!(wrong, Vec::<String>::new(), "of {cases} cases");
    assert!(cases > 3000);
}

/// A placed target outside the protected paths is an ordinary write.
#[test]
fn a_placed_write_is_decided_by_the_posture_as_before() {
    let allow_all = rules(&["bash"]);
    let cases = [
        ("echo x > out.txt", Posture::Bypass, "allow by posture"),
        (
            "d=.gi; echo x > out.txt",
            Posture::Bypass,
            "allow by posture",
        ),
        ("echo x | tee out.txt", Posture::Bypass, "allow by posture"),
        ("echo x > {a,b}.txt", Posture::Bypass, "allow by posture"),
        ("echo x > out.txt", Posture::Suggest, "ask"),
    ];
    let got: Vec<(&str, String)> = cases
        .iter()
        .map(|(c, p, _)| (*c, decide(c, *p, true, &RuleSet::new())))
        .collect();
    let want: Vec<(&str, String)> = cases.iter().map(|(c, _, w)| (*c, w.to_string())).collect();
    assert_eq!(got, want);
    assert_eq!(
        decide("echo x > out.txt", Posture::Suggest, true, &allow_all),
        "allow by rule"
    );
    assert_eq!(
        decide("echo x > \"$OUT\"", Posture::Suggest, true, &allow_all),
        "ask"
    );
}

/// Ways to point a descriptor at `{}` before an alias of it is written.
const ALIASED: &[&str] = &[
    "printf x 1<{} >/dev/stdout",
    "printf x 1<{} >>/dev/stdout",
    "printf x 1<{} &>/dev/stdout",
    "printf x 2<{} 2>/dev/stderr",
    "printf x 1<{} >/dev/fd/1",
    "printf x 1<{} >/proc/self/fd/1",
    "printf x 1<{} >/proc/thread-self/fd/1",
    "printf x 1<{} >/proc/$$/fd/1",
    "printf x 1<{} >//dev/./stdout",
    "printf x 3<{} >/dev/fd/3",
    "printf x 3<{} 1>&3 >/dev/stdout",
    "exec 3<{}; echo x >/dev/fd/3",
    "exec 1<{}; echo x >/dev/stdout",
    "echo x | tee /dev/stdout 1<{}",
    "cp /tmp/x /dev/fd/3 3<{}",
    "dd if=/tmp/x of=/dev/stdout 1<{}",
    "sed -n 'w /dev/stdout' /tmp/x 1<{}",
    "sed 's/a/b/w /dev/fd/3' /tmp/x 3<{}",
];

#[test]
fn a_write_through_a_descriptor_alias_writes_what_it_holds_in_every_posture() {
    let allow_all = rules(&["bash", "*"]);
    let mut wrong = Vec::new();
    for route in ALIASED {
        for path in [
            ".git/config",
            ".cadre/config.local.toml",
            ".git/hooks/pre-commit",
        ] {
            let command = route.replace("{}", path);
            for posture in POSTURES {
                for set in [&RuleSet::new(), &allow_all] {
                    let got = decide(&command, posture, true, set);
                    if got != "deny by deterministic floor" {
                        wrong.push(format!("`{command}` {posture}: {got}"));
                    }
                }
            }
        }
        // An ordinary file: a write, asked for in Ask.
        let command = route.replace("{}", "notes.txt");
        let got = decide(&command, Posture::Suggest, true, &RuleSet::new());
        if got != "ask" {
            wrong.push(format!("`{command}` suggest: {got}"));
        }
    }
    assert_eq!(wrong, Vec::<String>::new());
}
