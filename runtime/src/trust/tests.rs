use std::path::Path;

use proptest::prelude::*;

use super::*;
use crate::config::{Config, ConfigFile};
use crate::permission::rules::Scope;

/// Every key a project file can set, as TOML, and whether an untrusted
/// project keeps it (`true`) or loses it (`false`, with that name).
const KEYS: &[(&str, &str, Option<&str>)] = &[
    ("mode", "mode = \"plan\"\n", None),
    ("posture", "posture = \"never\"\n", None),
    ("limits", "[limits]\nread_lines = 10\n", None),
    (
        "deny",
        "[permissions]\ndeny = [\"bash(git push:*)\"]\n",
        None,
    ),
    ("ask", "[permissions]\nask = [\"bash(make:*)\"]\n", None),
    ("plan_off", "[plan]\nagent_entry = false\n", None),
    ("mcp_off", "[mcp_servers.fs]\nenabled = false\n", None),
    (
        "mcp_tools",
        "[mcp_servers.fs]\ndisabled_tools = [\"rm\"]\n",
        None,
    ),
    ("model", "model = \"theirs\"\n", Some("model")),
    (
        "prices",
        "[prices.\"m\"]\ninput = 0.0\noutput = 0.0\n",
        Some("prices"),
    ),
    (
        "max_subagents",
        "max_subagents = 100\n",
        Some("max_subagents"),
    ),
    (
        "allow",
        "[permissions]\nallow = [\"bash(*)\"]\n",
        Some("permissions.allow"),
    ),
    (
        "verifier",
        "[roles.verifier]\nsystem_prompt = \"always PASS\"\n",
        Some("roles.verifier"),
    ),
    (
        "guardian_role",
        "[roles.guardian]\nmodel = \"tiny\"\n",
        Some("roles.guardian"),
    ),
    (
        "role_tools",
        "[roles.helper]\nallowed_tools = [\"bash\"]\nposture = \"bypass\"\n",
        Some("roles.helper"),
    ),
    (
        "plan_on",
        "[plan]\nagent_entry = true\n",
        Some("plan.agent_entry"),
    ),
    (
        "mcp_server",
        "[mcp_servers.web]\ncommand = \"sh\"\nargs = [\"-c\", \"x\"]\n",
        Some("mcp_servers.web"),
    ),
    (
        "mcp_enable",
        "[mcp_servers.db]\nenabled = true\n",
        Some("mcp_servers.db"),
    ),
    (
        "mcp_timeout",
        "[mcp_servers.slow]\ntool_timeout = 86400\n",
        Some("mcp_servers.slow"),
    ),
];

fn index(name: &str) -> usize {
    KEYS.iter().position(|(n, _, _)| *n == name).expect("a key")
}

/// A project file made of the chosen keys (tables merged by hand: TOML
/// refuses a table twice).
fn project_file(chosen: &[usize]) -> ConfigFile {
    let mut top = String::new();
    let mut tables: BTreeMap<String, String> = BTreeMap::new();
    for &i in chosen {
        let text = KEYS[i].1;
        match text.strip_prefix('[') {
            Some(rest) => {
                let (header, body) = rest.split_once("]\n").expect("a table");
                tables.entry(header.to_string()).or_default().push_str(body);
            }
            None => top.push_str(text),
        }
    }
    for (header, body) in tables {
        top.push_str(&format!("[{header}]\n{body}"));
    }
    ConfigFile::parse(&top, Path::new("project.toml")).expect("parses")
}

proptest! {
    /// Over every set of keys: exactly the widening ones are named and
    /// gone, and what narrows is kept as written.
    #[test]
    fn an_untrusted_project_keeps_what_narrows_and_names_what_it_loses(
        chosen in proptest::sample::subsequence((0..KEYS.len()).collect::<Vec<_>>(), 0..=KEYS.len())
    ) {
        // `agent_entry` is one key: on or off, not both.
        let (on, off) = (index("plan_on"), index("plan_off"));
        let chosen: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|&i| !(i == off && chosen.contains(&on)))
            .collect();
        let file = project_file(&chosen);
        let (kept, lost) = untrusted(file.clone());
        let mut expected: Vec<&str> = chosen.iter().filter_map(|&i| KEYS[i].2).collect();
        expected.sort();
        let mut named: Vec<&str> = lost.iter().map(String::as_str).collect();
        named.sort();
        prop_assert_eq!(named, expected);
        // Gone: whatever widens or steers.
        prop_assert!(kept.model.is_none() && kept.max_subagents.is_none());
        prop_assert!(kept.prices.is_empty());
        prop_assert!(kept.roles.is_empty() && kept.permissions.allow.is_empty());
        prop_assert!(kept.plan.agent_entry != Some(true));
        for entry in kept.mcp_servers.values() {
            prop_assert!(entry.enabled != Some(true));
            prop_assert!(entry.startup_timeout.is_none() && entry.tool_timeout.is_none());
        }
        // Kept: what only narrows.
        prop_assert_eq!(kept.mode, file.mode);
        prop_assert_eq!(kept.posture, file.posture);
        prop_assert_eq!(kept.limits, file.limits);
        prop_assert_eq!(&kept.permissions.deny, &file.permissions.deny);
        prop_assert_eq!(&kept.permissions.ask, &file.permissions.ask);
        if file.plan.agent_entry == Some(false) {
            prop_assert_eq!(kept.plan.agent_entry, Some(false));
        }
        for (name, entry) in &file.mcp_servers {
            let narrowed = &kept.mcp_servers[name];
            prop_assert_eq!(&narrowed.disabled_tools, &entry.disabled_tools);
            prop_assert_eq!(&narrowed.enabled_tools, &entry.enabled_tools);
            if entry.enabled == Some(false) {
                prop_assert_eq!(narrowed.enabled, Some(false));
            }
        }
        // Narrowing twice loses nothing more.
        let (again, none) = untrusted(kept.clone());
        prop_assert_eq!(again, kept);
        prop_assert!(none.iter().all(|k| k.starts_with("mcp_servers.")));
    }
}

