//! Validation (W2): everything that can be known before anything starts,
//! each finding at its place. Nothing runs unless there are no errors.
//!
//! Checked: the header (name, limits, posture, mode), variables, step
//! names (`[a-z0-9_-]+`, unique), `needs` (known steps; no cycle, reported
//! with its path), templates (known variables; `{{item}}`/`{{index}}` only
//! in a fan-out; `{{steps.X.…}}` only for a step this one needs, `.output`
//! of a single step, `.outputs` of a fan-out), roles (configured),
//! `for_each` (a literal list, or exactly `{{steps.X.output}}` of a needed
//! JSON step), modes (never wider than the workflow's), outputs and
//! schemas, checks, durations, retries, the fan-out policy, scopes (valid
//! globs). Warned: write scopes of steps that may run at the same time
//! overlap.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::Duration;

use cadre_runtime::Mode;
use cadre_runtime::permission::Posture;
use toml::Spanned;

use crate::diagnostic::{Diagnostic, Invalid, Source};
use crate::format::{RawFile, RawStep, parse};
use crate::model::{
    Budget, Check, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_PARALLEL, ForEach, Isolation, OnFailure,
    OutputKind, Step, Workflow,
};
use crate::template::{Ref, Template};

mod graph;
mod scopes;

/// What validation knows besides the text.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--var key=value` overrides (a key the file does not declare is
    /// added).
    pub vars: BTreeMap<String, String>,
    /// The configured roles; `None` accepts any role name.
    pub roles: Option<BTreeSet<String>>,
}

/// A valid workflow and the warnings it raised.
#[derive(Debug, Clone)]
pub struct Validated {
    /// The workflow.
    pub workflow: Workflow,
    /// Warnings (overlapping write scopes).
    pub warnings: Vec<Diagnostic>,
}

/// Parses and validates a workflow.
pub fn validate(source: &Source, options: &Options) -> Result<Validated, Invalid> {
    let invalid = |diagnostics: Vec<Diagnostic>| Invalid {
        file: source.clone(),
        diagnostics,
    };
    let (raw, unknown) = parse(source).map_err(invalid)?;
    let mut v = Validator {
        source,
        diagnostics: unknown,
    };
    let workflow = v.workflow(&raw, options);
    let mut diagnostics = v.diagnostics;
    if let Some(workflow) = &workflow {
        diagnostics.extend(scopes::overlaps(workflow, &raw));
    }
    diagnostics.sort_by_key(|d| d.span.as_ref().map_or(0, |s| s.start));
    match workflow {
        Some(workflow) if !diagnostics.iter().any(Diagnostic::is_error) => Ok(Validated {
            workflow,
            warnings: diagnostics,
        }),
        _ => Err(invalid(diagnostics)),
    }
}

/// What every step is validated against.
#[derive(Clone, Copy)]
struct StepContext<'a> {
    names: &'a BTreeMap<String, usize>,
    workflow_mode: Mode,
    vars: &'a BTreeMap<String, String>,
    default_cap: usize,
    roles: Option<&'a BTreeSet<String>>,
}

struct Validator<'a> {
    source: &'a Source,
    diagnostics: Vec<Diagnostic>,
}

fn span<T>(s: &Spanned<T>) -> Option<Range<usize>> {
    Some(s.span())
}

/// A step name: `[a-z0-9_-]+`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// `30s`, `10m`, `1h`, `500ms`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    let d = match unit.trim() {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        _ => return None,
    };
    (!d.is_zero()).then_some(d)
}

