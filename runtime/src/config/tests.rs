use super::*;
use crate::tool::FileLimits;

fn file(text: &str) -> ConfigFile {
    ConfigFile::parse(text, Path::new("test.toml")).expect("parses")
}

#[test]
fn higher_layers_win_for_settings_and_roles_and_rules_accumulate() {
    let user = file(
        r#"
posture = "auto"
model = "small"
[permissions]
deny = ["bash(git push:*)"]
[roles.reviewer]
model = "big"
system_prompt = "review"
"#,
    );
    let project = file(
        r#"
model = "medium"
[permissions]
allow = ["bash(cargo test:*)"]
[roles.reviewer]
posture = "never"
"#,
    );
    let merged = Config::merge(
        vec![
            (user, Scope::User, "user.toml".into()),
            (project, Scope::Project, "project.toml".into()),
        ],
        Trust::Trusted,
    )
    .expect("merges");
    assert_eq!(merged.settings.posture, Some(Posture::Auto));
    assert_eq!(merged.posture(Posture::Auto), Posture::Auto);
    assert_eq!(merged.settings.model.as_deref(), Some("medium"));
    let reviewer = &merged.roles["reviewer"];
    assert_eq!(reviewer.posture, Some(Posture::Never));
    assert_eq!(reviewer.model, None, "a role is replaced whole, not merged");
    let root = Path::new("/ws");
    let push = serde_json::json!({"command": "git push"});
    let test = serde_json::json!({"command": "cargo test -p x"});
    let bash = crate::tool::builtin_definitions()
        .iter()
        .find(|def| def.shell)
        .expect("a shell tool");
    let decide = |args| {
        let call = crate::permission::Call::new(bash, args, crate::tool::Safety::SideEffect, root);
        merged.rules.decide(&call)
    };
    assert!(decide(&push).is_some());
    assert!(decide(&test).is_some());
}

/// The posture a project file asking for `project` leaves a user who
/// chose `user`.
#[test]
fn a_projects_limits_only_tighten_the_users_and_the_defaults() {
    let project = file("[limits]\nread_lines = 10\nresponse_secs = 100000\nmodel_requests = 2\n");
    let merged = Config::merge(
        vec![(project.clone(), Scope::Project, "project.toml".into())],
        Trust::Trusted,
    )
    .expect("merges");
    let limits = merged.limits();
    // Lower than the default: taken.
    assert_eq!(limits.read_lines, Some(10));
    // Higher than the default (600 s): the default stays.
    assert_eq!(limits.response_secs, None);
    // No limit by default: any limit tightens.
    assert_eq!(limits.model_requests, Some(2));
    // The user's own limits: the lower of theirs and the project's.
    let user = file("[limits]\nread_lines = 5\nresponse_secs = 200000\nmodel_requests = 8\n");
    let merged = Config::merge(
        vec![
            (user, Scope::User, "user.toml".into()),
            (project, Scope::Project, "project.toml".into()),
        ],
        Trust::Trusted,
    )
    .expect("merges");
    let limits = merged.limits();
    assert_eq!(limits.read_lines, Some(5));
    assert_eq!(limits.response_secs, Some(100000));
    assert_eq!(limits.model_requests, Some(2));
}

#[test]
fn a_limit_within_a_project_is_never_above_the_users_or_the_default() {
    // Every combination of unset and a few values, for one field.
    let values = [None, Some(1u64), Some(50), Some(600), Some(10_000)];
    for user in values {
        for project in values {
            for default in values {
                let got = LimitSettings {
                    response_secs: user,
                    ..LimitSettings::default()
                }
                .within(
                    LimitSettings {
                        response_secs: project,
                        ..LimitSettings::default()
                    },
                    LimitSettings {
                        response_secs: default,
                        ..LimitSettings::default()
                    },
                )
                .response_secs;
                let before = user.or(default);
                let after = got.or(default);
                match (before, after) {
                    (Some(b), Some(a)) => assert!(a <= b, "{user:?} {project:?} {default:?}"),
                    (Some(_), None) => {
                        panic!("a bound was lifted: {user:?} {project:?} {default:?}")
                    }
                    _ => {}
                }
                if project.is_none() {
                    assert_eq!(got, user);
                }
            }
        }
    }
}

