//! The order one call is decided in (P3): rules → `pre_tool_use` hooks →
//! deterministic floor (protected paths first, then `floor::assess`) →
//! posture. (The execution gate runs before, in the tool runner.) A hook
//! may deny or have a person asked; its "allow" is no objection, so it
//! never lifts a deny rule, a protected path, the floor or the mode.
//!
//! A call the floor finds unplaced (it writes a path known only when it
//! runs, `floor::FloorVerdict::Unplaced`) is decided like an unproven one,
//! except that no allow rule covers it and Full Access denies it: it runs
//! only after a person or the guardian saw it.
//!
//! [`evaluate`] is pure. It either decides, or says what a host must do
//! next: ask a person, or have the guardian review the held call. Where the
//! call's paths really lead was resolved by the tool layer and comes with
//! the [`Call`].

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Posture;
use super::call::Call;
use super::floor::{self, FloorVerdict};
use super::protected::{self, ProtectedPaths};
use super::rules::{RuleKind, RuleMatch, RuleSet, Scope};
use crate::hooks::HookVerdict;

/// Allow or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The call runs.
    Allow,
    /// The call does not run; the model is told why.
    Deny,
}

/// The layer that made a decision (P2, P6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The execution gate: the mode or an allow-list.
    Mode,
    /// The file-scope gate: a sub-agent or workflow step writing outside
    /// the files it was given.
    Scope,
    /// A configured allow / ask / deny rule.
    Rule,
    /// A `pre_tool_use` hook (it may deny or ask, never allow).
    Hook,
    /// The deterministic floor.
    Floor,
    /// The posture itself (Full Access allows, Never denies, a host that
    /// cannot ask denies).
    Posture,
    /// The model guardian (Auto-Review).
    Guardian,
    /// The denial ledger paused autonomy.
    Ledger,
    /// A person, at a prompt.
    User,
}

impl Layer {
    /// How the layer is named in a transcript line.
    pub fn label(self) -> &'static str {
        match self {
            Layer::Mode => "mode gate",
            Layer::Scope => "file-scope gate",
            Layer::Rule => "rule",
            Layer::Hook => "hook",
            Layer::Floor => "deterministic floor",
            Layer::Posture => "posture",
            Layer::Guardian => "model guardian",
            Layer::Ledger => "denial ledger",
            Layer::User => "user",
        }
    }
}

/// The guardian's risk rating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Routine and reversible.
    Low,
    /// Worth a look.
    Medium,
    /// Never runs automatically.
    High,
    /// Never runs automatically.
    Critical,
}

impl Risk {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }
}

/// One permission decision and who made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// Allow or deny.
    pub verdict: Verdict,
    /// Who decided.
    pub layer: Layer,
    /// The rule, as written, when a rule decided (or forced an ask).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The rule's scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// The guardian's rating, when it reviewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<Risk>,
    /// Why, in words the model and the user read.
    pub reason: String,
}

impl Decision {
    /// A decision by `layer` with a reason.
    pub fn new(verdict: Verdict, layer: Layer, reason: impl Into<String>) -> Self {
        Self {
            verdict,
            layer,
            rule: None,
            scope: None,
            risk: None,
            reason: reason.into(),
        }
    }

    fn by_rule(verdict: Verdict, matched: &RuleMatch, reason: impl Into<String>) -> Self {
        let mut reason = reason.into();
        if let Some(route) = &matched.route {
            reason = format!("{reason}: {route}");
        }
        Self {
            rule: Some(matched.rule.clone()),
            scope: Some(matched.scope),
            ..Self::new(verdict, Layer::Rule, reason)
        }
    }

    /// The one-line transcript form (P6), e.g.
    /// `Auto-Review allowed 'bash' (low risk, model guardian): …`.
    pub fn line(&self, posture: Posture, tool: &str) -> String {
        // The mode gate decides before any posture is consulted.
        let actor = match (posture, self.layer) {
            (_, Layer::Mode) => "The mode",
            (_, Layer::Scope) => "The file scope",
            (Posture::Auto, _) => "Auto-Review",
            (Posture::Suggest, _) => "Ask",
            (Posture::Bypass, _) => "Full Access",
            (Posture::Never, _) => "Never",
        };
        let verb = match self.verdict {
            Verdict::Allow => "allowed",
            Verdict::Deny => "denied",
        };
        let mut how = Vec::new();
        if let Some(risk) = self.risk {
            how.push(format!("{} risk", risk.as_str()));
        }
        match (&self.rule, self.scope) {
            (Some(rule), Some(scope)) => how.push(format!("{scope} rule {rule}")),
            _ => how.push(self.layer.label().to_string()),
        }
        format!(
            "{actor} {verb} '{tool}' ({}): {}",
            how.join(", "),
            self.reason
        )
    }
}

