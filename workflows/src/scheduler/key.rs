//! Instance keys (W10): a finished instance is found again by its step,
//! its item, its rendered prompt and scope, the step's settings, and the
//! outputs of the steps it needs. Editing a step (or anything it builds
//! on) changes the key, so it and its dependents run again; nothing else
//! does.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::model::{Check, Isolation, OutputKind, Step};

/// The key of one instance: SHA-256 over everything that decides its work.
pub fn instance_key(
    step: &Step,
    item: Option<&Value>,
    prompt: &str,
    scope: &[String],
    upstream: &[String],
) -> String {
    let mut settings = json!({
        "step": step.name,
        "item": item,
        "prompt": prompt,
        "scope": scope,
        "mode": step.mode.as_str(),
        "role": step.role,
        "model": step.model,
        "output": match step.output { OutputKind::Text => "text", OutputKind::Json => "json" },
        "output_schema": step.output_schema,
        "check": step.check.as_ref().map(|c| match c {
            Check::Command(command) => command.clone(),
            Check::Verifier => "{verifier}".to_string(),
        }),
        "upstream": upstream,
    });
    // Only a worktree step's key says where it ran, so the keys of runs
    // stored before worktrees existed still match.
    if step.isolation == Isolation::Worktree {
        settings["isolation"] = json!({"worktree": true, "merge": step.merge});
    }
    let digest = Sha256::digest(settings.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
