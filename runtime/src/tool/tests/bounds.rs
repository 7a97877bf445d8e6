//! The file and search tools' limits: `read_file` never holds more than its
//! cap and says how to read on; `grep`, `glob` and `list_dir` stop at theirs
//! with a note.

use pretty_assertions::assert_eq;

use super::*;

/// A workspace whose built-ins are bounded by `limits`.
fn bounded(limits: FileLimits) -> Env {
    let mut env = Env::new(Mode::Work);
    env.runner = ToolRunner::new(
        Arc::new(registry_of(builtin_tools_with(limits))),
        Duration::from_secs(30),
    );
    env
}

fn small() -> FileLimits {
    FileLimits {
        read_bytes: 20,
        read_lines: 3,
        grep_file_bytes: 64,
        grep_matches: 2,
        grep_line_bytes: 12,
        glob_files: 2,
        list_entries: 2,
        edit_file_bytes: 16,
    }
}

/// Runs `(tool, arguments, expected)` cases against `files` under `limits`.
async fn check(limits: FileLimits, files: &[(&str, &[u8])], cases: Vec<(&str, Value, Got)>) {
    let env = bounded(limits);
    for (rel, content) in files {
        let path = env.ws().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let mut got = Vec::new();
    for (tool, args, expected) in &cases {
        got.push((
            *tool,
            args.clone(),
            seen(env.call(tool, args.clone()).await, expected),
        ));
    }
    assert_eq!(got, cases);
}

#[tokio::test]
async fn read_file_stops_at_its_line_and_byte_limits_and_says_how_to_read_on() {
    let read = |args: Value| ("read_file", args);
    let cases = vec![
        (
            read(json!({"path": "f"})),
            ok("1\n22\n333\n[showing lines 1-3; the file goes on: read on with offset=4]"),
        ),
        (
            read(json!({"path": "f", "offset": 4})),
            ok("4444\n55555\n666666\n[showing lines 4-6; the file goes on: read on with offset=7]"),
        ),
        (
            read(json!({"path": "f", "offset": 4, "limit": 9})),
            ok("4444\n55555\n666666\n[cut at 20 bytes: showing lines 4-6; read on with offset=7]"),
        ),
        (
            read(json!({"path": "f", "offset": 7, "limit": 9})),
            ok("7777777\n"),
        ),
        (
            read(json!({"path": "long", "limit": 1})),
            ok(
                "abcdefghijklmnopqrst\n[line 1 is longer than 20 bytes: showing its first 20 \
                bytes; the next line is offset=2]",
            ),
        ),
        (
            read(json!({"path": "wide", "limit": 1})),
            ok(
                "aééééééééé\n[line 1 is longer than 20 bytes: showing its first 19 bytes; the \
                next line is offset=2]",
            ),
        ),
        (read(json!({"path": "empty"})), ok("(empty file)")),
        (
            read(json!({"path": "bin"})),
            err(ErrorCode::Failed, "bin: it is not a UTF-8 text file"),
        ),
    ];
    check(
        small(),
        &[
            ("f", b"1\n22\n333\n4444\n55555\n666666\n7777777\n"),
            ("long", b"abcdefghijklmnopqrstuvwxyz\nnext\n"),
            ("wide", format!("a{}", "é".repeat(30)).as_bytes()),
            ("empty", b""),
            ("bin", b"ok\xff\xfe"),
        ],
        cases.into_iter().map(|((t, a), e)| (t, a, e)).collect(),
    )
    .await;
}

#[tokio::test]
async fn searches_and_listings_stop_at_their_limits_with_a_note() {
    let big = format!("hit\n{}\n", "x".repeat(100));
    check(
        small(),
        &[
            ("a.txt", b"hit one\nhit two\nhit three with a long tail\n"),
            ("b.txt", b"hit four\n"),
            ("big.txt", big.as_bytes()),
            ("d/e.txt", b""),
        ],
        vec![
            (
                "grep",
                json!({"pattern": "hit"}),
                ok("a.txt:1:hit one\na.txt:2:hit two\n\
                    [... 2 more matches; narrow the pattern, the path or the glob]\n\
                    [1 file larger than 64 bytes not searched: big.txt]"),
            ),
            (
                "grep",
                json!({"pattern": "tail"}),
                ok("a.txt:3:hit th\n[... 14 bytes omitted ...]\ng tail\n\
                    [1 file larger than 64 bytes not searched: big.txt]"),
            ),
            (
                "glob",
                json!({"pattern": "**/*.txt"}),
                ok("a.txt\nb.txt\n[... 2 more files; narrow the pattern or the path]"),
            ),
            (
                "list_dir",
                json!({}),
                ok("a.txt\nb.txt\n[... 2 more entries; list a subdirectory or use glob to narrow it]"),
            ),
            (
                "edit_file",
                json!({"path": "a.txt", "old_string": "one", "new_string": "1"}),
                err(ErrorCode::Failed, "more than the 16 bytes edit_file reads"),
            ),
        ],
    )
    .await;
}

/// Lines `line 1`, `line 2`, … until the file holds `bytes` bytes.
fn numbered(path: &Path, bytes: usize) -> usize {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let (mut n, mut written) = (0, 0);
    while written < bytes {
        n += 1;
        let line = format!("line {n}\n");
        written += line.len();
        out.write_all(line.as_bytes()).unwrap();
    }
    out.flush().unwrap();
    n
}

#[tokio::test]
async fn regression_read_file_of_a_huge_file_loaded_it_whole() {
    let env = Env::new(Mode::Work);
    let cap = FileLimits::default().read_bytes;
    // 50 MB of short lines: the default read stops at 2000 lines.
    let lines = numbered(&env.ws().join("big.log"), 50 * 1024 * 1024);
    let first = env
        .call("read_file", json!({"path": "big.log"}))
        .await
        .unwrap();
    assert!(first.len() <= cap + 200, "{} bytes", first.len());
    assert!(
        first.ends_with("[showing lines 1-2000; the file goes on: read on with offset=2001]"),
        "{}",
        &first[first.len() - 100..]
    );
    // Far into the file, a large limit stops at the byte cap instead.
    let deep = env
        .call(
            "read_file",
            json!({"path": "big.log", "offset": lines - 3, "limit": 1_000_000}),
        )
        .await
        .unwrap();
    assert_eq!(
        deep,
        format!(
            "line {}\nline {}\nline {}\nline {lines}\n",
            lines - 3,
            lines - 2,
            lines - 1
        )
    );
    let middle = env
        .call(
            "read_file",
            json!({"path": "big.log", "offset": 1_000_000, "limit": 1_000_000}),
        )
        .await
        .unwrap();
    let next = middle
        .rsplit_once("read on with offset=")
        .and_then(|(_, n)| n.trim_end_matches(']').parse::<usize>().ok())
        .expect("a note saying where to read on");
    assert!(middle.len() <= cap + 200 && next > 1_000_000, "{next}");
    let on = env
        .call(
            "read_file",
            json!({"path": "big.log", "offset": next, "limit": 1}),
        )
        .await
        .unwrap();
    assert_eq!(
        on,
        format!(
            "line {next}\n[showing line {next}; the file goes on: read on with offset={}]",
            next + 1
        )
    );
    // A 2 GB file that is one line (sparse, so it costs no disk): read
    // whole it would need 2 GB of memory; capped, it returns the cap.
    let sparse = std::fs::File::create(env.ws().join("sparse.bin")).unwrap();
    sparse.set_len(2 * 1024 * 1024 * 1024).unwrap();
    let cut = env
        .call("read_file", json!({"path": "sparse.bin"}))
        .await
        .unwrap();
    assert!(
        cut.ends_with(&format!(
            "[line 1 is longer than {cap} bytes: showing its first {cap} bytes; the next line \
             is offset=2]"
        )),
        "{}",
        &cut[cut.len() - 120..]
    );
    assert!(cut.len() <= cap + 200);
}

#[tokio::test]
async fn read_file_reads_the_same_in_place_and_on_the_blocking_pool() {
    // A small file is read where the call runs, a large one on the blocking
    // pool; the same lines read the same either way.
    let env = Env::new(Mode::Work);
    numbered(&env.ws().join("small.log"), 8 * 1024);
    numbered(&env.ws().join("large.log"), 4 * 1024 * 1024);
    let read = |path: &str, offset: usize, limit: usize| {
        env.call(
            "read_file",
            json!({"path": path, "offset": offset, "limit": limit}),
        )
    };
    for (offset, limit) in [(1, 5), (17, 3), (300, 40)] {
        let small = read("small.log", offset, limit).await.unwrap();
        assert!(small.starts_with(&format!("line {offset}\n")), "{small}");
        assert_eq!(small, read("large.log", offset, limit).await.unwrap());
    }
    // Read to its end, the small file shows every line the large one
    // shows before its byte cap stops it.
    let (small, large) = (
        read("small.log", 1, 1_000_000).await.unwrap(),
        read("large.log", 1, 1_000_000).await.unwrap(),
    );
    let shown = |text: &str| text.lines().filter(|l| l.starts_with("line ")).count();
    assert!(shown(&small) > 500 && shown(&large) > shown(&small));
    assert!(
        large.starts_with(small.trim_end()),
        "{}",
        &small[small.len() - 80..]
    );
}

#[tokio::test]
async fn read_file_of_a_fifo_waits_for_its_writer_off_the_runtime() {
    // A FIFO is not a regular file: it is opened once, on the blocking
    // pool, where waiting for a writer holds no thread of the runtime (this
    // test's runtime has one). The writer comes first or after the reader.
    let env = Env::new(Mode::Work);
    for (n, delay) in [0, 100].into_iter().enumerate() {
        let fifo = env.ws().join(format!("pipe{n}"));
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(delay));
            std::fs::write(fifo, "from the pipe\n").unwrap();
        });
        let ticks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let ticker = tokio::spawn({
            let ticks = ticks.clone();
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        let read = tokio::time::timeout(
            Duration::from_secs(10),
            env.call("read_file", json!({"path": format!("pipe{n}")})),
        )
        .await
        .expect("the FIFO's contents within 10 s")
        .unwrap();
        ticker.abort();
        writer.join().unwrap();
        assert_eq!(read, "from the pipe\n");
        if delay > 0 {
            let ticked = ticks.load(std::sync::atomic::Ordering::Relaxed);
            assert!(
                ticked >= 3,
                "the runtime ran {ticked} ticks while the read waited"
            );
        }
    }
}