/// What decides for one agent: its posture, its rules, and whether a person
/// can be asked.
#[derive(Debug, Clone)]
pub struct Policy<'a> {
    /// The effective posture (after narrowing and the denial ledger).
    pub posture: Posture,
    /// Every rule in force.
    pub rules: &'a RuleSet,
    /// Whether a person can answer a prompt (P7).
    pub interactive: bool,
    /// The agent's canonical plan file: writing it is the agent's own
    /// business, never the workspace's. `None` for an agent without one.
    pub plan_file: Option<&'a Path>,
    /// cadre's configuration and data, beyond the workspace's own `.cadre`
    /// and `.git`: never written by a tool call (P10).
    pub protected: &'a ProtectedPaths,
}

/// What [`evaluate`] concludes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evaluation {
    /// Decided without anyone else.
    Decided(Decision),
    /// A person must answer; `rule` is set when an ask rule forced it.
    AskPerson {
        /// Why a person is asked.
        reason: String,
        /// The ask rule, when one forced the prompt.
        rule: Option<RuleMatch>,
    },
    /// The guardian must review the held call with these observations.
    Review {
        /// The floor's factual observations.
        observations: Vec<String>,
    },
}

/// Decides one call that passed the execution gate and its schema, with
/// no hook.
pub fn evaluate(policy: &Policy<'_>, call: &Call<'_>) -> Evaluation {
    evaluate_with_hook(policy, call, &HookVerdict::NoObjection)
}

/// Whether a deny rule decides `call`: its hooks need not run.
pub fn denied_by_rule(policy: &Policy<'_>, call: &Call<'_>) -> bool {
    let call = &Call {
        home: call.home.or(policy.protected.home_dir()),
        ..*call
    };
    policy
        .rules
        .decide(call)
        .is_some_and(|m| m.kind == RuleKind::Deny)
}