#[test]
fn a_projects_mode_only_narrows_and_its_guardian_is_ignored() {
    let project = file("mode = \"operate\"\n[guardian]\nmodel = \"tiny\"\ntimeout_secs = 1\n");
    let merged = Config::merge(
        vec![(project, Scope::Project, "project.toml".into())],
        Trust::Trusted,
    )
    .expect("merges");
    for user in [Mode::Plan, Mode::Work, Mode::Operate] {
        assert_eq!(
            merged.mode(user),
            user,
            "operate in a project never widens {user}"
        );
    }
    assert_eq!(merged.settings.guardian.model, None);
    assert_eq!(merged.settings.guardian.timeout_secs, None);
    let plan = file("mode = \"plan\"\n");
    let merged = Config::merge(
        vec![(plan, Scope::Project, "project.toml".into())],
        Trust::Trusted,
    )
    .expect("merges");
    for user in [Mode::Plan, Mode::Work, Mode::Operate] {
        assert_eq!(merged.mode(user), Mode::Plan);
    }
    // The user's own file still chooses both.
    let user = file("mode = \"operate\"\n[guardian]\nmodel = \"careful\"\n");
    let merged = Config::merge(
        vec![(user, Scope::User, "user.toml".into())],
        Trust::Trusted,
    )
    .expect("merges");
    assert_eq!(merged.settings.mode, Some(Mode::Operate));
    assert_eq!(merged.settings.guardian.model.as_deref(), Some("careful"));
}

fn project_posture(user: Posture, project: Posture, expected: Posture) {
    let project_file = file(&format!("posture = \"{}\"\n", project.as_str()));
    let merged = Config::merge(
        vec![(project_file, Scope::Project, "project.toml".into())],
        Trust::Trusted,
    )
    .expect("merges");
    assert_eq!(merged.settings.posture, None, "kept apart");
    assert_eq!(
        merged.posture(user),
        expected,
        "user {user:?}, project {project:?}"
    );
}

#[test]
fn a_project_file_narrows_the_posture_and_never_widens_it() {
    let all = [
        Posture::Never,
        Posture::Suggest,
        Posture::Auto,
        Posture::Bypass,
    ];
    for user in all {
        for project in all {
            project_posture(user, project, user.min(project));
        }
    }
    project_posture(Posture::Suggest, Posture::Bypass, Posture::Suggest);
    project_posture(Posture::Bypass, Posture::Never, Posture::Never);
}

#[test]
fn a_project_file_cannot_choose_the_model_server() {
    for text in [
        "base_url = \"http://127.0.0.1:9/v1\"\n",
        "[roles.r]\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    ] {
        let err = Config::merge(
            vec![(file(text), Scope::Project, "project.toml".into())],
            Trust::Trusted,
        )
        .expect_err(text);
        assert_eq!(err.path, "project.toml");
        assert!(
            err.message.contains("base_url: a project's config cannot"),
            "{err}"
        );
        Config::merge(
            vec![(file(text), Scope::Local, "local.toml".into())],
            Trust::Trusted,
        )
        .expect("the local file may");
    }
}

#[test]
fn a_project_file_cannot_widen_the_sandbox() {
    let user = file("[sandbox]\nwritable_roots = [\"~/.cache\"]\n[limits]\nresponse_mib = 4\n");
    let project = file(
        "[sandbox]\nwritable_roots = [\"/\"]\nenv = [\"AWS_SECRET\"]\n[limits]\nresponse_secs = 60\n",
    );
    let merged = Config::merge(
        vec![
            (user, Scope::User, "user.toml".into()),
            (project, Scope::Project, "project.toml".into()),
        ],
        Trust::Trusted,
    )
    .expect("merges");
    let s = &merged.settings;
    assert_eq!(s.sandbox.writable_roots, Some(vec!["~/.cache".to_string()]));
    assert_eq!(s.sandbox.env, None);
    let limits = merged.limits();
    assert_eq!(
        (limits.response_mib, limits.response_secs),
        (Some(4), Some(60))
    );
}

#[test]
fn a_project_file_cannot_turn_snapshots_off() {
    let user = file("[snapshots]\nmax_file_mib = 2\n");
    let project = file("[snapshots]\nenabled = false\nmax_file_mib = 0\n");
    let merged = Config::merge(
        vec![
            (user, Scope::User, "user.toml".into()),
            (project, Scope::Project, "project.toml".into()),
        ],
        Trust::Trusted,
    )
    .expect("merges");
    assert_eq!(
        merged.settings.snapshots,
        SnapshotSettings {
            enabled: None,
            max_file_mib: Some(2)
        }
    );
}

