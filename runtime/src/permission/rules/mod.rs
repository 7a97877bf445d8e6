//! Allow / ask / deny rules (P2).
//!
//! A rule is written `tool` or `tool(argument)`:
//!
//! - `read_file`, `mcp_*`, `*`: the tool part is a name glob whose only
//!   wildcard is `*`. Without an argument (or with `(*)`) it matches every
//!   call of the tools it names.
//! - `bash(git push:*)`: a command prefix. It matches a simple command whose
//!   words start with the prefix's words, on word boundaries (`git push`,
//!   `git push origin`, never `git pushx`). `bash(npm run test)`, without
//!   `:*`, must equal the command's words exactly. Only the trailing `:*` is
//!   a wildcard.
//! - `write_file(src/**)`, `edit_file(*.md)`: for the tools whose arguments
//!   carry a `path` (`read_file`, `write_file`, `edit_file`, `list_dir`,
//!   `glob`, `grep`), a glob over that path. `**` crosses directories, `*`
//!   does not (`*.md` is the top level only; `**/*.md` is everywhere). A
//!   relative pattern is matched against the path made relative to the
//!   workspace root, lexically (`./` dropped, `..` resolved, an absolute path
//!   inside the root made relative); a path outside the root never matches
//!   it. An absolute pattern (`/etc/**`) is matched against the absolute
//!   path, inside the root or not. A missing `path` is the workspace root
//!   (`.`), as the tools default. Symlinks are not followed: confinement
//!   (`tool::workspace`) is what stops a link from leading out.
//! - `mcp_fs_write_file(src/**)`: an MCP tool named exactly takes a path
//!   glob too, matched against its `path` argument when its schema has one
//!   (`ToolDefinition::path_arg`); on a tool without one, a deny or ask rule
//!   with a path pattern catches every call and an allow rule none.
//! - Any other tool takes no argument pattern but `*`.
//!
//! # Deciding
//!
//! Deny beats ask beats allow, across every scope: a user-scope deny is not
//! lifted by a session-scope allow. Deny and ask rules fail closed: a `bash`
//! call is caught when any simple command in it (inside `$(…)` too) matches,
//! looking through leading assignments and wrappers (`sudo`, `env`, `nohup`,
//! …), and a command line that does not parse is caught when the rule's
//! words occur in it anywhere. Allow rules are strict: every simple command
//! of a `bash` call must be covered by some allow rule, a call with a
//! substitution or that does not parse is never allowed by an argument
//! pattern, and an arguments object a rule cannot read is never allowed (see
//! `command` for the details).
//!
//! # Scope precedence
//!
//! Among the matching rules of the winning kind, the one recorded in the
//! [`RuleMatch`] comes from the highest-precedence scope: Session > Local >
//! Project > User; within one scope, the first added. For a `bash` call that
//! several allow rules cover together, the recorded rule is the
//! highest-precedence one of those that cover some part of it.
//!
//! # Sub-agents
//!
//! A child agent keeps all of its parent's rules ([`RuleSet::inherited`]).
//! A role may narrow them with its own deny and ask rules
//! ([`RuleSet::with_child_rules`]), but its allow rules are ignored: a role
//! must never widen its parent's authority.
//!
//! # Layout
//! - `command`: `bash` command patterns, how they catch and how they cover.
//! - `path`: path globs and where a call's `path` lies.

mod command;
mod path;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::Path as FsPath;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use command::{BashCall, CommandPattern};
use path::{PathPattern, Target};

/// What a rule does to a call it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// The call runs without asking (unless the floor blocks it).
    Allow,
    /// A person is asked, whatever the posture.
    Ask,
    /// The call does not run.
    Deny,
}

impl RuleKind {
    /// The name written in config and in audit lines.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Allow => "allow",
            RuleKind::Ask => "ask",
            RuleKind::Deny => "deny",
        }
    }
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a rule came from. Declared from the lowest precedence to the
/// highest, so the derived order is the scope precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The user's config file.
    User,
    /// The project's shared config file.
    Project,
    /// The project's local, uncommitted config file.
    Local,
    /// Added during this session (an "always allow" answer, a role's rules).
    Session,
}

