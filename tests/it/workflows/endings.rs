//! Every way a step ends ends its run: through the engine with a scripted
//! model (outcomes × retries × dependents), and through the binary (the
//! hang of a check step answering with no tool call; checks rendering
//! `{{item}}`, `{{index}}` and `{{vars.X}}` as quoted shell words).

use std::path::Path;

use cadre::actors::host::ModelChoice;
use cadre::runtime::permission::Posture;
use cadre::runtime::protocol::Event;
use cadre::workflows::scheduler::State;

use super::Harness;
use crate::support::PATIENCE;
use crate::support::cli::Output;
use crate::support::hermetic::Hermetic;

/// Answers with text only: a claim with no tool call behind it.
const TEXT_ONLY: &str = "[[response]]\nrepeat = true\ntext = \"done, all good\"\n";

/// Lists the workspace, then answers `[1, 2]`.
const WITH_A_CALL: &str = "[[response]]\niteration = 1\nrepeat = true\n[[response.tool_calls]]\nname = \"list_dir\"\narguments = { path = \".\" }\n\n[[response]]\niteration = 2\nrepeat = true\ntext = \"[1, 2]\"\n";

/// How a generated step's attempt ends.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Text only under a check: the check fails without running.
    NoCallUnderCheck,
    /// Text that is not JSON for a JSON step.
    NotJson,
    /// JSON that breaks its schema.
    BreaksSchema,
    /// A call, a JSON answer, a failing check command.
    CheckFails,
    /// A call, a JSON answer, a passing check.
    Verified,
}

impl Outcome {
    const ALL: [Outcome; 5] = [
        Outcome::NoCallUnderCheck,
        Outcome::NotJson,
        Outcome::BreaksSchema,
        Outcome::CheckFails,
        Outcome::Verified,
    ];

    fn script(self) -> &'static str {
        match self {
            Outcome::NoCallUnderCheck | Outcome::NotJson => TEXT_ONLY,
            Outcome::BreaksSchema | Outcome::CheckFails | Outcome::Verified => WITH_A_CALL,
        }
    }

    fn keys(self) -> &'static str {
        match self {
            Outcome::NoCallUnderCheck => "check = \"true\"\n",
            Outcome::NotJson => "output = \"json\"\n",
            Outcome::BreaksSchema => "output = \"json\"\noutput_schema = { type = \"object\" }\n",
            Outcome::CheckFails => "output = \"json\"\ncheck = \"false\"\n",
            Outcome::Verified => "output = \"json\"\ncheck = \"true\"\n",
        }
    }

    fn succeeds(self) -> bool {
        matches!(self, Outcome::Verified)
    }
}