#[tokio::test]
async fn read_file_of_a_file_that_says_it_is_empty_reads_on() {
    // The files of /proc say they hold nothing and read on: a size of 0 is
    // not taken for small, and the read is the pool's, bounded as ever.
    let mut env = Env::new(Mode::Work);
    env.ctx.workspace = env.ctx.workspace.clone().trust_everything();
    let status = env
        .call(
            "read_file",
            json!({"path": "/proc/self/status", "limit": 2}),
        )
        .await
        .unwrap();
    assert!(status.starts_with("Name:"), "{status}");
    assert!(status.contains("read on with offset=3"), "{status}");
}

#[tokio::test]
async fn list_dir_lists_a_small_and_a_large_directory_alike() {
    // A small directory is listed where the call runs, a large one on the
    // blocking pool: both sorted, both cut at the limit with a note.
    let env = Env::new(Mode::Work);
    let max = FileLimits::default().list_entries;
    for (dir, count) in [("few", 3), ("many", max + 1500)] {
        std::fs::create_dir(env.ws().join(dir)).unwrap();
        for i in 0..count {
            std::fs::write(env.ws().join(format!("{dir}/entry-{i:05}")), "").unwrap();
        }
    }
    std::fs::create_dir(env.ws().join("few/sub")).unwrap();
    let few = env.call("list_dir", json!({"path": "few"})).await.unwrap();
    assert_eq!(few, "entry-00000\nentry-00001\nentry-00002\nsub/");
    let many = env.call("list_dir", json!({"path": "many"})).await.unwrap();
    let lines: Vec<&str> = many.lines().collect();
    assert_eq!(lines.len(), max + 1);
    assert_eq!(lines[0], "entry-00000");
    assert_eq!(lines[max - 1], format!("entry-{:05}", max - 1));
    assert_eq!(
        lines[max],
        "[... 1500 more entries; list a subdirectory or use glob to narrow it]"
    );
}
