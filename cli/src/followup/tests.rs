use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use super::{Followup, quote};
use crate::config::ModelChoice;

fn check(word: &str, expected: &str) {
    assert_eq!(quote(word), expected, "{word:?}");
}

#[test]
fn words_are_quoted_only_when_a_shell_would_read_them_otherwise() {
    check("latest", "latest");
    check("/tmp/cadre-data/x.toml", "/tmp/cadre-data/x.toml");
    check("my data", "'my data'");
    check("it's", r"'it'\''s'");
    check("$HOME", "'$HOME'");
    check("", "''");
}

#[test]
fn follow_ups_name_the_store_config_and_model_only_when_they_are_not_the_defaults() {
    let default = Path::new("/home/u/.local/share/cadre");
    let here = Followup::new(default, Some(default));
    assert_eq!(
        here.offline(&["plan", "approve", "s1"]),
        "cadre plan approve s1"
    );

    let elsewhere = Followup::new(Path::new("/tmp/my data"), Some(default))
        .config_dir(
            Some(Path::new("/tmp/cfg")),
            Some(Path::new("/home/u/.config/cadre")),
        )
        .model(&ModelChoice::Script(PathBuf::from("s.toml")));
    assert_eq!(
        elsewhere.offline(&["plan", "approve", "s1"]),
        "cadre plan approve s1 --data-dir '/tmp/my data'"
    );
    assert_eq!(
        elsewhere.exec(&["--resume", "s1"]),
        "cadre exec --resume s1 --data-dir '/tmp/my data' --config-dir /tmp/cfg --script s.toml"
    );
    let restore = elsewhere.workspace(Path::new("/w"), Some(Path::new("/elsewhere")));
    assert_eq!(
        restore.restore(&["apply", "abc"]),
        "cadre restore apply abc --data-dir '/tmp/my data' --workspace /w"
    );
}
