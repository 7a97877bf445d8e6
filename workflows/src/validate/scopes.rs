//! Overlapping write scopes (W12): two steps that may run at the same time
//! and may write the same files are warned about at validation; the gate
//! still holds each step to its own scope when it runs.
//!
//! Two globs may overlap when the literal part before the first wildcard
//! (or template reference) of one is a prefix of the other's; two globs
//! with no wildcard overlap only when equal. A step without a scope is not
//! compared: it writes whatever its caller may, and says so by having none.

use crate::diagnostic::Diagnostic;
use crate::format::RawFile;
use crate::model::Workflow;
use crate::template::{Part, Template};
use cadre_runtime::Mode;

/// The literal prefix of a scope glob, and whether that is all of it.
fn prefix(t: &Template) -> (String, bool) {
    let mut out = String::new();
    for part in &t.parts {
        match part {
            Part::Text(text) => match text.find(['*', '?', '[', '{']) {
                Some(at) => {
                    out.push_str(&text[..at]);
                    return (out, false);
                }
                None => out.push_str(text),
            },
            Part::Ref(..) => return (out, false),
        }
    }
    (out, true)
}

fn overlap(a: &Template, b: &Template) -> bool {
    let ((pa, whole_a), (pb, whole_b)) = (prefix(a), prefix(b));
    match (whole_a, whole_b) {
        (true, true) => pa == pb,
        (true, false) => pa.starts_with(&pb),
        (false, true) => pb.starts_with(&pa),
        (false, false) => pa.starts_with(&pb) || pb.starts_with(&pa),
    }
}

/// Whether every instance of a fan-out step gets a scope of its own.
fn per_item(t: &Template) -> bool {
    t.parts.iter().any(|p| matches!(p, Part::Ref(..)))
}

/// Warnings for steps (and instances of one fan-out step) that may run at
/// once with overlapping write scopes.
pub(super) fn overlaps(w: &Workflow, raw: &RawFile) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    let writes = |s: usize| w.steps[s].mode != Mode::Plan && !w.steps[s].scope.is_empty();
    let at = |s: usize| raw.steps[s].get_ref().scope.as_ref().map(|x| x.span());
    for a in (0..w.steps.len()).filter(|&a| writes(a)) {
        let step = &w.steps[a];
        if step.for_each.is_some() && step.scope.iter().any(|t| !per_item(t)) {
            warnings.push(Diagnostic::warning(
                at(a),
                format!(
                    "step '{}': its items run in parallel and share a scope with no {{{{item}}}} in it; they may write the same files",
                    step.name
                ),
            ));
        }
        for b in (a + 1..w.steps.len()).filter(|&b| writes(b)) {
            if w.depends_on(a, b) || w.depends_on(b, a) {
                continue;
            }
            let other = &w.steps[b];
            if step
                .scope
                .iter()
                .any(|x| other.scope.iter().any(|y| overlap(x, y)))
            {
                warnings.push(Diagnostic::warning(
                    at(b),
                    format!(
                        "steps '{}' and '{}' may run at the same time and their scopes overlap; each is held to its own scope, but they may write the same files",
                        step.name, other.name
                    ),
                ));
            }
        }
    }
    warnings
}
