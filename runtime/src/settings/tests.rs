use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use tempfile::TempDir;
use toml::Value;

use super::*;

fn store() -> (TempDir, Settings) {
    let dir = TempDir::new().expect("temp dir");
    let settings = Settings::in_dir(dir.path());
    (dir, settings)
}

fn s(text: &str) -> Value {
    Value::String(text.into())
}

/// `set(key, text)` stores `expected`, or fails with a message containing it.
fn check(key: &str, text: &str, expected: Result<Value, &str>) {
    let (_dir, settings) = store();
    match (settings.set(key, text), expected) {
        (Ok(stored), Ok(want)) => {
            assert_eq!(stored, want, "{key} = {text}");
            assert_eq!(settings.get(key).expect("get"), Some(want), "{key}");
        }
        (Err(err), Err(want)) => {
            assert!(err.to_string().contains(want), "{key} = {text}: {err}");
            assert!(!settings.path().exists(), "a refused set wrote the file");
        }
        (got, want) => panic!("{key} = {text}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn values_are_checked_against_their_key_and_stored_canonically() {
    check("default_mode", "plan", Ok(s("plan")));
    check("default_mode", "agent", Ok(s("work")));
    check("default_mode", " Operate ", Ok(s("operate")));
    check("default_mode", "drive", Err("unknown mode 'drive'"));
    check("default_posture", "full-access", Ok(s("bypass")));
    check("default_posture", "ask", Ok(s("suggest")));
    check("default_posture", "yolo", Err("unknown posture 'yolo'"));
    check("plan.agent_entry", "true", Ok(Value::Boolean(true)));
    check("plan.agent_entry", "yes", Err("'yes' is not true or false"));
    check("model", "gpt-4.1", Ok(s("gpt-4.1")));
    check("model", "  ", Err("model: the value is empty"));
    check(
        "modle",
        "x",
        Err(
            "unknown setting 'modle': known settings are default_mode, default_posture, model, plan.agent_entry",
        ),
    );
}

#[test]
fn get_of_an_unknown_key_is_refused_and_of_an_unset_one_is_none() {
    let (_dir, settings) = store();
    assert!(matches!(
        settings.get("colour"),
        Err(SettingsError::UnknownKey { .. })
    ));
    assert_eq!(settings.get("model").expect("missing file is empty"), None);
    assert_eq!(settings.default_mode().expect("read"), None);
    assert_eq!(settings.read().expect("read"), BTreeMap::new());
}

#[test]
fn sets_keep_every_other_key_including_ones_written_behind_its_back() {
    let (_dir, settings) = store();
    settings.set("default_mode", "plan").expect("set");
    settings.set("plan.agent_entry", "true").expect("set");
    // Another process (or a newer cadre) adds keys between two writes.
    let text = std::fs::read_to_string(settings.path()).expect("read");
    std::fs::write(settings.path(), format!("future_key = 3\n{text}")).expect("write");
    settings.set("default_posture", "auto").expect("set");
    settings.set("default_mode", "operate").expect("set");

    let expected: BTreeMap<String, Value> = [
        ("default_mode", s("operate")),
        ("default_posture", s("auto")),
        ("future_key", Value::Integer(3)),
        ("plan.agent_entry", Value::Boolean(true)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(settings.read().expect("read"), expected);
    assert_eq!(settings.default_mode().expect("read"), Some(Mode::Operate));
    assert_eq!(
        settings.default_posture().expect("read"),
        Some(Posture::Auto)
    );
    let text = std::fs::read_to_string(settings.path()).expect("read");
    assert!(text.contains("[plan]\nagent_entry = true"), "{text}");
}

#[test]
fn a_corrupt_file_is_reported_with_its_line_and_never_overwritten() {
    let (_dir, settings) = store();
    let corrupt = "default_mode = \"plan\"\nmodel = \n";
    std::fs::write(settings.path(), corrupt).expect("write");

    let err = settings.set("model", "gpt-4.1").expect_err("refused");
    match &err {
        SettingsError::Parse { path, line, .. } => {
            assert_eq!(path, settings.path());
            assert_eq!(*line, Some(2));
        }
        other => panic!("not a parse error: {other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with(&format!("{}: line 2: ", settings.path().display())),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(settings.path()).expect("read"),
        corrupt
    );
    assert!(matches!(
        settings.default_mode(),
        Err(SettingsError::Parse { .. })
    ));
}

#[test]
fn a_bad_hand_edited_value_names_the_file_and_key() {
    let (_dir, settings) = store();
    std::fs::write(
        settings.path(),
        "default_mode = \"drive\"\ndefault_posture = 3\nplan = 1\n",
    )
    .expect("write");
    let err = settings.default_mode().expect_err("bad mode");
    assert!(
        err.to_string().starts_with(&format!(
            "{}: default_mode: unknown mode 'drive'",
            settings.path().display()
        )),
        "{err}"
    );
    let err = settings.default_posture().expect_err("not a string");
    assert!(err.to_string().contains("expected a string"), "{err}");
    let err = settings
        .set("plan.agent_entry", "true")
        .expect_err("plan is not a table");
    assert!(
        err.to_string().contains("'plan' is 1, not a table"),
        "{err}"
    );
}

#[test]
fn writers_leave_only_the_file_and_its_lock_behind() {
    let (dir, settings) = store();
    for n in 0..5 {
        settings.set("model", &format!("m-{n}")).expect("set");
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["settings.toml", "settings.toml.lock"]);
}

#[test]
fn threads_of_one_process_writing_different_keys_lose_nothing() {
    let (_dir, settings) = store();
    let writers = [
        ("model", ["a", "b"]),
        ("default_mode", ["plan", "work"]),
        ("default_posture", ["auto", "never"]),
        ("plan.agent_entry", ["true", "false"]),
    ];
    std::thread::scope(|scope| {
        for (key, values) in writers {
            let settings = settings.clone();
            scope.spawn(move || {
                for n in 0..50 {
                    settings.set(key, values[n % 2]).expect("set");
                }
            });
        }
    });
    let stored = settings.read().expect("read");
    for (key, values) in writers {
        let want = KnownKey::lookup(key).expect("known").parse(values[1]);
        assert_eq!(stored.get(key), Some(&want.expect("valid")), "{key}");
    }
}

#[cfg(unix)]
#[test]
fn a_symlinked_file_keeps_its_link_and_its_target_is_replaced() {
    let (dir, settings) = store();
    let dotfiles = dir.path().join("dotfiles");
    std::fs::create_dir(&dotfiles).expect("dir");
    std::fs::write(dotfiles.join("settings.toml"), "model = \"old\"\n").expect("write");
    std::os::unix::fs::symlink(dotfiles.join("settings.toml"), settings.path()).expect("link");

    settings.set("default_mode", "plan").expect("set");
    assert!(
        std::fs::symlink_metadata(settings.path())
            .expect("meta")
            .file_type()
            .is_symlink()
    );
    let target = parse(
        &std::fs::read_to_string(dotfiles.join("settings.toml")).expect("read"),
        Path::new("target"),
    )
    .expect("parses");
    assert_eq!(target.get("model"), Some(&s("old")));
    assert_eq!(target.get("default_mode"), Some(&s("plan")));
}
