use std::path::{Path, PathBuf};

use super::*;

/// The places `takes` successive attempts in `/ws/proj` get, with
/// `local` slots here and `nodes` (name, slots, roots served).
fn check(local: u32, nodes: &[(&str, u32, &str)], takes: usize, expected: &[Option<&str>]) {
    let mut places = Places::new(local);
    for (name, slots, root) in nodes {
        places.join(name, *slots, vec![PathBuf::from(root)]);
    }
    let got: Vec<Option<String>> = (0..takes)
        .map(|_| {
            places.take(Path::new("/ws/proj")).map(|p| match p {
                Place::Local => "local".to_string(),
                Place::Node(name) => name,
            })
        })
        .collect();
    let expected: Vec<Option<String>> = expected.iter().map(|e| e.map(str::to_string)).collect();
    assert_eq!(got, expected);
}

#[test]
fn steps_go_where_most_slots_are_free_and_wait_when_every_node_is_full() {
    check(
        0,
        &[("a", 2, "/ws"), ("b", 2, "/ws")],
        5,
        &[Some("a"), Some("b"), Some("a"), Some("b"), None],
    );
    check(
        0,
        &[("a", 1, "/ws"), ("b", 3, "/ws")],
        5,
        &[Some("b"), Some("b"), Some("a"), Some("b"), None],
    );
}

#[test]
fn the_coordinator_takes_its_own_slots_first_on_a_tie() {
    check(1, &[("a", 1, "/ws")], 3, &[Some("local"), Some("a"), None]);
}

#[test]
fn without_a_live_node_serving_the_workspace_steps_run_here() {
    check(0, &[], 3, &[Some("local"), Some("local"), Some("local")]);
    check(0, &[("a", 4, "/other")], 2, &[Some("local"), Some("local")]);
}

#[test]
fn a_released_slot_is_taken_again_and_a_lost_node_is_never_chosen() {
    let mut places = Places::new(0);
    places.join("a", 1, vec![PathBuf::from("/ws")]);
    places.join("b", 1, vec![PathBuf::from("/ws")]);
    let ws = Path::new("/ws");
    assert_eq!(places.take(ws), Some(Place::Node("a".into())));
    assert_eq!(places.take(ws), Some(Place::Node("b".into())));
    assert_eq!(places.take(ws), None);
    places.release(&Place::Node("a".into()));
    assert_eq!(places.take(ws), Some(Place::Node("a".into())));
    places.lose("a");
    // A release for the lost node's attempt changes nothing.
    places.release(&Place::Node("a".into()));
    assert_eq!(places.take(ws), None, "b is still full");
    places.release(&Place::Node("b".into()));
    assert_eq!(places.take(ws), Some(Place::Node("b".into())));
    assert_eq!(places.placed().get("a"), Some(&2));
}

#[test]
fn an_attempt_that_must_run_here_takes_only_local_slots() {
    let mut places = Places::new(1);
    places.join("a", 4, vec![PathBuf::from("/ws")]);
    assert_eq!(places.take_local(), Some(Place::Local));
    // The one local slot is taken: it waits, though the node has four.
    assert_eq!(places.take_local(), None);
    places.release(&Place::Local);
    assert_eq!(places.take_local(), Some(Place::Local));
    // With no local slots at all it runs here anyway: nowhere else can.
    let mut none_here = Places::new(0);
    none_here.join("a", 4, vec![PathBuf::from("/ws")]);
    assert_eq!(none_here.take_local(), Some(Place::Local));
    assert_eq!(none_here.take_local(), Some(Place::Local));
}
