use pretty_assertions::assert_eq;

use super::*;

fn source(text: &str) -> Source {
    Source::file("wf.toml", text)
}

/// Validates `text` and compares every finding as printed (or `ok`).
fn check(text: &str, expected: &[&str]) {
    let options = Options {
        roles: Some(["planner".to_string()].into_iter().collect()),
        ..Options::default()
    };
    let found: Vec<String> = match validate(&source(text), &options) {
        Ok(v) => v.warnings.iter().map(|w| source(text).render(w)).collect(),
        Err(invalid) => invalid.render().lines().map(str::to_string).collect(),
    };
    assert_eq!(found, expected, "for:\n{text}");
}

const HEAD: &str = "[workflow]\nname = \"t\"\n";

#[test]
fn a_valid_workflow_has_no_findings() {
    check(
        &format!(
            "{HEAD}[vars]\ntarget = \"src\"\n\n[[steps]]\nname = \"list\"\nprompt = \"List {{{{vars.target}}}}\"\noutput = \"json\"\nmode = \"plan\"\nrole = \"planner\"\n\n[[steps]]\nname = \"review\"\nneeds = [\"list\"]\nfor_each = \"{{{{steps.list.output}}}}\"\nprompt = \"Review {{{{item}}}} ({{{{index}}}}): {{{{steps.list.output}}}}\"\nscope = [\"{{{{item}}}}\"]\ncheck = \"true\"\ntimeout = \"10m\"\nretries = 1\n\n[[steps]]\nname = \"summary\"\nneeds = [\"review\"]\nprompt = \"Summarize {{{{steps.review.outputs}}}}\"\n"
        ),
        &[],
    );
}

#[test]
fn each_invalid_case_is_reported_at_its_place() {
    // Unknown dependency.
    check(
        &format!("{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\nneeds = [\"b\"]\n"),
        &["wf.toml:6:10: step 'a' needs 'b', which is not a step of this workflow"],
    );
    // Duplicate names.
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\n[[steps]]\nname = \"a\"\nprompt = \"y\"\n"
        ),
        &["wf.toml:7:8: duplicate step name 'a' (first defined at 4:8)"],
    );
    // A cycle, with its path.
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\nneeds = [\"c\"]\n[[steps]]\nname = \"b\"\nprompt = \"x\"\nneeds = [\"a\"]\n[[steps]]\nname = \"c\"\nprompt = \"x\"\nneeds = [\"b\"]\n"
        ),
        &["wf.toml:6:9: cycle in needs: a → c → b → a"],
    );
    // Bad template references.
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"a\"\nprompt = \"use {{{{vars.nope}}}} and {{{{steps.zz.output}}}} and {{{{item}}}}\"\n"
        ),
        &[
            "wf.toml:5:15: step 'a': prompt: {{vars.nope}} is not declared in [vars] (or given with --var)",
            "wf.toml:5:33: step 'a': prompt: {{steps.zz.output}}: there is no step 'zz'",
            "wf.toml:5:57: step 'a': prompt: {{item}} is only available in a step with for_each",
        ],
    );
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"a\"\nprompt = \"use {{{{steps.zz.output}}}} and {{{{item}}}} {{{{bogus}}}}\"\n"
        ),
        &[
            "wf.toml:5:48: step 'a': prompt: `{{bogus}}` is not a reference; expected vars.NAME, item, index, steps.NAME.output or steps.NAME.outputs",
        ],
    );
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"a\"\nprompt = \"use {{{{steps.zz.output}}}} and {{{{item}}}}\"\n[[steps]]\nname = \"b\"\nprompt = \"{{{{steps.a.output}}}}\"\n"
        ),
        &[
            "wf.toml:5:15: step 'a': prompt: {{steps.zz.output}}: there is no step 'zz'",
            "wf.toml:5:39: step 'a': prompt: {{item}} is only available in a step with for_each",
            "wf.toml:8:11: step 'b': prompt: {{steps.a.output}}: step 'a' is not in the needs of 'b' (directly or through another step)",
        ],
    );
    // Unknown role.
    check(
        &format!("{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\nrole = \"wizard\"\n"),
        &["wf.toml:6:8: step 'a': there is no role 'wizard' (configured: planner)"],
    );
    // for_each over a non-list.
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\n[[steps]]\nname = \"b\"\nneeds = [\"a\"]\nfor_each = \"{{{{steps.a.output}}}}\"\nprompt = \"{{{{item}}}}\"\n"
        ),
        &[
            "wf.toml:9:12: step 'b': for_each over step 'a', which does not answer a JSON list (give it output = \"json\")",
        ],
    );
    check(
        &format!("{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\nfor_each = 3\n"),
        &["wf.toml:6:12: step 'a': for_each must be a list, not a integer"],
    );
    // A mode wider than allowed.
    check(
        "[workflow]\nname = \"t\"\nmode = \"plan\"\n[[steps]]\nname = \"a\"\nprompt = \"x\"\nmode = \"work\"\n",
        &["wf.toml:7:8: step 'a': mode work is wider than the workflow's mode plan"],
    );
}

