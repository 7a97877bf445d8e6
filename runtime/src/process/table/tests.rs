use pretty_assertions::assert_eq;

use super::*;

const LIMITS: ProcessLimits = ProcessLimits {
    per_agent: 2,
    per_session: 3,
    output_bytes: 64,
};

/// Admits each (owner, ends_first) in turn and returns the outcomes.
fn check(steps: &[(&str, Option<u64>)], expected: &[Result<u64, LimitError>]) {
    let mut table = Table::default();
    let mut got = Vec::new();
    for (owner, end) in steps {
        if let Some(id) = end {
            table.ended(*id, State::Exited(Some(0)));
        }
        got.push(table.admit(owner, "sleep 1", LIMITS));
    }
    assert_eq!(got, expected);
}

#[test]
fn an_agent_runs_at_most_its_bound() {
    check(
        &[("a", None), ("a", None), ("a", None), ("b", None)],
        &[Ok(1), Ok(2), Err(LimitError::Agent(2)), Ok(3)],
    );
}

#[test]
fn the_session_runs_at_most_its_bound() {
    check(
        &[("a", None), ("b", None), ("c", None), ("d", None)],
        &[Ok(1), Ok(2), Ok(3), Err(LimitError::Session(3))],
    );
}

#[test]
fn an_ended_process_frees_its_place() {
    check(
        &[("a", None), ("a", None), ("a", Some(1))],
        &[Ok(1), Ok(2), Ok(3)],
    );
}

#[test]
fn the_first_end_stays() {
    let mut table = Table::default();
    let id = table.admit("a", "x", LIMITS).expect("admitted");
    table.ended(id, State::Stopped);
    table.ended(id, State::Exited(Some(0)));
    assert_eq!(table.get(id).map(|e| e.state), Some(State::Stopped));
    assert_eq!(table.running(None), Vec::<u64>::new());
}

#[test]
fn running_by_owner() {
    let mut table = Table::default();
    for owner in ["s", "s/1", "s", "s/1.1"] {
        table
            .admit(owner, "x", ProcessLimits::default())
            .expect("admitted");
    }
    assert_eq!(table.running(Some("s")), vec![1, 3]);
    assert_eq!(table.running(None), vec![1, 2, 3, 4]);
}

#[test]
fn names() {
    assert_eq!(name(7), "p7");
    assert_eq!(parse_name("p7"), Some(7));
    assert_eq!(parse_name(" 7 "), Some(7));
    assert_eq!(parse_name("q7"), None);
}