impl Scope {
    /// The name written in config and in audit lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
            Scope::Local => "local",
            Scope::Session => "session",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The rule that decided a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleMatch {
    /// What the rule does.
    pub kind: RuleKind,
    /// Where it came from.
    pub scope: Scope,
    /// The rule as written, so the audit line names it the way the user does.
    pub rule: String,
}

impl fmt::Display for RuleMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rule '{}' ({})", self.kind, self.rule, self.scope)
    }
}

/// A rule that cannot be parsed. None is retryable: the rule must be
/// rewritten. Every message quotes the rule as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// A `(` without its `)`, a `)` without its `(`, or text after the `)`.
    /// Not retryable.
    #[error("permission rule '{rule}': unbalanced parenthesis")]
    UnbalancedParenthesis {
        /// The rule as written.
        rule: String,
    },
    /// Nothing before the `(`, or an empty rule. Not retryable.
    #[error("permission rule '{rule}': empty tool name")]
    EmptyTool {
        /// The rule as written.
        rule: String,
    },
    /// The tool part has a character a tool name cannot have. Not retryable.
    #[error("permission rule '{rule}': invalid character '{ch}' in tool name '{tool}'")]
    BadToolName {
        /// The rule as written.
        rule: String,
        /// The tool part.
        tool: String,
        /// The first offending character.
        ch: char,
    },
    /// `tool()`. Not retryable.
    #[error(
        "permission rule '{rule}': empty argument pattern (write '{tool}' to match every call)"
    )]
    EmptyArgument {
        /// The rule as written.
        rule: String,
        /// The tool part.
        tool: String,
    },
    /// An argument pattern on a tool whose arguments rules do not read, or on
    /// a wildcard tool part. Not retryable.
    #[error(
        "permission rule '{rule}': '{tool}' takes no argument pattern other than '*' \
         (argument patterns are read for bash and for the tools with a path: {})",
        path::PATH_TOOLS.join(", ")
    )]
    ArgumentNotSupported {
        /// The rule as written.
        rule: String,
        /// The tool part.
        tool: String,
    },
    /// A path pattern globset cannot compile. Not retryable.
    #[error("permission rule '{rule}': bad glob: {error}")]
    BadGlob {
        /// The rule as written.
        rule: String,
        /// Why the glob does not compile.
        error: String,
    },
    /// A path pattern that could never match (`~`, `..`, empty). Not retryable.
    #[error("permission rule '{rule}': bad path pattern: {why}")]
    BadPath {
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        why: String,
    },
    /// A `bash` pattern that is not one plain simple command. Not retryable.
    #[error("permission rule '{rule}': bad command pattern: {why}")]
    BadCommand {
        /// The rule as written.
        rule: String,
        /// What is wrong with it.
        why: String,
    },
}

/// One parsed rule.
#[derive(Debug, Clone)]
pub struct Rule {
    kind: RuleKind,
    scope: Scope,
    /// As written (trimmed): what audit lines and errors show.
    text: String,
    /// The tool name glob; `*` is its only wildcard.
    tool: String,
    argument: Argument,
}

/// What a rule asks of a call's arguments.
#[derive(Debug, Clone)]
enum Argument {
    /// Nothing: every call of the tool.
    Any,
    /// A `bash` command pattern.
    Command(CommandPattern),
    /// A glob over the `path` argument.
    Path(PathPattern),
}

