//! The suite is hermetic: run with a poisoned user configuration (a saved
//! Plan mode and `never` posture, a model name, a base URL that answers
//! nothing, an allow-everything rule), its tests of the binary still pass,
//! and nothing lands in that user's data directory.

use std::process::Command;

/// Set in the inner run, so it does not start itself again.
const INNER: &str = "CADRE_IT_POISONED_HOME";

#[test]
fn tests_of_the_binary_pass_with_a_poisoned_user_configuration() {
    if std::env::var_os(INNER).is_some() {
        return;
    }
    let home = tempfile::TempDir::new().expect("home");
    let config = home.path().join(".config/cadre");
    std::fs::create_dir_all(&config).expect("config dir");
    std::fs::write(
        config.join("settings.toml"),
        "default_mode = \"plan\"\ndefault_posture = \"never\"\nmodel = \"poisoned-model\"\n",
    )
    .expect("settings");
    std::fs::write(
        config.join("config.toml"),
        "base_url = \"http://127.0.0.1:9/v1\"\nmodel = \"poisoned-model\"\n\
         [permissions]\nallow = [\"bash(*)\"]\n",
    )
    .expect("config");
    let data = home.path().join(".local/share");
    let out = Command::new(std::env::current_exe().expect("this test binary"))
        // Tests that run the binary with no model, mode or posture flags:
        // each would see the poison if its cadre read the user's files.
        .args([
            "command_line::modes",
            "command_line::model_choice::the_demo",
            "command_line::resume",
            "cli::the_built_in_demo",
            "settings::",
            "--test-threads=2",
        ])
        .env(INNER, "1")
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_DATA_HOME", &data)
        .output()
        .expect("run the suite");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let passed: usize = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|l| l.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert!(passed >= 10, "only {passed} tests ran:\n{stdout}");
    assert!(
        !data.join("cadre").exists(),
        "a test wrote into the user's data directory"
    );
}

/// Every place a test starts the binary makes it hermetic: the
/// `Command::new` of `CARGO_BIN_EXE_cadre` is followed by `.hermetic()`
/// (or wrapped in `clean(…)`, which applies it), so a new test cannot
/// forget it.
#[test]
fn every_spawn_of_the_binary_is_hermetic() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut stack = vec![root];
    let mut unguarded = Vec::new();
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("tests dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source");
            let lines: Vec<&str> = text.lines().collect();
            let needle = concat!("Command::new(env!(\"CARGO_BIN_", "EXE_cadre\"))");
            for (n, line) in lines.iter().enumerate() {
                if !line.contains(needle) {
                    continue;
                }
                seen += 1;
                let next: String = lines[n..(n + 3).min(lines.len())].join("\n");
                if !(next.contains("hermetic()") || line.contains("clean(")) {
                    unguarded.push(format!("{}:{}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        seen >= 10,
        "found only {seen} spawns: is the pattern still right?"
    );
    assert!(
        unguarded.is_empty(),
        "spawns without .hermetic(): {unguarded:?}"
    );
}