impl Validator<'_> {
    fn error(&mut self, span: Option<Range<usize>>, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic::error(span, message));
    }

    /// Where a string value's content starts (after its quotes), so a
    /// template's errors point into it.
    fn content_start(&self, s: &Spanned<String>) -> usize {
        self.content_at(s.span().start)
    }

    /// Where the text of the string literal starting at byte `at` begins
    /// (after its opening quotes).
    fn content_at(&self, at: usize) -> usize {
        let rest = self.source.text.get(at..).unwrap_or_default();
        let skip = if rest.starts_with("\"\"\"") || rest.starts_with("'''") {
            3 + usize::from(rest[3..].starts_with('\n'))
        } else {
            1
        };
        at + skip
    }

    fn positive(&mut self, value: &Option<Spanned<i64>>, what: &str) -> Option<u64> {
        let v = value.as_ref()?;
        match u64::try_from(*v.get_ref()) {
            Ok(n) if n > 0 => Some(n),
            _ => {
                self.error(span(v), format!("{what} must be at least 1"));
                None
            }
        }
    }

    fn workflow(&mut self, raw: &RawFile, options: &Options) -> Option<Workflow> {
        let header = raw.workflow.get_ref();
        let name = header.name.get_ref().trim().to_string();
        if name.is_empty() {
            self.error(span(&header.name), "the workflow's name is empty");
        }
        let max_parallel = self
            .positive(&header.max_parallel, "max_parallel")
            .map_or(DEFAULT_MAX_PARALLEL, |n| n.min(u64::from(u32::MAX)) as u32);
        let max_output_bytes = self
            .positive(&header.max_output_bytes, "max_output_bytes")
            .map_or(DEFAULT_MAX_OUTPUT_BYTES, |n| n as usize);
        let posture = header.posture.as_ref().and_then(|p| {
            p.get_ref()
                .parse::<Posture>()
                .map_err(|e| self.error(span(p), format!("posture: {e}")))
                .ok()
        });
        let mode = header.mode.as_ref().map_or(Some(Mode::Work), |m| {
            m.get_ref()
                .parse::<Mode>()
                .map_err(|e| self.error(span(m), format!("mode: {e}")))
                .ok()
        });
        let budget = match &header.budget {
            Some(b) => Budget {
                tokens: self.positive(&b.get_ref().tokens, "budget.tokens"),
                agents: self.positive(&b.get_ref().agents, "budget.agents"),
            },
            None => Budget::default(),
        };
        let mut vars = BTreeMap::new();
        for (key, value) in &raw.vars {
            let text = match value.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                    value.get_ref().to_string()
                }
                _ => {
                    self.error(
                        span(value),
                        format!(
                            "vars.{}: a variable is a string, a number or a boolean",
                            key.get_ref()
                        ),
                    );
                    continue;
                }
            };
            vars.insert(key.get_ref().clone(), text);
        }
        vars.extend(options.vars.clone());
        if raw.steps.is_empty() {
            self.error(span(&raw.workflow), "the workflow has no [[steps]]");
        }
        let names = self.names(raw);
        let mode = mode.unwrap_or(Mode::Work);
        let cx = StepContext {
            names: &names,
            workflow_mode: mode,
            vars: &vars,
            default_cap: max_output_bytes,
            roles: options.roles.as_ref(),
        };
        let mut steps = Vec::new();
        for step in &raw.steps {
            steps.push(self.step(step.get_ref(), &cx));
        }
        let steps: Vec<Step> = steps.into_iter().collect::<Option<_>>()?;
        let mut workflow = Workflow {
            name,
            max_parallel,
            posture,
            mode,
            vars,
            steps,
            max_output_bytes,
            budget,
        };
        self.cycles(&workflow, raw);
        self.references(&mut workflow, raw);
        Some(workflow)
    }

    /// Step names by index, reporting bad and duplicate ones.
    fn names(&mut self, raw: &RawFile) -> BTreeMap<String, usize> {
        let mut names = BTreeMap::new();
        for (id, step) in raw.steps.iter().enumerate() {
            let name = &step.get_ref().name;
            if !valid_name(name.get_ref()) {
                self.error(
                    span(name),
                    format!(
                        "step name '{}' must be lowercase letters, digits, '_' and '-'",
                        name.get_ref()
                    ),
                );
            }
            if let Some(first) = names.insert(name.get_ref().clone(), id) {
                names.insert(name.get_ref().clone(), first);
                let (line, col) = self
                    .source
                    .line_col(raw.steps[first].get_ref().name.span().start);
                self.error(
                    span(name),
                    format!(
                        "duplicate step name '{}' (first defined at {line}:{col})",
                        name.get_ref()
                    ),
                );
            }
        }
        names
    }

    fn step(&mut self, raw: &RawStep, cx: &StepContext<'_>) -> Option<Step> {
        let StepContext {
            names,
            workflow_mode,
            vars,
            default_cap,
            roles,
        } = *cx;
        let name = raw.name.get_ref().clone();
        let mut ok = true;
        let mut needs = Vec::new();
        for need in raw.needs.iter().flat_map(|n| n.get_ref()) {
            match names.get(need.get_ref()) {
                Some(_) if need.get_ref() == &name => {
                    self.error(span(need), format!("step '{name}' needs itself"));
                    ok = false;
                }
                Some(&n) => {
                    if !needs.contains(&n) {
                        needs.push(n);
                    }
                }
                None => {
                    self.error(
                        span(need),
                        format!(
                            "step '{name}' needs '{}', which is not a step of this workflow",
                            need.get_ref()
                        ),
                    );
                    ok = false;
                }
            }
        }
        let prompt = self.template(&raw.prompt, vars, &name, "prompt");
        let mut scope = Vec::new();
        for glob in raw.scope.iter().flat_map(|s| s.get_ref()) {
            if let Some(t) = self.template(glob, vars, &name, "scope") {
                let literal = t.render(|_| "x".to_string());
                if let Err(e) = globset::GlobBuilder::new(&literal)
                    .literal_separator(true)
                    .build()
                {
                    self.error(span(glob), format!("step '{name}': scope: bad glob: {e}"));
                }
                scope.push(t);
            }
        }
        let output = match raw.output.as_ref().map(|o| (o, o.get_ref().as_str())) {
            None | Some((_, "text")) => OutputKind::Text,
            Some((_, "json")) => OutputKind::Json,
            Some((o, other)) => {
                self.error(
                    span(o),
                    format!("step '{name}': output must be \"text\" or \"json\", not \"{other}\""),
                );
                OutputKind::Text
            }
        };
        let output_schema = raw.output_schema.as_ref().and_then(|s| {
            let value = serde_json::to_value(s.get_ref()).ok()?;
            if output != OutputKind::Json {
                self.error(
                    span(s),
                    format!("step '{name}': output_schema needs output = \"json\""),
                );
            }
            match jsonschema::validator_for(&value) {
                Ok(_) => Some(value),
                Err(e) => {
                    self.error(
                        span(s),
                        format!("step '{name}': output_schema is not a valid JSON Schema: {e}"),
                    );
                    None
                }
            }
        });
        let mode = match &raw.mode {
            None => workflow_mode,
            Some(m) => match m.get_ref().parse::<Mode>() {
                Ok(mode) if mode.within(workflow_mode) => mode,
                Ok(mode) => {
                    self.error(
                        span(m),
                        format!(
                            "step '{name}': mode {mode} is wider than the workflow's mode {workflow_mode}"
                        ),
                    );
                    workflow_mode
                }
                Err(e) => {
                    self.error(span(m), format!("step '{name}': mode: {e}"));
                    workflow_mode
                }
            },
        };
        if let (Some(role), Some(known)) = (&raw.role, roles)
            && !known.contains(role.get_ref())
        {
            let list: Vec<&str> = known.iter().map(String::as_str).collect();
            self.error(
                span(role),
                format!(
                    "step '{name}': there is no role '{}' (configured: {})",
                    role.get_ref(),
                    if list.is_empty() {
                        "none".to_string()
                    } else {
                        list.join(", ")
                    }
                ),
            );
        }
        let check = raw.check.as_ref().and_then(|c| self.check(c, vars, &name));
        let duration = |v: &mut Self, d: &Option<Spanned<String>>, what: &str| {
            d.as_ref().and_then(|d| {
                let parsed = parse_duration(d.get_ref());
                if parsed.is_none() {
                    v.error(
                        span(d),
                        format!(
                            "step '{name}': {what} '{}' is not a duration such as 30s, 10m or 1h",
                            d.get_ref()
                        ),
                    );
                }
                parsed
            })
        };
        let timeout = duration(self, &raw.timeout, "timeout");
        let idle_timeout = duration(self, &raw.idle_timeout, "idle_timeout");
        let retries = match &raw.retries {
            None => 0,
            Some(r) => match u32::try_from(*r.get_ref()) {
                Ok(n) if n <= 10 => n,
                _ => {
                    self.error(
                        span(r),
                        format!("step '{name}': retries must be between 0 and 10"),
                    );
                    0
                }
            },
        };
        let for_each = raw
            .for_each
            .as_ref()
            .and_then(|f| self.for_each(f, &name, &needs, names));
        let fan_out = raw.for_each.is_some();
        let on_failure = match raw.on_failure.as_ref().map(|o| (o, o.get_ref().as_str())) {
            None | Some((_, "continue")) => OnFailure::Continue,
            Some((_, "fail_fast")) => OnFailure::FailFast,
            Some((o, other)) => {
                self.error(
                    span(o),
                    format!("step '{name}': on_failure must be \"continue\" or \"fail_fast\", not \"{other}\""),
                );
                OnFailure::Continue
            }
        };
        if let (false, Some(o)) = (fan_out, &raw.on_failure) {
            self.error(span(o), format!("step '{name}': on_failure needs for_each"));
        }
        let min_success = raw.min_success.as_ref().and_then(|m| {
            if !fan_out {
                self.error(
                    span(m),
                    format!("step '{name}': min_success needs for_each"),
                );
                return None;
            }
            match u32::try_from(*m.get_ref()) {
                Ok(n) => {
                    if let Some(ForEach::Literal(items)) = &for_each
                        && n as usize > items.len()
                    {
                        self.error(
                            span(m),
                            format!(
                                "step '{name}': min_success {n} is more than its {} items",
                                items.len()
                            ),
                        );
                    }
                    Some(n)
                }
                Err(_) => {
                    self.error(
                        span(m),
                        format!("step '{name}': min_success cannot be negative"),
                    );
                    None
                }
            }
        });
        let max_output_bytes = self
            .positive(&raw.max_output_bytes, "max_output_bytes")
            .map_or(default_cap, |n| n as usize);
        let isolation = match raw.isolation.as_ref().map(|i| (i, i.get_ref().as_str())) {
            None | Some((_, "none")) => Isolation::None,
            Some((_, "worktree")) => Isolation::Worktree,
            Some((i, other)) => {
                self.error(
                    span(i),
                    format!(
                        "step '{name}': isolation must be \"none\" or \"worktree\", not \"{other}\""
                    ),
                );
                Isolation::None
            }
        };
        let merge = raw.merge.as_ref().is_some_and(|m| {
            if isolation != Isolation::Worktree {
                self.error(
                    span(m),
                    format!("step '{name}': merge needs isolation = \"worktree\""),
                );
            }
            *m.get_ref()
        });
        if raw
            .role
            .as_ref()
            .is_some_and(|r| r.get_ref().trim().is_empty())
        {
            self.error(
                raw.role.as_ref().and_then(span),
                format!("step '{name}': the role is empty"),
            );
        }
        let prompt = prompt?;
        if prompt.parts.is_empty() {
            self.error(
                span(&raw.prompt),
                format!("step '{name}': the prompt is empty"),
            );
        }
        ok.then_some(Step {
            name,
            needs,
            prompt,
            for_each,
            output,
            output_schema,
            mode,
            role: raw.role.as_ref().map(|r| r.get_ref().clone()),
            model: raw.model.as_ref().map(|m| m.get_ref().clone()),
            scope,
            check,
            timeout,
            idle_timeout,
            retries,
            on_failure,
            min_success,
            max_output_bytes,
            isolation,
            merge,
        })
    }

    /// Parses a template; unknown variables and malformed references are
    /// reported here, step references once the graph is known.
    fn template(
        &mut self,
        text: &Spanned<String>,
        vars: &BTreeMap<String, String>,
        step: &str,
        field: &str,
    ) -> Option<Template> {
        let start = self.content_start(text);
        match Template::parse(text.get_ref()) {
            Ok(t) => {
                for (r, range) in t.refs() {
                    if let Ref::Var(name) = r
                        && !vars.contains_key(name)
                    {
                        self.error(
                            Some(start + range.start..start + range.end),
                            format!("step '{step}': {field}: {r} is not declared in [vars] (or given with --var)"),
                        );
                    }
                }
                Some(t)
            }
            Err(bad) => {
                for b in bad {
                    self.error(
                        Some(start + b.range.start..start + b.range.end),
                        format!("step '{step}': {field}: {}", b.message),
                    );
                }
                None
            }
        }
    }

    /// A check: a command (a template: its references are checked here,
    /// the steps' and the fan-out's once the graph is known) or the
    /// verifier.
    fn check(
        &mut self,
        check: &Spanned<toml::Value>,
        vars: &BTreeMap<String, String>,
        name: &str,
    ) -> Option<Check> {
        match check.get_ref() {
            toml::Value::String(command) if !command.trim().is_empty() => {
                let text = Spanned::new(check.span(), command.clone());
                self.template(&text, vars, name, "check")?;
                Some(Check::Command(command.clone()))
            }
            toml::Value::Table(t)
                if t.get("verifier") == Some(&toml::Value::Boolean(true)) && t.len() == 1 =>
            {
                Some(Check::Verifier)
            }
            _ => {
                self.error(
                    span(check),
                    format!("step '{name}': check must be a command (a non-empty string) or {{ verifier = true }}"),
                );
                None
            }
        }
    }

    fn for_each(
        &mut self,
        f: &Spanned<toml::Value>,
        name: &str,
        needs: &[usize],
        names: &BTreeMap<String, usize>,
    ) -> Option<ForEach> {
        match f.get_ref() {
            toml::Value::Array(items) => {
                if items.is_empty() {
                    self.error(span(f), format!("step '{name}': for_each is an empty list"));
                }
                items
                    .iter()
                    .map(|i| serde_json::to_value(i).ok())
                    .collect::<Option<Vec<_>>>()
                    .map(ForEach::Literal)
            }
            toml::Value::String(text) => {
                let single = Template::parse(text)
                    .ok()
                    .and_then(|t| t.single_ref().cloned());
                match single {
                    Some(Ref::Output(step)) => match names.get(&step) {
                        Some(id) if needs.contains(id) => Some(ForEach::Output(*id)),
                        Some(_) => {
                            self.error(
                                span(f),
                                format!("step '{name}': for_each reads step '{step}', which is not in its needs"),
                            );
                            None
                        }
                        None => {
                            self.error(span(f), format!("step '{name}': for_each reads '{step}', which is not a step of this workflow"));
                            None
                        }
                    },
                    _ => {
                        self.error(
                            span(f),
                            format!(
                                "step '{name}': for_each must be a list or exactly \"{{{{steps.NAME.output}}}}\" of a step it needs, not {text:?}"
                            ),
                        );
                        None
                    }
                }
            }
            other => {
                self.error(
                    span(f),
                    format!(
                        "step '{name}': for_each must be a list, not a {}",
                        other.type_str()
                    ),
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests;
