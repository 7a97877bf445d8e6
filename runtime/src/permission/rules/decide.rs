//! Which rule decides a call; which path an allow rule names literally;
//! which files search results withhold.

use std::path::Path;

use serde_json::Value;

use super::command::{self, BashCall, CommandPattern};
use super::path::{PathPattern, Target};
use super::{Argument, Rule, RuleKind, RuleMatch, RuleSet, Uses};
use crate::permission::call::{Call, Named, Reach};
use crate::tool::{Safety, ToolDefinition};

/// The shell tool, whose deny and ask rules also hold on checks.
const BASH: &str = "bash";

/// What one call offers the rules, worked out once per decision.
struct Facts<'a> {
    call: &'a Call<'a>,
    subject: Subject,
    /// The paths a shell call names (empty for other tools).
    names: Vec<Named>,
    /// The command line turns on `dotglob`, so `*` matches dot files.
    dotglob: bool,
}

/// The part of a call's arguments rules read.
enum Subject {
    /// A tool whose arguments no rule reads.
    Opaque,
    /// A shell call's command line.
    Bash(BashCall),
    /// Every spelling of a path tool's path.
    Path(Vec<Target>),
}

/// A rule's verdict on one call: no match, or a match and how the call
/// reached the rule's path when that needs saying.
type Hit = Option<Option<String>>;

impl<'a> Facts<'a> {
    fn new(call: &'a Call<'a>) -> Self {
        let def = call.def;
        let (subject, names) = if def.takes_command_line() {
            (Subject::Bash(BashCall::new(call.args)), call.names())
        } else if def.path_arg.is_some() {
            (Subject::Path(Target::of_call(call)), Vec::new())
        } else {
            (Subject::Opaque, Vec::new())
        };
        let dotglob = def.takes_command_line()
            && call
                .args
                .get("command")
                .and_then(Value::as_str)
                .is_some_and(|line| line.contains("dotglob") || line.contains("GLOBIGNORE"));
        Self {
            call,
            subject,
            names,
            dotglob,
        }
    }
}

impl Rule {
    /// Whether this rule, on its own, matches the call. Shell allow rules
    /// with a command pattern are decided together in [`RuleSet::decide`].
    fn hit(&self, facts: &Facts<'_>) -> Hit {
        // A check's command line is held to the shell tool's deny and ask
        // rules: it is a command the model chose.
        let as_shell =
            facts.call.def.runs_checks && self.kind != RuleKind::Allow && self.names(BASH);
        if !self.names(&facts.call.def.name) && !as_shell {
            return self.crosses(facts);
        }
        // An argument a rule cannot read is caught by deny and ask, never allowed.
        let fail_closed = self.kind != RuleKind::Allow;
        let caught = |yes: bool| yes.then_some(None);
        match (&self.argument, &facts.subject) {
            (Argument::Any, _) => Some(None),
            (Argument::Command(pattern), Subject::Bash(bash))
            | (
                Argument::Either {
                    command: Some(pattern),
                    ..
                },
                Subject::Bash(bash),
            ) => caught(fail_closed && pattern.catches(bash)),
            (Argument::Path(pattern, _), Subject::Path(targets))
            | (
                Argument::Either {
                    path: Some(pattern),
                    ..
                },
                Subject::Path(targets),
            ) => self.path_hit(pattern, targets, facts),
            (Argument::Either { .. }, _) => caught(fail_closed),
            // A command pattern names a shell tool and a path pattern a
            // path tool, so these pairs cannot meet.
            (Argument::Command(_), Subject::Path(_) | Subject::Opaque)
            | (Argument::Path(..), Subject::Bash(_) | Subject::Opaque) => None,
        }
    }

    /// A path tool's spellings: deny and ask catch the call when any
    /// spelling matches (or the path cannot be read), allow only when all do.
    fn path_hit(&self, pattern: &PathPattern, targets: &[Target], facts: &Facts<'_>) -> Hit {
        let results: Vec<Option<bool>> = targets.iter().map(|t| pattern.matches(t)).collect();
        if self.kind == RuleKind::Allow {
            return results.iter().all(|r| *r == Some(true)).then_some(None);
        }
        let at = results.iter().position(|r| r.unwrap_or(true))?;
        if at == 0 {
            return Some(None);
        }
        let named = facts.call.names().into_iter().next()?;
        let real = facts.call.spellings(&named).get(at)?.clone();
        let shown = real.strip_prefix(facts.call.root).unwrap_or(&real);
        Some(Some(format!(
            "'{}' leads to '{}'",
            named.text,
            shown.display()
        )))
    }

    /// A deny or ask rule on a path, on a shell call that reaches the path:
    /// a rule on a reading tool when the command may read it, on a writing
    /// tool when a command not proven read-only may write it.
    fn crosses(&self, facts: &Facts<'_>) -> Hit {
        if self.kind == RuleKind::Allow || facts.names.is_empty() {
            return None;
        }
        let (pattern, Uses { reads, writes }) = self.path_pattern()?;
        let writes = writes && facts.call.safety != Safety::ReadOnly;
        facts
            .names
            .iter()
            .filter(|named| {
                (reads && named.access.may_read()) || (writes && named.access.may_write())
            })
            .find(|named| pattern.meets(facts.call, named, facts.dotglob))
            .map(|named| Some(route(named)))
    }
}

