use cadre_runtime::Mode;
use cadre_runtime::protocol::{ApprovalDecision, PlanAction};
use cadre_runtime::store::QuestionnaireAnswer;

use super::*;

#[track_caller]
fn check(line: &str, expected: Line) {
    assert_eq!(parse(line), expected, "{line:?}");
}

fn command(command: Command) -> Line {
    Line::Command(command)
}

fn usage(usage: &'static str) -> Line {
    Line::Invalid(Invalid::Usage(usage))
}

#[test]
fn slash_commands() {
    check("/mode plan", command(Command::Mode(Some(Mode::Plan))));
    check("/mode work", command(Command::Mode(Some(Mode::Work))));
    check("/mode operate", command(Command::Mode(Some(Mode::Operate))));
    check("/mode agent", command(Command::Mode(Some(Mode::Work))));
    check("  /MODE   Plan  ", command(Command::Mode(Some(Mode::Plan))));
    check("/mode", command(Command::Mode(None)));
    check("/plan on", command(Command::Plan(PlanAction::On)));
    check("/plan off", command(Command::Plan(PlanAction::Off)));
    check("/plan status", command(Command::Plan(PlanAction::Status)));
    check("/plan view", command(Command::Plan(PlanAction::View)));
    check("/plan", command(Command::Plan(PlanAction::Status)));
    check("/config", command(Command::Config));
    check("/queue", command(Command::Queue));
    check("/help", command(Command::Help));
    check("/?", command(Command::Help));
    check("/quit", command(Command::Quit));
    check("/exit", command(Command::Quit));
    use crate::trust_cmd::TrustAction;
    check("/trust", command(Command::Trust(TrustAction::Show)));
    check("/trust show", command(Command::Trust(TrustAction::Show)));
    check("/trust yes", command(Command::Trust(TrustAction::Yes)));
    check("/trust grant", command(Command::Trust(TrustAction::Yes)));
    check("/trust no", command(Command::Trust(TrustAction::No)));
    check("/trust revoke", command(Command::Trust(TrustAction::No)));
}

#[test]
fn bad_arguments_name_the_usage() {
    check("/mode drive", usage("/mode [plan|work|operate]"));
    check("/mode plan work", usage("/mode [plan|work|operate]"));
    check("/plan maybe", usage("/plan on|off|status|view"));
    check("/plan on now", usage("/plan on|off|status|view"));
    check("/quit now", usage("/quit"));
    check("/config x", usage("/config"));
    check("/queue 3", usage("/queue"));
    check("/help me", usage("/help"));
    check("/trust maybe", usage("/trust [yes|no]"));
    check("/trust yes now", usage("/trust [yes|no]"));
}

#[test]
fn unknown_commands_are_named_as_typed_in_lower_case() {
    check(
        "/frobnicate",
        Line::Invalid(Invalid::Unknown("/frobnicate".into())),
    );
    check(
        "/Posture auto",
        Line::Invalid(Invalid::Unknown("/posture".into())),
    );
    check("/", Line::Invalid(Invalid::Unknown("/".into())));
}

#[test]
fn messages_and_blanks() {
    check("", Line::Blank);
    check("   \t ", Line::Blank);
    check("Add a greeting", Line::Message("Add a greeting".into()));
    check("  padded  ", Line::Message("padded".into()));
    check(
        "//etc/hosts is odd",
        Line::Message("/etc/hosts is odd".into()),
    );
    check("y", Line::Message("y".into()));
}