#[test]
fn errors_name_the_file_and_the_line() {
    let err = ConfigFile::parse(
        "posture = \"auto\"\nmodle = \"x\"\n",
        Path::new("/home/u/.config/cadre/config.toml"),
    )
    .expect_err("unknown key");
    assert!(
        err.to_string()
            .starts_with("/home/u/.config/cadre/config.toml: "),
        "{err}"
    );
    assert!(err.message.contains("line 2"), "{err}");
    let err =
        ConfigFile::parse("posture = \"yolo\"\n", Path::new("c.toml")).expect_err("bad posture");
    assert!(err.message.contains("yolo"), "{err}");
    let bad_rule = file("[permissions]\ndeny = [\"bash(git push\"]\n");
    let err = Config::merge(
        vec![(bad_rule, Scope::Project, "p.toml".into())],
        Trust::Trusted,
    )
    .expect_err("bad rule");
    assert_eq!(err.path, "p.toml");
}

#[test]
fn limits_from_the_highest_user_layer_that_sets_each_key_tightened_by_the_project() {
    let merged = Config::merge(
        vec![
            (
                file("[limits]\nread_bytes = 100\ngrep_matches = 5\n"),
                Scope::User,
                "user.toml".into(),
            ),
            (
                file("[limits]\nread_bytes = 200\nlist_entries = 0\n"),
                Scope::Project,
                "project.toml".into(),
            ),
            (
                file("[limits]\nread_bytes = 150\n"),
                Scope::Local,
                "local.toml".into(),
            ),
        ],
        Trust::Trusted,
    )
    .expect("merges");
    let limits = merged.limits().apply(FileLimits::default());
    assert_eq!(
        limits,
        FileLimits {
            read_bytes: 150,
            grep_matches: 5,
            list_entries: 1,
            ..FileLimits::default()
        }
    );
    assert!(ConfigFile::parse("[limits]\nread_byte = 1\n", Path::new("c.toml")).is_err());
}

/// A project may set the window, but who reads the conversation to
/// summarise it is the user's choice unless the project is trusted.
#[test]
fn an_untrusted_project_cannot_choose_the_compaction_model() {
    let user = file("[context]\nmodel = \"mine\"\nwindow = 9000\n");
    let project = file(
        "[context]\nmodel = \"theirs\"\nprovider = \"local\"\nreasoning_effort = \"high\"\n\
         compact_percent = 50\n",
    );
    let layers = |project: ConfigFile| {
        vec![
            (user.clone(), Scope::User, "user.toml".into()),
            (project, Scope::Project, "project.toml".into()),
        ]
    };
    let untrusted =
        Config::merge(layers(project.clone()), Trust::Untrusted(Untrusted::Never)).expect("merge");
    let context = &untrusted.settings.context;
    assert_eq!(context.model.as_deref(), Some("mine"));
    assert_eq!(
        (context.provider.as_deref(), context.reasoning_effort),
        (None, None)
    );
    assert_eq!(
        (context.window, context.compact_percent),
        (Some(9000), Some(50))
    );
    let (_, ignored) = crate::trust::untrusted(project.clone());
    assert_eq!(
        ignored,
        [
            "context.model",
            "context.provider",
            "context.reasoning_effort"
        ]
    );
    let trusted = Config::merge(layers(project), Trust::Trusted).expect("merge");
    let context = &trusted.settings.context;
    assert_eq!(context.model.as_deref(), Some("theirs"));
    assert_eq!(context.provider.as_deref(), Some("local"));
    // The summaries' choice is built like a role's: a provider gets a
    // client of its own; a model name alone shares the session's.
    let choice = context.summarizer().expect("a choice");
    assert!(choice.own_client());
    assert_eq!(choice.model.as_deref(), Some("theirs"));
    let named = file("[context]\nmodel = \"cheap\"\n")
        .context
        .summarizer()
        .expect("a choice");
    assert!(!named.own_client());
    assert_eq!(
        file("[context]\nwindow = 9000\n").context.summarizer(),
        None
    );
}