/// How a command line reaches a path, in words.
fn route(named: &Named) -> String {
    let shown = named.shown();
    match named.reach {
        Reach::Itself => format!("the command names {shown}"),
        Reach::Below => format!("the command walks {shown}"),
        Reach::Glob(_) => format!("the command's glob {shown} may expand to it"),
    }
}

impl RuleSet {
    /// The rule that decides a call, if any: deny beats ask beats allow;
    /// among the winners, the highest-precedence scope, then the first added.
    pub fn decide(&self, call: &Call<'_>) -> Option<RuleMatch> {
        let facts = Facts::new(call);
        let hits = |kind: RuleKind| {
            self.rules
                .iter()
                .filter(move |r| r.kind == kind)
                .filter_map(|r| r.hit(&facts).map(|route| (r, route)))
                .collect::<Vec<_>>()
        };
        let (winner, route) = best(hits(RuleKind::Deny))
            .or_else(|| best(hits(RuleKind::Ask)))
            .or_else(|| best(self.allowing(&facts).into_iter().map(|r| (r, None))))?;
        Some(RuleMatch {
            kind: winner.kind,
            scope: winner.scope,
            rule: winner.text.clone(),
            route,
        })
    }

    /// The allow rules that together allow the call.
    fn allowing<'a>(&'a self, facts: &Facts<'_>) -> Vec<&'a Rule> {
        let allows: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.kind == RuleKind::Allow && r.names(&facts.call.def.name))
            .collect();
        let Subject::Bash(bash) = &facts.subject else {
            return allows
                .into_iter()
                .filter(|r| r.hit(facts).is_some())
                .collect();
        };
        let mut found: Vec<&Rule> = Vec::new();
        let mut patterns: Vec<(&Rule, &CommandPattern)> = Vec::new();
        for rule in allows {
            match &rule.argument {
                Argument::Any => found.push(rule),
                Argument::Command(pattern)
                | Argument::Either {
                    command: Some(pattern),
                    ..
                } => patterns.push((rule, pattern)),
                Argument::Path(..) | Argument::Either { command: None, .. } => {}
            }
        }
        let only: Vec<&CommandPattern> = patterns.iter().map(|(_, p)| *p).collect();
        found.extend(
            command::covering(bash, &only)
                .into_iter()
                .map(|i| patterns[i].0),
        );
        // Back in the order added, so `best` keeps the first of equals.
        self.rules
            .iter()
            .filter(|r| found.iter().any(|f| std::ptr::eq(*f, *r)))
            .collect()
    }

    /// When allow rules cover part of a shell call but not all of it, the
    /// first simple command they leave out (and that is not read-only on
    /// its own): what a denial names.
    pub fn uncovered(&self, call: &Call<'_>) -> Option<String> {
        let facts = Facts::new(call);
        let Subject::Bash(bash) = &facts.subject else {
            return None;
        };
        let patterns: Vec<&CommandPattern> = self
            .rules
            .iter()
            .filter(|r| r.kind == RuleKind::Allow && r.names(&call.def.name))
            .filter_map(|r| match &r.argument {
                Argument::Command(pattern)
                | Argument::Either {
                    command: Some(pattern),
                    ..
                } => Some(pattern),
                Argument::Any | Argument::Path(..) | Argument::Either { command: None, .. } => None,
            })
            .collect();
        command::coverage(bash, &patterns).err().flatten()
    }

    /// Whether an allow rule for `def` names `path` literally, with no
    /// wildcard: what lets a file tool write a protected path.
    pub fn names_literally(&self, def: &ToolDefinition, path: &Path, root: &Path) -> bool {
        let target = Target::at(path, root);
        self.rules
            .iter()
            .filter(|r| r.kind == RuleKind::Allow && r.names(&def.name))
            .filter_map(|r| match &r.argument {
                Argument::Path(pattern, _)
                | Argument::Either {
                    path: Some(pattern),
                    ..
                } => Some(pattern),
                Argument::Any | Argument::Command(_) | Argument::Either { path: None, .. } => None,
            })
            .any(|pattern| pattern.is_literal() && pattern.matches(&target) == Some(true))
    }

    /// Whether search and listing results must leave out the file at
    /// `path` (absolute, real): a deny or ask rule on a reading tool
    /// matches it. An ask rule counts, since no one can be asked per file.
    pub fn withholds(&self, path: &Path, root: &Path) -> bool {
        let target = Target::at(path, root);
        self.rules.iter().any(|r| {
            r.kind != RuleKind::Allow
                && r.path_pattern()
                    .is_some_and(|(p, uses)| uses.reads && p.matches(&target) == Some(true))
        })
    }
}

/// The rule from the highest-precedence scope; the first of equals.
fn best<'a>(
    rules: impl IntoIterator<Item = (&'a Rule, Option<String>)>,
) -> Option<(&'a Rule, Option<String>)> {
    rules
        .into_iter()
        .fold(None, |best, (rule, route)| match best {
            Some((b, r)) if b.scope >= rule.scope => Some((b, r)),
            _ => Some((rule, route)),
        })
}