#[test]
fn syntax_errors_and_unknown_keys_have_places() {
    check(
        &format!("{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\nneeds = \"a\"\nfoo = 1\n"),
        &[
            "wf.toml:7:1: unknown field `foo`, expected one of `name`, `prompt`, `needs`, `for_each`, `output`, `output_schema`, `mode`, `role`, `model`, `scope`, `check`, `timeout`, `idle_timeout`, `retries`, `on_failure`, `min_success`, `max_output_bytes`, `isolation`, `merge`",
            "wf.toml:6:9: invalid type: string \"a\", expected a sequence",
        ],
    );
    check(
        "[workflow\nname = 1\n",
        &["wf.toml:1:10: unclosed table, expected `]`"],
    );
    check(
        "[[steps]]\nname = \"a\"\nprompt = \"x\"\n",
        &["wf.toml:1:1: missing field `workflow`"],
    );
}

#[test]
fn step_fields_are_checked() {
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"Bad Name\"\nprompt = \"x\"\noutput = \"yaml\"\ntimeout = \"soon\"\nretries = 99\nmin_success = 1\ncheck = {{ verifier = false }}\n"
        ),
        &[
            "wf.toml:4:8: step name 'Bad Name' must be lowercase letters, digits, '_' and '-'",
            "wf.toml:6:10: step 'Bad Name': output must be \"text\" or \"json\", not \"yaml\"",
            "wf.toml:7:11: step 'Bad Name': timeout 'soon' is not a duration such as 30s, 10m or 1h",
            "wf.toml:8:11: step 'Bad Name': retries must be between 0 and 10",
            "wf.toml:9:15: step 'Bad Name': min_success needs for_each",
            "wf.toml:10:9: step 'Bad Name': check must be a command (a non-empty string) or { verifier = true }",
        ],
    );
}

#[test]
fn overlapping_scopes_of_parallel_steps_are_warned() {
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\nscope = [\"src/**\"]\n[[steps]]\nname = \"b\"\nprompt = \"x\"\nscope = [\"src/lib.rs\"]\n[[steps]]\nname = \"c\"\nprompt = \"x\"\nneeds = [\"a\"]\nscope = [\"src/**\"]\n[[steps]]\nname = \"d\"\nprompt = \"x\"\nscope = [\"docs/**\"]\n"
        ),
        &[
            "wf.toml:10:9: warning: steps 'a' and 'b' may run at the same time and their scopes overlap; each is held to its own scope, but they may write the same files",
            "wf.toml:15:9: warning: steps 'b' and 'c' may run at the same time and their scopes overlap; each is held to its own scope, but they may write the same files",
        ],
    );
}

#[test]
fn variables_are_overridden_and_durations_parse() {
    let text = format!(
        "{HEAD}[vars]\nx = \"a\"\nn = 3\n[[steps]]\nname = \"s\"\nprompt = \"{{{{vars.x}}}}{{{{vars.y}}}}\"\n"
    );
    let options = Options {
        vars: [("y".to_string(), "b".to_string())].into_iter().collect(),
        roles: None,
    };
    let v = validate(&source(&text), &options).expect("valid");
    assert_eq!(v.workflow.vars.get("n").map(String::as_str), Some("3"));
    assert_eq!(v.workflow.vars.get("y").map(String::as_str), Some("b"));
    assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
    assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
    assert_eq!(parse_duration("0s"), None);
    assert_eq!(parse_duration("m"), None);
}

#[test]
fn a_json_plan_validates_like_a_file_without_positions() {
    let plan = serde_json::json!({
        "workflow": {"name": "op", "max_parallel": 2},
        "steps": [
            {"name": "a", "prompt": "A", "scope": ["src/a.rs"], "check": "true"},
            {"name": "b", "prompt": "B", "needs": ["zz"], "mode": null}
        ]
    });
    let text = crate::format::json_to_toml(&plan).expect("renders");
    let source = Source {
        name: "workflow".into(),
        text,
        positions: false,
    };
    let err = validate(&source, &Options::default()).expect_err("unknown dependency");
    assert_eq!(
        err.render(),
        "workflow: step 'b' needs 'zz', which is not a step of this workflow"
    );
    assert!(crate::format::json_to_toml(&serde_json::json!([1])).is_err());
}

#[test]
fn a_verifier_check_validates() {
    check(
        &format!("{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\ncheck = {{ verifier = true }}\n"),
        &[],
    );
    let text =
        format!("{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\ncheck = {{ verifier = true }}\n");
    let workflow = validate(&source(&text), &Options::default()).map(|v| v.workflow);
    assert_eq!(
        workflow.ok().and_then(|w| w.steps[0].check.clone()),
        Some(crate::model::Check::Verifier)
    );
}

