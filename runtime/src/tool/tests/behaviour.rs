//! What each built-in tool does.

use pretty_assertions::assert_eq;

use super::*;

/// Seeds `files`, then runs `(tool, arguments, expected)` cases in order.
async fn check_builtin(files: &[(&str, &str)], cases: Vec<(&str, Value, Got)>) -> Env {
    let env = Env::new(Mode::Work);
    for (rel, content) in files {
        env.seed(rel, content);
    }
    let mut actual = Vec::new();
    for (tool, args, expected) in &cases {
        let got = seen(env.call(tool, args.clone()).await, expected);
        actual.push((*tool, args.clone(), got));
    }
    assert_eq!(
        actual,
        cases
            .iter()
            .map(|(t, a, e)| (*t, a.clone(), e.clone()))
            .collect::<Vec<_>>()
    );
    env
}

#[tokio::test]
async fn read_file_selects_lines_by_offset_and_limit() {
    use ErrorCode::*;
    let read = |extra: Value| {
        let mut args = json!({"path": "f.txt"});
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        ("read_file", args)
    };
    let cases = [
        (read(json!({})), ok("one\ntwo\nthree\nfour\n")),
        (read(json!({"offset": 2})), ok("two\nthree\nfour\n")),
        (
            read(json!({"offset": 2, "limit": 2})),
            ok("two\nthree\n[showing lines 2-3; the file goes on: read on with offset=4]"),
        ),
        (
            read(json!({"limit": 1})),
            ok("one\n[showing line 1; the file goes on: read on with offset=2]"),
        ),
        (read(json!({"offset": 4, "limit": 10})), ok("four\n")),
        (read(json!({"offset": 4, "limit": 1})), ok("four\n")),
        (
            read(json!({"offset": 9})),
            ok("[offset 9 is past the end: the file has 4 lines]"),
        ),
        (read(json!({"offset": 0})), err(InvalidArguments, "/offset")),
        (
            ("read_file", json!({"path": "missing.txt"})),
            err(NotFound, "missing.txt"),
        ),
    ];
    check_builtin(
        &[("f.txt", "one\ntwo\nthree\nfour\n")],
        cases.into_iter().map(|((t, a), e)| (t, a, e)).collect(),
    )
    .await;
}

#[tokio::test]
async fn list_dir_sorts_and_marks_directories() {
    let env = check_builtin(
        &[
            ("b.txt", ""),
            ("a/x", ""),
            ("c/y", ""),
            (".hidden", ""),
            ("B.md", ""),
        ],
        vec![
            ("list_dir", json!({}), ok(".hidden\nB.md\na/\nb.txt\nc/")),
            (
                "list_dir",
                json!({"path": "."}),
                ok(".hidden\nB.md\na/\nb.txt\nc/"),
            ),
            ("list_dir", json!({"path": "a"}), ok("x")),
            (
                "list_dir",
                json!({"path": "nope"}),
                err(ErrorCode::NotFound, "nope"),
            ),
        ],
    )
    .await;
    std::fs::create_dir(env.ws().join("empty")).unwrap();
    assert_eq!(
        env.call("list_dir", json!({"path": "empty"})).await,
        Ok("(empty directory)".into())
    );
}

