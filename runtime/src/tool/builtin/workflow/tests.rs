use serde_json::{Value, json};

use super::Workflow;
use crate::tool::definition::Tool;

/// Whether the tool's schema accepts a plan whose one step has `extra`.
fn check(extra: Value, accepted: bool) {
    let tool = Workflow::new();
    let validator = jsonschema::validator_for(&tool.definition().input_schema).expect("schema");
    let mut step = json!({"name": "a", "prompt": "x"});
    for (k, v) in extra.as_object().expect("object") {
        step[k] = v.clone();
    }
    let plan = json!({"workflow": {"name": "w"}, "steps": [step]});
    assert_eq!(validator.is_valid(&plan), accepted, "{plan}");
}

#[test]
fn a_step_checks_by_command_or_verifier_and_may_run_in_a_worktree() {
    check(json!({"check": "cargo test"}), true);
    check(json!({"check": {"verifier": true}}), true);
    check(json!({"check": {"verifier": false}}), false);
    check(json!({"check": {"verifier": true, "command": "x"}}), false);
    check(json!({"isolation": "worktree", "merge": true}), true);
    check(json!({"isolation": "container"}), false);
}