/// A small seeded generator (xorshift), so a failing case names its seed.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_generated_outcome_ends_its_run_through_the_engine_with_counts_that_add_up() {
    let mut rng = Seeded(0x5eed_cade);
    for case in 0..6 {
        let outcome = Outcome::ALL[(case % Outcome::ALL.len() as u64) as usize];
        let retries = rng.next(2);
        let items = 1 + rng.next(3);
        let dependents = rng.next(2) == 1;
        let list: Vec<String> = (0..items).map(|i| format!("\"i{i}\"")).collect();
        let mut text = format!(
            "[workflow]\nname = \"g\"\n[[steps]]\nname = \"work\"\nprompt = \"do {{{{item}}}}\"\nfor_each = [{}]\nretries = {retries}\n{}",
            list.join(", "),
            outcome.keys()
        );
        if dependents {
            text.push_str("[[steps]]\nname = \"after\"\nneeds = [\"work\"]\nprompt = \"sum up\"\n");
        }
        let harness = Harness::with_model(ModelChoice::ScriptText {
            text: outcome.script().into(),
            name: "script.toml".into(),
        })
        .await;
        let why = format!(
            "case {case}: {outcome:?}, retries {retries}, {items} items, dependents {dependents}"
        );
        let finished = harness.run(&text, Posture::Auto, None).await;
        let completed = finished
            .events
            .iter()
            .find_map(|e| match e {
                Event::WorkflowCompleted { counts, .. } => Some(counts.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{why}: no workflow.completed"));
        let counts = &finished.report.counts;
        let total = items as usize + usize::from(dependents);
        assert_eq!(counts.values().sum::<usize>(), total, "{why}: {counts:?}");
        assert_eq!(
            completed.values().sum::<u64>(),
            total as u64,
            "{why}: the event's counts"
        );
        let (good, bad) = if outcome.succeeds() {
            (State::Verified, State::Failed)
        } else {
            (State::Failed, State::Verified)
        };
        assert_eq!(counts[&good], items as usize, "{why}: {counts:?}");
        assert_eq!(counts[&bad], 0, "{why}");
        let after = match (dependents, outcome.succeeds()) {
            (false, _) => None,
            (true, true) => Some(State::Finalized),
            (true, false) => Some(State::Blocked),
        };
        if let Some(after) = after {
            assert_eq!(
                finished.states("after", None).last().map(String::as_str),
                Some(after.as_str()),
                "{why}"
            );
        }
        // Each item ran 1 + retries attempts when it failed, 1 when not.
        let attempts = finished
            .states("work", Some(0))
            .iter()
            .filter(|s| *s == "dispatched")
            .count();
        let expected = if outcome.succeeds() {
            1
        } else {
            1 + retries as usize
        };
        assert_eq!(attempts, expected, "{why}");
    }
}

/// `cadre workflow run FILE` in `dir`'s workspace with `script`, its own
/// home, configuration and data.
pub(super) async fn run_binary(dir: &Path, workflow: &str, script: &str, extra: &[&str]) -> Output {
    let file = dir.join("wf.toml");
    std::fs::write(&file, workflow).expect("workflow");
    let script_file = dir.join("script.toml");
    std::fs::write(&script_file, script).expect("script");
    let workspace = dir.join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let s = |p: &Path| p.to_str().expect("utf-8").to_string();
    let mut args = vec![
        "workflow".to_string(),
        "run".into(),
        s(&file),
        "--script".into(),
        s(&script_file),
        "--workspace".into(),
        s(&workspace),
        "--data-dir".into(),
        s(&dir.join("data")),
        "--config-dir".into(),
        s(&dir.join("config")),
        "--output-format".into(),
        "stream-json".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .hermetic()
        .args(&args)
        .current_dir(&workspace)
        .env("HOME", dir.join("home"))
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_MODEL")
        .env_remove("CADRE_HOME")
        .env_remove("CADRE_CONFIG_DIR")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn cadre");
    let output = tokio::time::timeout(PATIENCE * 2, child.wait_with_output())
        .await
        .expect("the run ended: it did not wait forever")
        .expect("output");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The `workflow.completed` line of stream-json output.
pub(super) fn completed(out: &Output) -> serde_json::Value {
    out.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "workflow.completed")
        .unwrap_or_else(|| panic!("no workflow.completed in:\n{}\n{}", out.stdout, out.stderr))
}

#[tokio::test]
async fn regression_a_check_step_answering_with_no_tool_call_hung_the_run() {
    let dir = tempfile::tempdir().expect("dir");
    let text = "[workflow]\nname = \"hang\"\n[[steps]]\nname = \"one\"\nprompt = \"say hi\"\ncheck = \"true\"\nretries = 1\n[[steps]]\nname = \"two\"\nneeds = [\"one\"]\nprompt = \"after\"\n";
    let out = run_binary(dir.path(), text, TEXT_ONLY, &[]).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let done = completed(&out);
    assert_eq!(done["status"], "failed");
    assert_eq!(done["counts"]["failed"], 1);
    assert_eq!(done["counts"]["blocked"], 1);
    assert!(
        out.stdout
            .contains("check failed: the step claims a result with no tool call behind it"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn a_check_renders_item_index_and_vars_as_single_words_an_item_cannot_inject_into() {
    let dir = tempfile::tempdir().expect("dir");
    // Each check passes only if it saw its values literally: an item that
    // split into two commands would fail `test` (and try to make PWNED).
    let text = "[workflow]\nname = \"quoted\"\n[vars]\nwho = \"it's me\"\n[[steps]]\nname = \"each\"\nfor_each = [\"a; touch PWNED\", \"$(touch PWNED2)\"]\nprompt = \"look at {{item}}\"\ncheck = '''test {{item}} = \"$(printf '%s' 'a; touch PWNED')\" -o {{item}} = '$(touch PWNED2)' && test {{index}} -le 1 && test {{vars.who}} = \"it's me\"'''\n";
    let out = run_binary(dir.path(), text, WITH_A_CALL, &[]).await;
    let done = completed(&out);
    assert_eq!(
        (out.code, done["counts"]["verified"].as_u64()),
        (0, Some(2)),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    let ws = dir.path().join("ws");
    assert!(!ws.join("PWNED").exists() && !ws.join("PWNED2").exists());
}