#[test]
fn an_operate_plan_may_ask_for_a_verifier_and_a_merged_worktree() {
    let plan = serde_json::json!({
        "workflow": {"name": "op"},
        "steps": [{
            "name": "a",
            "prompt": "x",
            "check": {"verifier": true},
            "isolation": "worktree",
            "merge": true
        }]
    });
    let text = crate::format::json_to_toml(&plan).expect("toml");
    let step = validate(&source(&text), &Options::default())
        .map(|v| v.workflow.steps[0].clone())
        .unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(
        (step.check, step.isolation, step.merge),
        (
            Some(crate::model::Check::Verifier),
            crate::model::Isolation::Worktree,
            true
        )
    );
}

#[test]
fn a_check_reports_the_references_it_cannot_render_at_their_place() {
    // An unknown variable, and a fan-out's reference in a single step.
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\ncheck = \"test -f {{{{vars.nope}}}} && echo {{{{item}}}} {{{{index}}}}\"\n"
        ),
        &[
            "wf.toml:6:18: step 'a': check: {{vars.nope}} is not declared in [vars] (or given with --var)",
            "wf.toml:6:40: step 'a': check: {{item}} is only available in a step with for_each",
            "wf.toml:6:49: step 'a': check: {{index}} is only available in a step with for_each",
        ],
    );
    // A step's output is the model's text: never part of a command.
    check(
        &format!(
            "{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\n[[steps]]\nname = \"b\"\nneeds = [\"a\"]\nprompt = \"y\"\ncheck = '''grep {{{{steps.a.output}}}} f'''\n"
        ),
        &[
            "wf.toml:10:17: step 'b': check: {{steps.a.output}} cannot be used in a check (a step's output is the model's text; a check renders only {{item}}, {{index}} and {{vars.NAME}})",
        ],
    );
    // A malformed reference.
    check(
        &format!("{HEAD}[[steps]]\nname = \"a\"\nprompt = \"x\"\ncheck = \"test {{{{itm}}}}\"\n"),
        &[
            "wf.toml:6:15: step 'a': check: `{{itm}}` is not a reference; expected vars.NAME, item, index, steps.NAME.output or steps.NAME.outputs",
        ],
    );
    // What a check may use, in a fan-out.
    check(
        &format!(
            "{HEAD}[vars]\nwho = \"x\"\n[[steps]]\nname = \"a\"\nfor_each = [\"p\"]\nprompt = \"{{{{item}}}}\"\ncheck = \"test -f {{{{item}}}} && test {{{{index}}}} = 0 && echo {{{{vars.who}}}}\"\n"
        ),
        &[],
    );
}

#[test]
fn every_unknown_key_is_reported_and_the_rest_still_validated() {
    let step_keys = "`name`, `prompt`, `needs`, `for_each`, `output`, `output_schema`, `mode`, `role`, `model`, `scope`, `check`, `timeout`, `idle_timeout`, `retries`, `on_failure`, `min_success`, `max_output_bytes`, `isolation`, `merge`";
    check(
        "[workflow]\nname = \"t\"\ncolour = \"red\"\nbudget = { tokens = 5, coins = 2 }\n\n[[steps]]\nname = \"a\"\nprompt = \"x\"\nneeds = [\"b\"]\nflavour = { deep = [1, 2] }\n\n[[steps]]\nname = \"b\"\nprompt = \"y\"\nneeds = [\"a\"]\nwat = \"\"\"\nmany\nlines\n\"\"\"\n",
        &[
            "wf.toml:3:1: unknown field `colour`, expected one of `name`, `max_parallel`, `posture`, `mode`, `max_output_bytes`, `budget`",
            "wf.toml:4:24: unknown field `coins`, expected one of `tokens`, `agents`",
            "wf.toml:9:9: cycle in needs: a → b → a",
            &format!("wf.toml:10:1: unknown field `flavour`, expected one of {step_keys}"),
            &format!("wf.toml:16:1: unknown field `wat`, expected one of {step_keys}"),
        ],
    );
    // An unknown table cannot be set aside in place: what was found is
    // reported, and reading stops.
    check(
        "[workflow]\nname = \"t\"\n[workflow.extra]\na = 1\n[[steps]]\nname = \"a\"\nprompt = \"x\"\nzz = 1\n",
        &[
            "wf.toml:3:11: unknown field `extra`, expected one of `name`, `max_parallel`, `posture`, `mode`, `max_output_bytes`, `budget`",
            &format!("wf.toml:8:1: unknown field `zz`, expected one of {step_keys}"),
        ],
    );
}