#[tokio::test]
async fn glob_matches_paths_relative_to_its_base() {
    check_builtin(
        &[
            ("top.rs", ""),
            ("src/main.rs", ""),
            ("src/lib/mod.rs", ""),
            ("src/lib/notes.md", ""),
            ("README.md", ""),
        ],
        vec![
            (
                "glob",
                json!({"pattern": "**/*.rs"}),
                ok("src/lib/mod.rs\nsrc/main.rs\ntop.rs"),
            ),
            ("glob", json!({"pattern": "*.rs"}), ok("top.rs")),
            (
                "glob",
                json!({"pattern": "**/*.rs", "path": "src"}),
                ok("src/lib/mod.rs\nsrc/main.rs"),
            ),
            (
                "glob",
                json!({"pattern": "src/**/*.md"}),
                ok("src/lib/notes.md"),
            ),
            (
                "glob",
                json!({"pattern": "**/*.py"}),
                ok("no files match '**/*.py'"),
            ),
            (
                "glob",
                json!({"pattern": "a[", "path": "src"}),
                err(ErrorCode::InvalidArguments, "bad glob pattern"),
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn grep_prints_file_line_text_and_respects_glob() {
    // The walk's order is the file system's; the lines are compared sorted.
    let env = Env::new(Mode::Work);
    env.seed("a.rs", "fn main() {}\n// needle here\n");
    env.seed("b.txt", "needle\n");
    env.seed("sub/c.rs", "x\ny\nneedle again\n");
    let check = async |args: Value, expected: &[&str]| {
        let out = env
            .call("grep", args.clone())
            .await
            .unwrap_or_else(|e| e.to_string());
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        assert_eq!(lines, expected, "{args}");
    };
    check(
        json!({"pattern": "needle"}),
        &[
            "a.rs:2:// needle here",
            "b.txt:1:needle",
            "sub/c.rs:3:needle again",
        ],
    )
    .await;
    check(
        json!({"pattern": "needle", "glob": "*.rs"}),
        &["a.rs:2:// needle here", "sub/c.rs:3:needle again"],
    )
    .await;
    check(
        json!({"pattern": "needle", "glob": "sub/*"}),
        &["sub/c.rs:3:needle again"],
    )
    .await;
    check(
        json!({"pattern": "needle", "path": "sub"}),
        &["sub/c.rs:3:needle again"],
    )
    .await;
    check(
        json!({"pattern": "NEEDLE$", "path": "b.txt", "case_insensitive": true}),
        &["b.txt:1:needle"],
    )
    .await;
    check(
        json!({"pattern": "haystack"}),
        &["no matches for 'haystack'"],
    )
    .await;
    let bad = err(ErrorCode::InvalidArguments, "bad regular expression");
    assert_eq!(
        seen(env.call("grep", json!({"pattern": "("})).await, &bad),
        bad
    );
}

#[tokio::test]
async fn write_file_creates_parent_directories() {
    let env = check_builtin(
        &[("old.txt", "before")],
        vec![
            (
                "write_file",
                json!({"path": "deep/er/new.txt", "content": "hello"}),
                ok("wrote 5 bytes to deep/er/new.txt"),
            ),
            (
                "write_file",
                json!({"path": "old.txt", "content": "after"}),
                ok("wrote 5 bytes to old.txt"),
            ),
        ],
    )
    .await;
    assert_eq!(
        (env.read("deep/er/new.txt"), env.read("old.txt")),
        (Some("hello".into()), Some("after".into()))
    );
}

/// One `edit_file` call on a file holding `a b a c\n`: the outcome and the
/// file's content afterwards.
async fn check_edit(args: Value, expected: Got, content: &str) {
    let env = Env::new(Mode::Work);
    env.seed("f.txt", "a b a c\n");
    let mut args = args;
    args["path"] = json!("f.txt");
    let got = seen(env.call("edit_file", args.clone()).await, &expected);
    assert_eq!(
        (got, env.read("f.txt")),
        (expected, Some(content.to_string())),
        "{args}"
    );
}

#[tokio::test]
async fn edit_file_replaces_exactly_what_it_is_asked_to() {
    use ErrorCode::*;
    let unchanged = "a b a c\n";
    check_edit(
        json!({"old_string": "b", "new_string": "B"}),
        ok("replaced 1 occurrence in f.txt"),
        "a B a c\n",
    )
    .await;
    check_edit(
        json!({"old_string": "zzz", "new_string": "y"}),
        err(Failed, "does not occur in f.txt"),
        unchanged,
    )
    .await;
    check_edit(
        json!({"old_string": "a", "new_string": "A"}),
        err(Failed, "occurs 2 times"),
        unchanged,
    )
    .await;
    check_edit(
        json!({"old_string": "a", "new_string": "A", "replace_all": false}),
        err(Failed, "occurs 2 times"),
        unchanged,
    )
    .await;
    check_edit(
        json!({"old_string": "a", "new_string": "A", "replace_all": true}),
        ok("replaced 2 occurrences in f.txt"),
        "A b A c\n",
    )
    .await;
    check_edit(
        json!({"old_string": "", "new_string": "x"}),
        err(InvalidArguments, "must not be empty"),
        unchanged,
    )
    .await;
    check_edit(
        json!({"old_string": "b", "new_string": "b"}),
        err(InvalidArguments, "are the same"),
        unchanged,
    )
    .await;
}

#[tokio::test]
async fn bash_reports_its_exit_code() {
    use ErrorCode::*;
    check_builtin(
        &[("seed.txt", "seeded\n")],
        vec![
            (
                "bash",
                json!({"command": "echo hi"}),
                ok("exit code: 0\nhi\n"),
            ),
            (
                "bash",
                json!({"command": "cat seed.txt"}),
                ok("exit code: 0\nseeded\n"),
            ),
            (
                "bash",
                json!({"command": "exit 3"}),
                err(Failed, "exit code: 3"),
            ),
            (
                "bash",
                json!({"command": "echo out; echo err >&2; exit 1"}),
                err(Failed, "exit code: 1\nout\n[stderr]\nerr\n"),
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn todo_write_keeps_the_list_in_the_session_directory() {
    let todos = json!([
        {"content": "read", "status": "completed"},
        {"content": "write", "status": "in_progress"},
        {"content": "ship", "status": "pending"}
    ]);
    let env = check_builtin(
        &[],
        vec![
            (
                "todo_write",
                json!({"todos": [{"content": "x", "status": "done"}]}),
                err(ErrorCode::InvalidArguments, "/todos/0/status"),
            ),
            (
                "todo_write",
                json!({"todos": todos}),
                ok("[x] read\n[>] write\n[ ] ship"),
            ),
        ],
    )
    .await;
    let stored: Vec<TodoItem> =
        serde_json::from_slice(&std::fs::read(env.session().join("todos.json")).unwrap()).unwrap();
    assert_eq!(
        stored,
        serde_json::from_value::<Vec<TodoItem>>(todos).unwrap()
    );
    assert_eq!(
        env.call("todo_write", json!({"todos": []})).await,
        Ok("task list cleared".into())
    );
    assert_eq!(
        std::fs::read_to_string(env.session().join("todos.json")).unwrap(),
        "[]"
    );
}
