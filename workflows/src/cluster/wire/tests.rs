use pretty_assertions::assert_eq;

use super::{AgentEnd, Outbound, StartRefusal};

#[test]
fn a_start_refusal_crosses_the_wire_whole_and_reads_as_before() {
    let check = |refusal: StartRefusal, json: &str, text: &str| {
        let bytes = serde_json::to_string(&refusal).expect("serialized");
        assert_eq!(bytes, json);
        let back: StartRefusal = serde_json::from_str(&bytes).expect("deserialized");
        assert_eq!(back.to_string(), text);
        assert_eq!(back, refusal);
    };
    check(
        StartRefusal::Full { node: "n1".into() },
        r#"{"kind":"full","node":"n1"}"#,
        "node n1 is full",
    );
    check(
        StartRefusal::AlreadyRunning { attempt: 3 },
        r#"{"kind":"already_running","attempt":3}"#,
        "attempt 3 already runs here",
    );
    check(
        StartRefusal::Workspace {
            path: "/srv/ws".into(),
            message: "gone".into(),
        },
        r#"{"kind":"workspace","path":"/srv/ws","message":"gone"}"#,
        "workspace /srv/ws: gone",
    );
}

#[test]
fn an_agents_end_crosses_the_wire_as_the_text_it_always_was() {
    let check = |end: AgentEnd, json: &str| {
        let bytes = serde_json::to_string(&Outbound::Ended(end.clone())).expect("serialized");
        assert_eq!(bytes, json);
        let back: Outbound = serde_json::from_str(&bytes).expect("deserialized");
        assert_eq!(back, Outbound::Ended(end));
    };
    check(AgentEnd::Stopped, r#"{"Ended":"stopped"}"#);
    check(
        AgentEnd::Failed("the agent crashed: boom".into()),
        r#"{"Ended":"the agent crashed: boom"}"#,
    );
}