impl Rule {
    /// Parses `tool` or `tool(argument)`.
    pub fn parse(kind: RuleKind, scope: Scope, text: &str) -> Result<Rule, RuleError> {
        let text = text.trim();
        let rule = || text.to_string();
        let (tool, argument) = match text.find('(') {
            None if text.contains(')') => {
                return Err(RuleError::UnbalancedParenthesis { rule: rule() });
            }
            None => (text, None),
            Some(open) => {
                let Some(inner) = text[open + 1..].strip_suffix(')') else {
                    return Err(RuleError::UnbalancedParenthesis { rule: rule() });
                };
                if !balanced(inner) || text[..open].contains(')') {
                    return Err(RuleError::UnbalancedParenthesis { rule: rule() });
                }
                (&text[..open], Some(inner.trim()))
            }
        };
        if tool.is_empty() {
            return Err(RuleError::EmptyTool { rule: rule() });
        }
        if let Some(ch) = tool
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || "_-.:*".contains(c)))
        {
            return Err(RuleError::BadToolName {
                rule: rule(),
                tool: tool.to_string(),
                ch,
            });
        }
        let argument = match argument {
            None | Some("*") => Argument::Any,
            Some("") => {
                return Err(RuleError::EmptyArgument {
                    rule: rule(),
                    tool: tool.to_string(),
                });
            }
            Some(arg) if tool == "bash" => Argument::Command(
                CommandPattern::parse(arg)
                    .map_err(|why| RuleError::BadCommand { rule: rule(), why })?,
            ),
            Some(arg) if path::PATH_TOOLS.contains(&tool) || host_tool(tool) => {
                Argument::Path(PathPattern::parse(arg).map_err(|problem| match problem {
                    path::Problem::Glob(error) => RuleError::BadGlob {
                        rule: rule(),
                        error,
                    },
                    path::Problem::Path(why) => RuleError::BadPath { rule: rule(), why },
                })?)
            }
            Some(_) => {
                return Err(RuleError::ArgumentNotSupported {
                    rule: rule(),
                    tool: tool.to_string(),
                });
            }
        };
        Ok(Rule {
            kind,
            scope,
            text: text.to_string(),
            tool: tool.to_string(),
            argument,
        })
    }

    /// What the rule does.
    pub fn kind(&self) -> RuleKind {
        self.kind
    }

    /// Where it came from.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The rule as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn names(&self, tool: &str) -> bool {
        name_glob(&self.tool, tool)
    }

    /// Whether this rule, on its own, matches the call. `bash` allow rules
    /// with a command pattern are decided together in [`RuleSet::decide`].
    fn matches(&self, call: &Call<'_>) -> bool {
        if !self.names(call.tool) {
            return false;
        }
        // An argument a rule cannot read is caught by deny and ask, never allowed.
        let fail_closed = self.kind != RuleKind::Allow;
        match (&self.argument, &call.subject) {
            (Argument::Any, _) => true,
            (Argument::Command(pattern), Subject::Bash(bash)) => {
                fail_closed && pattern.catches(bash)
            }
            (Argument::Path(pattern), Subject::Path(target)) => {
                pattern.matches(target).unwrap_or(fail_closed)
            }
            // A path pattern on a host tool that takes no path: deny and
            // ask catch every call (fail closed), allow none.
            (Argument::Path(_), Subject::Opaque) => fail_closed,
            // A command pattern names `bash` and a path pattern a path
            // tool, so these pairs cannot meet.
            (Argument::Command(_), Subject::Path(_) | Subject::Opaque)
            | (Argument::Path(_), Subject::Bash(_)) => false,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether the parentheses inside an argument pattern pair up.
fn balanced(text: &str) -> bool {
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => {}
        }
    }
    depth == 0
}

/// An MCP tool named exactly (`mcp_fs_write_file`): it takes a path
/// pattern, matched against its path argument when its definition has one
/// (`ToolDefinition::path_arg`).
fn host_tool(tool: &str) -> bool {
    tool.starts_with("mcp_") && !tool.contains('*')
}

/// Matches a tool name against a glob whose only wildcard is `*`.
fn name_glob(glob: &str, name: &str) -> bool {
    let mut parts = glob.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// A config file's `[permissions]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PermissionRules {
    /// Rules that let a call run without asking.
    pub allow: Vec<String>,
    /// Rules that always ask a person.
    pub ask: Vec<String>,
    /// Rules that never let a call run.
    pub deny: Vec<String>,
}

/// The rules of every scope, in the order they were added.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
}

/// What one call offers the rules, worked out once per decision.
struct Call<'a> {
    tool: &'a str,
    subject: Subject,
}

/// The part of a call's arguments rules read.
enum Subject {
    /// A tool whose arguments no rule reads.
    Opaque,
    /// A `bash` call's command line.
    Bash(BashCall),
    /// Where a path tool's `path` lies.
    Path(Target),
}

impl RuleSet {
    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses and adds one rule.
    pub fn add(&mut self, kind: RuleKind, scope: Scope, text: &str) -> Result<(), RuleError> {
        self.rules.push(Rule::parse(kind, scope, text)?);
        Ok(())
    }

    /// Adds a `[permissions]` table's rules under `scope`. Nothing is added
    /// when one of them does not parse.
    pub fn extend_from(&mut self, scope: Scope, rules: &PermissionRules) -> Result<(), RuleError> {
        let parsed = Self::parse_lists(
            scope,
            [
                (RuleKind::Deny, &rules.deny),
                (RuleKind::Ask, &rules.ask),
                (RuleKind::Allow, &rules.allow),
            ],
        )?;
        self.rules.extend(parsed);
        Ok(())
    }

