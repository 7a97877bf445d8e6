use super::*;

/// Parses `text` and prints it back as `text|{ref}|text`, or the errors.
fn check(text: &str, expected: &str) {
    let shown = match Template::parse(text) {
        Ok(t) => t
            .parts
            .iter()
            .map(|p| match p {
                Part::Text(s) => s.clone(),
                Part::Ref(r, range) => format!("<{r}@{}..{}>", range.start, range.end),
            })
            .collect::<Vec<_>>()
            .join("|"),
        Err(bad) => bad
            .iter()
            .map(|b| format!("error@{}..{}: {}", b.range.start, b.range.end, b.message))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    assert_eq!(shown, expected, "for {text:?}");
}

#[test]
fn references_parse_with_their_places() {
    check("plain", "plain");
    check("Review {{item}} now", "Review |<{{item}}@7..15>| now");
    check("{{ vars.target }}", "<{{vars.target}}@0..17>");
    check(
        "{{steps.list.output}}{{index}}",
        "<{{steps.list.output}}@0..21>|<{{index}}@21..30>",
    );
    check(
        "x {{steps.review.outputs}}",
        "x |<{{steps.review.outputs}}@2..26>",
    );
}

#[test]
fn bad_references_are_all_reported() {
    check(
        "{{nope}} and {{steps.a.result}}",
        "error@0..8: `{{nope}}` is not a reference; expected vars.NAME, item, index, steps.NAME.output or steps.NAME.outputs\n\
         error@13..31: `{{steps.a.result}}`: a step has `output` (its answer) or `outputs` (a fan-out's answers), not `result`",
    );
    check("open {{item", "error@5..11: `{{` is never closed with `}}`");
    check(
        "{{}}",
        "error@0..4: `{{}}` names nothing; expected vars.NAME, item, index, steps.NAME.output or steps.NAME.outputs",
    );
}

#[test]
fn rendering_replaces_every_reference() {
    let t = Template::parse("a {{item}} b {{vars.x}}").expect("parses");
    let out = t.render(|r| match r {
        Ref::Item => "I".into(),
        Ref::Var(name) => format!("V({name})"),
        other => panic!("unexpected {other}"),
    });
    assert_eq!(out, "a I b V(x)");
    assert_eq!(
        Template::parse("{{steps.a.output}}")
            .expect("parses")
            .single_ref(),
        Some(&Ref::Output("a".into()))
    );
    assert_eq!(
        Template::parse(" {{item}}").expect("parses").single_ref(),
        None
    );
}

#[test]
fn distinct_variables_get_distinct_check_variables() {
    let names = var_env_names(["x", "a-b", "a_b", "A_B", "A_B_2", "ünï"]);
    assert_eq!(names["x"], "CADRE_VAR_X");
    assert_eq!(names["A_B"], "CADRE_VAR_A_B");
    assert_eq!(names["A_B_2"], "CADRE_VAR_A_B_2");
    assert_eq!(names["a-b"], "CADRE_VAR_A_B_3");
    assert_eq!(names["a_b"], "CADRE_VAR_A_B_4");
    assert_eq!(names["ünï"], "CADRE_VAR__N_");
    let distinct: std::collections::BTreeSet<_> = names.values().collect();
    assert_eq!(distinct.len(), names.len());
}

#[test]
fn a_check_renders_each_reference_as_its_variable() {
    let t = Template::parse("test -f \"src/{{item}}.rs\" && echo {{vars.x}} '{{index}}'")
        .expect("parses");
    let out = t.render_shell(|r| match r {
        Ref::Item => ITEM_VAR.into(),
        Ref::Index => INDEX_VAR.into(),
        Ref::Var(name) => format!("V_{name}"),
        other => panic!("unexpected {other}"),
    });
    assert_eq!(
        out,
        "test -f \"src/${CADRE_ITEM}.rs\" && echo \"${V_x}\" ''\"${CADRE_INDEX}\"''"
    );
}
