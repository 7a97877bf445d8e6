use cadre_runtime::goal::Verdict;
use pretty_assertions::assert_eq;

use super::{outcome, verifier_request};

fn check(verdict: Verdict, expected: (bool, &str)) {
    assert_eq!(outcome(&verdict), (expected.0, expected.1.to_string()));
}

#[test]
fn only_a_pass_verifies_and_a_failure_names_the_gaps() {
    check(Verdict::Pass, (true, "the verifier: PASS"));
    check(
        Verdict::Fail(vec!["no test for b".into(), "a.rs unchanged".into()]),
        (false, "the verifier: FAIL: no test for b; a.rs unchanged"),
    );
    check(
        Verdict::Partial(vec![]),
        (false, "the verifier: PARTIAL: no gaps named"),
    );
    check(
        Verdict::Unparseable,
        (
            false,
            "the verifier's answer did not end with a VERDICT line",
        ),
    );
    check(
        Verdict::Unavailable("HTTP 500".into()),
        (false, "the verifier could not judge: HTTP 500"),
    );
}

#[test]
fn the_request_carries_the_task_the_claim_and_the_calls() {
    let request = verifier_request(
        " Write a.txt ",
        "Done.",
        &[
            "write_file a.txt → ok".into(),
            "bash `cat a.txt` → ok".into(),
        ],
    );
    assert_eq!(
        request,
        "A workflow step was given this task:\nWrite a.txt\n\nIts answer (the claim):\nDone.\n\n\
         The tool calls it actually made (the evidence):\n- write_file a.txt → ok\n- bash `cat \
         a.txt` → ok\n\nVerify the answer against the task and the workspace and answer with GAP \
         lines and a last line VERDICT: PASS, FAIL or PARTIAL."
    );
    let none = verifier_request("x", " ", &[]);
    assert!(
        none.contains("(no answer given)") && none.contains("(no tool calls)"),
        "{none}"
    );
    let many: Vec<String> = (0..70).map(|i| format!("read_file f{i} → ok")).collect();
    let long = verifier_request("x", "y", &many);
    assert!(
        long.contains("(10 earlier calls not shown)\n- read_file f10 → ok"),
        "{long}"
    );
    assert!(!long.contains("f9 →"), "{long}");
}
