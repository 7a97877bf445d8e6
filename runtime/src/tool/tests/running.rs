//! The runner's entry point: lookup, arguments, allow-list, panics, timeouts.

use pretty_assertions::assert_eq;

use super::*;

/// Runs `(tool, raw arguments, expected)` cases in order on one runner.
async fn check_calls(env: &Env, cases: &[(&str, &str, Got)]) {
    let mut actual = Vec::new();
    for (name, raw, expected) in cases {
        let got = seen(env.call_raw(name, raw).await, expected);
        actual.push((*name, *raw, got));
    }
    let expected: Vec<_> = cases.iter().map(|(n, r, e)| (*n, *r, e.clone())).collect();
    assert_eq!(actual, expected);
}

#[tokio::test]
async fn runner_refuses_bad_calls_with_coded_errors() {
    use ErrorCode::*;
    let env = Env::new(Mode::Work);
    check_calls(
        &env,
        &[
            ("nope", "{}", err(NotFound, "there is no tool named 'nope'")),
            (
                "write_file",
                "{not json",
                err(InvalidArguments, "not valid JSON"),
            ),
            (
                "write_file",
                "[1, 2]",
                err(InvalidArguments, "must be a JSON object, got an array"),
            ),
            (
                "write_file",
                "\"a.txt\"",
                err(InvalidArguments, "got a string"),
            ),
            ("write_file", "null", err(InvalidArguments, "got null")),
            (
                "write_file",
                r#"{"path": "a.txt", "content": 5}"#,
                err(InvalidArguments, "/content"),
            ),
            (
                "write_file",
                r#"{"path": "a.txt"}"#,
                err(InvalidArguments, "\"content\""),
            ),
            ("write_file", "", err(InvalidArguments, "\"path\"")),
            (
                "write_file",
                r#"{"path": "a.txt", "content": "x", "mode": 1}"#,
                err(InvalidArguments, "mode"),
            ),
            ("echo", "", ok("{}")),
        ],
    )
    .await;
    assert_eq!(env.read("a.txt"), None, "a refused write wrote the file");
}

#[tokio::test]
async fn runner_honours_the_allow_list_but_not_for_system_tools() {
    use ErrorCode::*;
    let env = Env::new(Mode::Work).allow(&["read_file", "echo"]);
    env.seed("a.txt", "hello\n");
    check_calls(
        &env,
        &[
            ("read_file", r#"{"path": "a.txt"}"#, ok("hello\n")),
            (
                "list_dir",
                "{}",
                err(
                    ToolNotAllowed,
                    "'list_dir' is not among this agent's allowed tools",
                ),
            ),
            (
                "write_file",
                r#"{"path": "a.txt", "content": "x"}"#,
                err(ToolNotAllowed, "allowed tools"),
            ),
            ("echo", r#"{"x": 1}"#, ok(r#"{"x":1}"#)),
            ("sys", r#"{"y": 2}"#, ok(r#"{"y":2}"#)),
        ],
    )
    .await;
    assert_eq!(env.read("a.txt").as_deref(), Some("hello\n"));
}

#[tokio::test]
async fn a_panicking_tool_fails_with_its_message_and_the_runner_goes_on() {
    use ErrorCode::*;
    let env = Env::new(Mode::Work);
    check_calls(
        &env,
        &[
            (
                "panicker",
                "{}",
                err(Failed, "'panicker' crashed: static boom"),
            ),
            ("echo", r#"{"after": 1}"#, ok(r#"{"after":1}"#)),
            (
                "panicker_fmt",
                "{}",
                err(Failed, "'panicker_fmt' crashed: formatted boom 7"),
            ),
            ("echo", r#"{"after": 2}"#, ok(r#"{"after":2}"#)),
        ],
    )
    .await;
}

/// A `sleeper` tool sleeping `sleep`, with an optional definition timeout,
/// under a runner whose default timeout is `default`.
async fn check_timeout(sleep: u64, own: Option<u64>, default: u64, expected: Got) {
    let env = Env::new(Mode::Work);
    let sleeper =
        Fake::new("sleeper", Act::Sleep(Duration::from_millis(sleep))).with(|d| match own {
            Some(ms) => d.with_timeout(Duration::from_millis(ms)),
            None => d,
        });
    let runner = ToolRunner::new(
        Arc::new(registry_of([sleeper.arc()])),
        Duration::from_millis(default),
    );
    let call = ToolCall {
        id: "c".into(),
        name: "sleeper".into(),
        arguments: "{}".into(),
    };
    let got = seen(runner.execute(&call, &env.ctx).await, &expected);
    assert_eq!(
        got, expected,
        "sleep {sleep} ms, own {own:?}, default {default} ms"
    );
}

// tokio's paused clock needs its `test-util` feature, which this crate's
// dev-dependencies do not enable; real time works because each case either
// never finishes (an hour) or finishes well inside its limit, so the timeout
// either must fire or must not, whatever the scheduling.
#[tokio::test]
async fn a_tool_past_its_timeout_times_out() {
    use ErrorCode::*;
    const HOUR: u64 = 3_600_000;
    check_timeout(
        HOUR,
        Some(20),
        HOUR,
        err(Timeout, "'sleeper' did not finish within 20 ms"),
    )
    .await;
    check_timeout(
        HOUR,
        None,
        30,
        err(Timeout, "'sleeper' did not finish within 30 ms"),
    )
    .await;
    check_timeout(1, Some(HOUR), HOUR, ok("woke")).await;
    check_timeout(50, Some(HOUR), 5, ok("woke")).await;
}
