//! The registry: order, duplicates, schemas, allow-lists.

use pretty_assertions::assert_eq;

use super::*;

fn names<'a>(defs: impl Iterator<Item = &'a ToolDefinition>) -> Vec<String> {
    defs.map(|d| d.name.clone()).collect()
}

#[test]
fn registry_keeps_registration_order() {
    let registry = registry_of([
        Fake::new("zeta", Act::Echo).arc(),
        Fake::new("alpha", Act::Echo).arc(),
        Fake::new("mid", Act::Echo).arc(),
    ]);
    assert_eq!(names(registry.definitions()), ["zeta", "alpha", "mid"]);
    assert_eq!(names(ToolRegistry::with_builtins().definitions()), BUILTINS);
}

#[test]
fn registry_refuses_a_duplicate_name_and_keeps_the_first() {
    let mut registry = registry_of([Fake::new("alpha", Act::Echo).arc()]);
    let refused = registry.register(Fake::new("alpha", Act::Panic).arc());
    assert!(
        matches!(&refused, Err(RegistryError::Duplicate(name)) if name == "alpha"),
        "{refused:?}"
    );
    assert_eq!(names(registry.definitions()), ["alpha"]);
}

#[test]
fn registry_refuses_a_schema_that_does_not_compile() {
    let mut registry = ToolRegistry::new();
    let bad = Fake::new("bad", Act::Echo).with(|mut d| {
        d.input_schema = json!({"type": "no-such-type"});
        d
    });
    let refused = registry.register(bad.arc());
    assert!(
        matches!(&refused, Err(RegistryError::BadSchema { name, .. }) if name == "bad"),
        "{refused:?}"
    );
    assert!(registry.is_empty());
}

#[test]
fn allow_list_keeps_listed_tools_in_registry_order_plus_system_tools() {
    let registry = registry_of([
        Fake::new("a", Act::Echo).arc(),
        Fake::new("sys", Act::Echo)
            .with(ToolDefinition::as_system)
            .arc(),
        Fake::new("b", Act::Echo).arc(),
        Fake::new("c", Act::Echo).arc(),
    ]);
    let check = |allow: Option<&[&str]>, expected: &[&str]| {
        let allow: Option<Vec<String>> = allow.map(|l| l.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            names(registry.allowed(allow.as_deref())),
            expected,
            "{allow:?}"
        );
    };
    check(None, &["a", "sys", "b", "c"]);
    check(Some(&["c", "a"]), &["a", "sys", "c"]);
    check(Some(&["unknown"]), &["sys"]);
    check(Some(&[]), &["sys"]);
}