    fn parse_lists<'a>(
        scope: Scope,
        lists: impl IntoIterator<Item = (RuleKind, &'a Vec<String>)>,
    ) -> Result<Vec<Rule>, RuleError> {
        lists
            .into_iter()
            .flat_map(|(kind, texts)| texts.iter().map(move |t| Rule::parse(kind, scope, t)))
            .collect()
    }

    /// The rules, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter()
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether every rule of `other` (kind, scope and text) is also here:
    /// the check that a child kept all of its parent's rules.
    pub fn contains_all(&self, other: &RuleSet) -> bool {
        other.rules.iter().all(|theirs| {
            self.rules.iter().any(|mine| {
                mine.kind == theirs.kind && mine.scope == theirs.scope && mine.text == theirs.text
            })
        })
    }

    /// The rules a child agent starts with: all of its parent's.
    pub fn inherited(&self) -> RuleSet {
        self.clone()
    }

    /// The parent's rules narrowed by a role's: the role's deny and ask rules
    /// are added at session scope; its allow rules are ignored, because a
    /// role must never widen its parent's authority.
    pub fn with_child_rules(&self, child: &PermissionRules) -> Result<RuleSet, RuleError> {
        let mut set = self.inherited();
        set.rules.extend(Self::parse_lists(
            Scope::Session,
            [(RuleKind::Deny, &child.deny), (RuleKind::Ask, &child.ask)],
        )?);
        Ok(set)
    }

    /// The rule that decides a call, if any: deny beats ask beats allow;
    /// among the winners, the highest-precedence scope, then the first added.
    pub fn decide(&self, tool: &str, args: &Value, workspace_root: &FsPath) -> Option<RuleMatch> {
        self.decide_call(tool, false, args, workspace_root)
    }

    /// [`RuleSet::decide`] for a call of `def`, whose path argument (a
    /// host tool's `path_arg`) path rules read.
    pub fn decide_for(
        &self,
        def: &crate::tool::ToolDefinition,
        args: &Value,
        workspace_root: &FsPath,
    ) -> Option<RuleMatch> {
        let takes_path = def.path_arg.as_deref() == Some("path");
        self.decide_call(&def.name, takes_path, args, workspace_root)
    }

    fn decide_call(
        &self,
        tool: &str,
        takes_path: bool,
        args: &Value,
        workspace_root: &FsPath,
    ) -> Option<RuleMatch> {
        let call = Call {
            tool,
            subject: if tool == "bash" {
                Subject::Bash(BashCall::new(args))
            } else if takes_path || path::PATH_TOOLS.contains(&tool) {
                Subject::Path(Target::new(args, workspace_root))
            } else {
                Subject::Opaque
            },
        };
        let of_kind = |kind: RuleKind| self.rules.iter().filter(move |r| r.kind == kind);
        let winner = best(of_kind(RuleKind::Deny).filter(|r| r.matches(&call)))
            .or_else(|| best(of_kind(RuleKind::Ask).filter(|r| r.matches(&call))))
            .or_else(|| best(self.allowing(&call)))?;
        Some(RuleMatch {
            kind: winner.kind,
            scope: winner.scope,
            rule: winner.text.clone(),
        })
    }

    /// The allow rules that together allow the call.
    fn allowing<'a>(&'a self, call: &Call<'_>) -> Vec<&'a Rule> {
        let allows: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.kind == RuleKind::Allow && r.names(call.tool))
            .collect();
        let Subject::Bash(bash) = &call.subject else {
            return allows.into_iter().filter(|r| r.matches(call)).collect();
        };
        let mut found: Vec<&Rule> = Vec::new();
        let mut patterns: Vec<(&Rule, &CommandPattern)> = Vec::new();
        for rule in allows {
            match &rule.argument {
                Argument::Any => found.push(rule),
                Argument::Command(pattern) => patterns.push((rule, pattern)),
                Argument::Path(_) => {}
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
}

/// The rule from the highest-precedence scope; the first of equals.
fn best<'a>(rules: impl IntoIterator<Item = &'a Rule>) -> Option<&'a Rule> {
    rules.into_iter().fold(None, |best, rule| match best {
        Some(b) if b.scope >= rule.scope => Some(b),
        _ => Some(rule),
    })
}