/// Decides one call that passed the execution gate and its schema, given
/// what its `pre_tool_use` hooks concluded.
pub fn evaluate_with_hook(policy: &Policy<'_>, call: &Call<'_>, hook: &HookVerdict) -> Evaluation {
    // `~` in a command line is the home the host named.
    let call = &Call {
        home: call.home.or(policy.protected.home_dir()),
        ..*call
    };
    let (def, args, root) = (call.def, call.args, call.root);
    let matched = policy.rules.decide(call);
    if let Some(m) = matched.as_ref().filter(|m| m.kind == RuleKind::Deny) {
        return Evaluation::Decided(Decision::by_rule(
            Verdict::Deny,
            m,
            format!("denied by the {} rule {}", m.scope, m.rule),
        ));
    }
    let hook_ask = match hook {
        HookVerdict::NoObjection => None,
        HookVerdict::Deny { hook, reason } => {
            return Evaluation::Decided(Decision::new(
                Verdict::Deny,
                Layer::Hook,
                format!("denied by the pre_tool_use hook `{hook}`: {reason}"),
            ));
        }
        HookVerdict::Ask { hook, reason } => Some(format!(
            "the pre_tool_use hook `{hook}` asks a person: {reason}"
        )),
    };
    let ask_rule = matched.clone().filter(|m| m.kind == RuleKind::Ask);
    let allow_rule = matched.filter(|m| m.kind == RuleKind::Allow);
    if ask_rule.is_none()
        && hook_ask.is_none()
        && let Some(reason) = own_state(policy, call)
    {
        return Evaluation::Decided(Decision::new(Verdict::Allow, Layer::Floor, reason));
    }
    let literally = |path: &Path| policy.rules.names_literally(def, path, root);
    if let Some(reason) = protected::blocked(call, policy.protected, policy.plan_file, literally) {
        return Evaluation::Decided(Decision::new(Verdict::Deny, Layer::Floor, reason));
    }

    // An unplaced write is never let through unreviewed: no allow rule
    // covers it, and Full Access does not run it.
    let (observations, unplaced) = match floor::assess(def, call.safety, args, root) {
        FloorVerdict::Blocked { reason } => {
            return Evaluation::Decided(Decision::new(Verdict::Deny, Layer::Floor, reason));
        }
        FloorVerdict::ProvenSafe { reason } => match (&ask_rule, &hook_ask) {
            (None, None) => {
                return Evaluation::Decided(Decision::new(Verdict::Allow, Layer::Floor, reason));
            }
            (Some(_), _) | (_, Some(_)) => (Vec::new(), None),
        },
        FloorVerdict::Unproven { observations } => (observations, None),
        FloorVerdict::Unplaced {
            reason,
            observations,
        } => (observations, Some(reason)),
    };
    // Never means never: an allow rule does not lift it.
    if ask_rule.is_none()
        && hook_ask.is_none()
        && unplaced.is_none()
        && policy.posture != Posture::Never
        && let Some(m) = &allow_rule
    {
        return Evaluation::Decided(Decision::by_rule(
            Verdict::Allow,
            m,
            format!("allowed by the {} rule {}", m.scope, m.rule),
        ));
    }
    if let Some(m) = ask_rule {
        return person_or_deny(
            policy,
            format!("the {} rule {} asks a person", m.scope, m.rule),
            Some(m),
        );
    }
    if let Some(reason) = hook_ask {
        // Refused where no one can answer: by the hook's layer.
        return match person_or_deny(policy, reason, None) {
            Evaluation::Decided(decision) => Evaluation::Decided(Decision {
                layer: Layer::Hook,
                ..decision
            }),
            asked @ (Evaluation::AskPerson { .. } | Evaluation::Review { .. }) => asked,
        };
    }
    match policy.posture {
        Posture::Never => Evaluation::Decided(Decision::new(
            Verdict::Deny,
            Layer::Posture,
            "the posture is never: only read-only calls run",
        )),
        Posture::Suggest => {
            let reason = match policy.rules.uncovered(call) {
                Some(segment) => format!(
                    "the call can change things: the allow rules cover the rest of it, but not \
                     `{segment}`"
                ),
                None => "the call can change things".to_string(),
            };
            person_or_deny(policy, reason, None)
        }
        Posture::Auto => Evaluation::Review { observations },
        Posture::Bypass => Evaluation::Decided(match unplaced {
            Some(reason) => Decision::new(
                Verdict::Deny,
                Layer::Floor,
                format!("{reason}; Full Access runs only what the reader can place"),
            ),
            None => Decision::new(
                Verdict::Allow,
                Layer::Posture,
                "Full Access runs ordinary calls",
            ),
        }),
    }
}

/// Calls that change only the agent's own state, which the floor proves
/// safe: its plan file, its task list.
fn own_state(policy: &Policy<'_>, call: &Call<'_>) -> Option<String> {
    let def = call.def;
    if def.session_state_only {
        return Some(format!(
            "'{}' changes only the agent's own session state",
            def.name
        ));
    }
    let path = def.path_in(call.args)?;
    (def.writes_path_only && policy.plan_file == Some(Path::new(path)))
        .then(|| "writes the session's own plan file".to_string())
}

/// An ask: to a person when one can answer, else a denial saying why.
fn person_or_deny(policy: &Policy<'_>, reason: String, rule: Option<RuleMatch>) -> Evaluation {
    let refuse = |why: String| {
        let decision = match &rule {
            Some(m) => Decision::by_rule(Verdict::Deny, m, why),
            None => Decision::new(Verdict::Deny, Layer::Posture, why),
        };
        Evaluation::Decided(decision)
    };
    match policy.posture {
        Posture::Auto => refuse(format!(
            "{reason}, and Auto-Review never asks a person; do it another way or report that it needs approval"
        )),
        Posture::Never => refuse(format!("{reason}, and the posture is never")),
        Posture::Suggest | Posture::Bypass if !policy.interactive => refuse(format!(
            "{reason}, and no one can answer a prompt here (non-interactive); do it another way or report that it needs approval"
        )),
        Posture::Suggest | Posture::Bypass => Evaluation::AskPerson { reason, rule },
    }
}

#[cfg(test)]
mod tests;