#[test]
fn approval_answers() {
    #[track_caller]
    fn check(text: &str, expected: Option<ApprovalDecision>) {
        assert_eq!(approval(text).map(|(d, _)| d), expected, "{text:?}");
    }
    check("y", Some(ApprovalDecision::AllowOnce));
    check(" Yes ", Some(ApprovalDecision::AllowOnce));
    check("s", Some(ApprovalDecision::AllowSession));
    check("session", Some(ApprovalDecision::AllowSession));
    check("n", Some(ApprovalDecision::Deny));
    check("NO", Some(ApprovalDecision::Deny));
    check("", None);
    check("maybe", None);
    check("y please", None);
    // A denial may say what to do instead.
    assert_eq!(
        approval("n, use the file tools instead"),
        Some((
            ApprovalDecision::Deny,
            Some("use the file tools instead".to_string())
        ))
    );
    assert_eq!(
        approval("deny  run the tests first "),
        Some((
            ApprovalDecision::Deny,
            Some("run the tests first".to_string())
        ))
    );
}

#[test]
fn plan_replies() {
    #[track_caller]
    fn check(text: &str, expected: Option<PlanReply>) {
        assert_eq!(plan_reply(text), expected, "{text:?}");
    }
    let answer = |a| Some(PlanReply::Answer(a));
    check("a", answer(QuestionnaireAnswer::Approve));
    check("approve", answer(QuestionnaireAnswer::Approve));
    check("D", answer(QuestionnaireAnswer::Defer));
    check("w", answer(QuestionnaireAnswer::Withdraw));
    check("r", Some(PlanReply::ReviseAsk));
    check(" revise ", Some(PlanReply::ReviseAsk));
    check(
        "r  split step 2 in two ",
        answer(QuestionnaireAnswer::Revise {
            feedback: "split step 2 in two".into(),
        }),
    );
    check("a now", None);
    check("yes", None);
    check("", None);
}

#[test]
fn restore_and_mcp() {
    let restore = |snapshot: &str, dry_run| {
        command(Command::Restore {
            snapshot: snapshot.into(),
            dry_run,
        })
    };
    check("/restore", command(Command::Snapshots));
    check("/restore list", command(Command::Snapshots));
    check("/restore 1a2b3c", restore("1a2b3c", false));
    check("/restore 1a2b3c --dry-run", restore("1a2b3c", true));
    check("/restore --dry-run 1a2b3c", restore("1a2b3c", true));
    const USAGE: &str = "/restore [list | SNAPSHOT [--dry-run]]";
    check("/restore --dry-run", usage(USAGE));
    check("/restore a b", usage(USAGE));
    check("/restore a --force", usage(USAGE));
    check("/mcp", command(Command::Mcp));
    check("/mcp list", usage("/mcp"));
    check("/compact", command(Command::Compact));
    check("/compact now", usage("/compact"));
}

#[test]
fn goal_commands() {
    let goal = |action| command(Command::Goal(action));
    let cmd = |command| goal(GoalAction::Command { command });
    let set = |objective: &str, tokens| {
        goal(GoalAction::Set {
            objective: objective.into(),
            budgets: Budgets {
                tokens,
                ..Budgets::default()
            },
            settings: GoalSettings::default(),
        })
    };
    check("/goal", goal(GoalAction::Show));
    check("/goal clear", goal(GoalAction::Clear));
    check("/goal pause", cmd(GoalCommand::Pause));
    check("/goal resume", cmd(GoalCommand::Resume));
    check("/goal complete", cmd(GoalCommand::Complete));
    check("/goal blocked", cmd(GoalCommand::Blocked));
    check(
        "/goal budget=50K",
        cmd(GoalCommand::TokenBudget(Some(50_000))),
    );
    check("/goal budget=clear", cmd(GoalCommand::TokenBudget(None)));
    check(
        "/goal edit make the tests pass",
        cmd(GoalCommand::Edit {
            objective: "make the tests pass".into(),
        }),
    );
    check(
        "/goal make the tests pass",
        set("make the tests pass", None),
    );
    check(
        "/goal make the tests pass budget=1.5M",
        set("make the tests pass", Some(1_500_000)),
    );
    let goal_usage = usage(GOAL_USAGE);
    check("/goal budget=lots", goal_usage.clone());
    check("/goal edit", goal_usage.clone());
    check("/goal ship budget=x", goal_usage);
}