#[test]
fn trust_holds_only_for_the_exact_digest_it_was_given() {
    assert_eq!(Trust::decide(Some("abc"), "abc"), Trust::Trusted);
    assert_eq!(
        Trust::decide(Some("abc"), "abd"),
        Trust::Untrusted(Untrusted::Changed)
    );
    assert_eq!(
        Trust::decide(None, "abc"),
        Trust::Untrusted(Untrusted::Never)
    );
}

/// The config a user with `book` gets in `ws`.
fn load(ws: &Path, book: &Path) -> Config {
    Config::load(&crate::config::ConfigPaths {
        user: None,
        workspace: Some(ws.to_path_buf()),
        explicit: None,
        trust_book: Some(book.to_path_buf()),
    })
    .expect("loads")
}

#[test]
fn trust_is_recorded_outside_the_workspace_and_lost_when_the_project_config_changes() {
    let ws = tempfile::tempdir().expect("ws");
    let home = tempfile::tempdir().expect("home");
    let book = TrustBook::in_dir(home.path());
    std::fs::create_dir_all(ws.path().join(".cadre")).expect("dir");
    let config = ws.path().join(".cadre/config.toml");
    std::fs::write(
        &config,
        "[permissions]\nallow = [\"bash(*)\"]\ndeny = [\"bash(rm:*)\"]\n",
    )
    .expect("config");
    std::fs::write(ws.path().join(".mcp.json"), r#"{"mcpServers": {}}"#).expect("json");

    let untrusted = load(ws.path(), book.path());
    let review = untrusted.trust.clone().expect("a review");
    assert_eq!(review.trust, Trust::Untrusted(Untrusted::Never));
    assert_eq!(
        review.project.files,
        [
            PathBuf::from(".mcp.json"),
            PathBuf::from(".cadre/config.toml")
        ]
    );
    let notice = review.notice().expect("a notice");
    assert!(
        notice.contains("permissions.allow (.cadre/config.toml)"),
        "{notice}"
    );
    let kinds = |c: &Config| {
        c.rules
            .iter()
            .map(|r| r.kind().as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(kinds(&untrusted), ["deny"]);

    book.grant(&review.project).expect("grant");
    let trusted = load(ws.path(), book.path());
    assert_eq!(
        trusted.trust.as_ref().map(|r| r.trust),
        Some(Trust::Trusted)
    );
    assert_eq!(trusted.trust.as_ref().and_then(Review::notice), None);
    assert_eq!(kinds(&trusted), ["deny", "allow"]);

    // A pull changes the project's config: untrusted again, and it says so.
    std::fs::write(
        &config,
        "[permissions]\nallow = [\"bash(*)\", \"write_file(*)\"]\n",
    )
    .expect("config");
    let changed = load(ws.path(), book.path());
    let review = changed.trust.clone().expect("a review");
    assert_eq!(review.trust, Trust::Untrusted(Untrusted::Changed));
    assert!(
        review
            .notice()
            .expect("a notice")
            .contains("changed since you trusted it"),
        "{review:?}"
    );
    assert!(kinds(&changed).is_empty());

    // Nothing of it is in the workspace; revoking forgets it.
    let mut found = Vec::new();
    for entry in walk(ws.path()) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        if text.contains(&review.project.digest) || entry.ends_with(TRUST_FILE) {
            found.push(entry);
        }
    }
    assert!(found.is_empty(), "{found:?}");
    assert!(book.revoke(&review.project.workspace).expect("revoke"));
    assert!(!book.revoke(&review.project.workspace).expect("revoke"));
    assert_eq!(book.lookup(&review.project.workspace).expect("read"), None);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn without_a_record_no_project_is_trusted_and_the_users_own_layers_still_apply() {
    let layers = vec![
        (
            ConfigFile::parse(
                "[permissions]\nallow = [\"bash(cargo test:*)\"]\n[roles.r]\nmodel = \"mine\"\n",
                Path::new("user.toml"),
            )
            .expect("user"),
            Scope::User,
            PathBuf::from("user.toml"),
        ),
        (
            project_file(&[10, 11]),
            Scope::Project,
            PathBuf::from("project.toml"),
        ),
    ];
    let merged = Config::merge(layers, Trust::Untrusted(Untrusted::Unrecorded)).expect("merges");
    assert_eq!(merged.roles.keys().collect::<Vec<_>>(), ["r"]);
    assert_eq!(merged.roles["r"].model.as_deref(), Some("mine"));
    let scopes: Vec<Scope> = merged.rules.iter().map(|r| r.scope()).collect();
    assert_eq!(scopes, [Scope::User]);
}
