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
//! - `write_file(src/**)`, `edit_file(*.md)`: for the tools with a path
//!   argument (`ToolDefinition::path_arg`: `read_file`, `write_file`,
//!   `edit_file`, `list_dir`, `glob`, `grep`, and any host tool so marked),
//!   a glob over that path. `**` crosses directories, `*` does not (`*.md`
//!   is the top level only; `**/*.md` is everywhere). A relative pattern is
//!   matched against the path made relative to the workspace root (`./`
//!   dropped, `..` resolved, an absolute path inside the root made
//!   relative); a path outside the root never matches it. An absolute
//!   pattern (`/etc/**`) is matched against the absolute path, inside the
//!   root or not. A missing path is the workspace root (`.`), as the tools
//!   default.
//! - Which argument form a rule takes comes from the tool's marks: a shell
//!   tool (`ToolDefinition::shell`) takes command patterns, a path tool path
//!   globs, and a built-in tool with neither none but `*`. A tool name cadre
//!   does not know (an MCP or host tool) may take either; the call's tool
//!   decides which is read.
//!
//! # Paths are matched where they really lead
//!
//! A call's path has two spellings: as written, and with every symlink
//! followed, which the tool layer resolves before the decision (see
//! `permission::call`). Deny and ask rules catch a call when any spelling
//! matches; an allow rule allows it only when every spelling does. So
//! `deny read_file(.env)` holds on a symlink to `.env`, and
//! `allow write_file(src/**)` does not let `src/cfg -> ../Cargo.toml` be
//! written.
//!
//! A path deny or ask rule holds on every route to its path:
//! - **Shell commands.** A rule on a reading tool (a read-only path tool,
//!   such as `read_file(.env)`) catches a shell call that may read the path:
//!   a word naming it (`cat .env`, `cp .env x`, `git show HEAD:.env`), a
//!   glob that may expand to it (`cat .e*`; bash's `*` skips dot files), or
//!   a recursive reader whose tree holds it (`grep -r x .`, `rg x`, `git
//!   diff` over the whole repository). A rule on a writing tool
//!   (`write_file(Cargo.toml)`) catches a shell call not proven read-only
//!   that names the path, has a glob that may expand to it, or copies or
//!   unpacks into a tree that holds it. A rule on a tool cadre does not know
//!   counts as both. What a command reads without naming it (a script, a
//!   name computed when it runs) is not seen: see `docs/security/paths.md`.
//! - **Search results.** `grep`, `glob` and `list_dir` leave out every file
//!   a deny or ask rule on a reading tool matches ([`RuleSet::withholds`]),
//!   and say how many they left out.
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
//! - `decide`: which rule decides a call, which path an allow rule names
//!   literally, and what search results withhold.
//! - `path`: path globs, where a call's path lies, and what a command line's
//!   trees and globs may reach.

mod command;
mod decide;
mod path;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use command::CommandPattern;
use path::PathPattern;

use crate::tool::{Safety, ToolDefinition, builtin_definitions};

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
    /// How the call reaches the rule's path, when that is not the call's
    /// own path argument as written: "'src/cfg' leads to 'Cargo.toml'",
    /// "the command names '.env'".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
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
         (argument patterns are read for shell tools and for the tools with a path: {})",
        argument_tools().join(", ")
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
    /// A command pattern, for a shell tool.
    Command(CommandPattern),
    /// A glob over the path argument, for a path tool.
    Path(PathPattern, Uses),
    /// For a tool cadre does not know: whichever reading of the pattern
    /// parsed; the call's tool says which applies.
    Either {
        command: Option<CommandPattern>,
        path: Option<PathPattern>,
    },
}

/// What the tool a path rule names does with its path, so the rule can
/// hold on a shell command's route to the same path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Uses {
    /// It reads the path (a read-only tool): the rule holds on commands
    /// that may read it.
    reads: bool,
    /// It writes the path: the rule holds on commands that may write it.
    writes: bool,
}

/// The built-in definition named `tool`, when it names one exactly.
fn catalogue(tool: &str) -> Option<&'static ToolDefinition> {
    builtin_definitions().iter().find(|def| def.name == tool)
}

/// The built-in tools that take an argument pattern.
fn argument_tools() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        builtin_definitions()
            .iter()
            .filter(|def| def.shell || def.path_arg.is_some())
            .map(|def| def.name.clone())
            .collect()
    })
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
        let command = |arg: &str| {
            CommandPattern::parse(arg).map_err(|why| RuleError::BadCommand { rule: rule(), why })
        };
        let path = |arg: &str| {
            PathPattern::parse(arg).map_err(|problem| match problem {
                path::Problem::Glob(error) => RuleError::BadGlob {
                    rule: rule(),
                    error,
                },
                path::Problem::Path(why) => RuleError::BadPath { rule: rule(), why },
            })
        };
        let unsupported = || RuleError::ArgumentNotSupported {
            rule: rule(),
            tool: tool.to_string(),
        };
        let argument = match (argument, catalogue(tool)) {
            (None | Some("*"), _) => Argument::Any,
            (Some(""), _) => {
                return Err(RuleError::EmptyArgument {
                    rule: rule(),
                    tool: tool.to_string(),
                });
            }
            (Some(arg), Some(def)) if def.shell => Argument::Command(command(arg)?),
            (Some(arg), Some(def)) if def.path_arg.is_some() => {
                let reads = def.safety == Safety::ReadOnly;
                Argument::Path(
                    path(arg)?,
                    Uses {
                        reads,
                        writes: !reads,
                    },
                )
            }
            (Some(_), Some(_)) => return Err(unsupported()),
            (Some(_), None) if tool.contains('*') => return Err(unsupported()),
            (Some(arg), None) => match (command(arg), path(arg)) {
                (Err(_), Err(why)) => return Err(why),
                (command, path) => Argument::Either {
                    command: command.ok(),
                    path: path.ok(),
                },
            },
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

    /// The rule's path glob and what its tool does with the path.
    fn path_pattern(&self) -> Option<(&PathPattern, Uses)> {
        match &self.argument {
            Argument::Path(pattern, uses) => Some((pattern, *uses)),
            Argument::Either {
                path: Some(pattern),
                ..
            } => Some((
                pattern,
                Uses {
                    reads: true,
                    writes: true,
                },
            )),
            Argument::Any | Argument::Command(_) | Argument::Either { path: None, .. } => None,
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
}
