//! `cadre sessions list|show|fork` and `cadre plan approve|revise|withdraw|defer`:
//! the store, offline. `plan …` writes under the session's lease, so it is
//! refused while another process runs the session.

mod conversation;

use std::path::PathBuf;

use cadre_runtime::store::{QuestionnaireAnswer, QuestionnaireKind, Store, store_path};

use crate::args::{PlanArgs, PlanVerdict, SessionsAction, SessionsArgs};
use crate::exit::{self, CliError};
use crate::followup::Followup;
use crate::printable::printable;

/// Opens the store in `data_dir`; any failure is a configuration error.
fn open(data_dir: &std::path::Path) -> Result<Store, CliError> {
    Store::open(&store_path(data_dir)).map_err(|e| CliError::config(e.to_string()))
}

fn not_found(e: cadre_runtime::store::StoreError) -> CliError {
    CliError::usage(e.to_string())
}

/// When, as `YYYY-MM-DD HH:MM` UTC.
pub(crate) fn when(seconds: f64) -> String {
    let secs = seconds as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// `cadre sessions …`.
pub fn sessions(
    args: SessionsArgs,
    data_dir: PathBuf,
    followup: &Followup,
) -> Result<u8, CliError> {
    let mut store = open(&data_dir)?;
    match args.action {
        SessionsAction::List { limit } => {
            let sessions = store
                .list(limit)
                .map_err(|e| CliError::internal(e.to_string()))?;
            if sessions.is_empty() {
                crate::errln!("no sessions in {}", data_dir.display());
            }
            // Each id as the shortest prefix that names it alone: the ids
            // are time-ordered, so their first characters are shared.
            let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
            let short = store
                .short_ids(&ids)
                .map_err(|e| CliError::internal(e.to_string()))?;
            let width = short.iter().map(String::len).max().unwrap_or(0);
            for (s, short) in sessions.iter().zip(&short) {
                crate::outln!(
                    "{short:<width$}  {}  {:<7}  {}  {}",
                    when(s.updated_at),
                    s.mode.as_str(),
                    printable(&s.workspace),
                    printable(s.title.lines().next().unwrap_or_default())
                );
            }
        }
        SessionsAction::Show { session, full } => {
            let s = store.resolve(&session, None).map_err(not_found)?;
            crate::outln!("session    {}", s.id);
            if let Some(parent) = &s.parent_id {
                crate::outln!("forked from {parent}");
            }
            crate::outln!("workspace  {}", printable(&s.workspace));
            // What a resume uses: the stored mode and posture, unless its
            // flags (or CADRE_MODE, CADRE_POSTURE) choose others.
            crate::outln!(
                "mode       {} (a resume keeps it; --mode changes it)",
                s.mode
            );
            crate::outln!(
                "posture    {} (a resume keeps it; --posture changes it)",
                s.posture
            );
            let turns = store
                .turns_done(&s.id)
                .map_err(|e| CliError::internal(e.to_string()))?;
            crate::outln!(
                "turns      {turns} finished; the next is turn {}",
                turns + 1
            );
            crate::outln!("created    {}", when(s.created_at));
            crate::outln!("updated    {}", when(s.updated_at));
            let conversation = store
                .conversation(&s.id)
                .map_err(|e| CliError::internal(e.to_string()))?;
            crate::outln!("messages   {} in the conversation", conversation.len());
            crate::outln!("\nconversation:");
            let conversation: Vec<_> = conversation.into_iter().map(std::sync::Arc::new).collect();
            for line in conversation::lines(&conversation, full) {
                crate::outln!("{line}");
            }
            crate::outln!("\nadmitted:");
            for (source, state, content) in store
                .admitted(&s.id)
                .map_err(|e| CliError::internal(e.to_string()))?
            {
                let first = content.lines().next().unwrap_or_default();
                let shown: String = first.chars().take(100).collect();
                crate::outln!("  [{state:<7}] {source:<13} {}", printable(&shown));
            }
            if let Some(q) = store
                .pending_questionnaire(&s.id)
                .map_err(|e| CliError::internal(e.to_string()))?
            {
                crate::outln!(
                    "\nwaiting: {} ({}) · {} · sha256 {}",
                    q.id,
                    match q.kind {
                        QuestionnaireKind::PlanApproval => "plan approval",
                        QuestionnaireKind::PlanEntry => "plan entry",
                    },
                    q.plan_path,
                    q.sha256
                );
                crate::outln!("answer with: {}", answer_commands(followup, &s.id));
            }
        }
        SessionsAction::Fork { session } => {
            let id = uuid::Uuid::now_v7().to_string();
            let forked = store.fork(&session, &id).map_err(not_found)?;
            crate::outln!("{}", forked.id);
            crate::errln!(
                "forked {} into {}; continue it with: {}",
                forked.parent_id.unwrap_or_default(),
                forked.id,
                followup.exec(&["--resume", &forked.id, "PROMPT"])
            );
        }
        SessionsAction::Audit { session, json } => {
            let s = store.resolve(&session, None).map_err(not_found)?;
            let records = store
                .audit_with_agents(&s.id)
                .map_err(|e| CliError::internal(e.to_string()))?;
            if records.is_empty() {
                crate::errln!("session {} has no audited decisions", s.id);
            }
            for record in records {
                if json {
                    crate::outln!("{record}");
                } else {
                    crate::outln!("{}", printable(&audit_line(&record)));
                }
            }
        }
    }
    Ok(exit::SUCCESS)
}

/// An audit record as one line: when, which agent, and its transcript line.
fn audit_line(record: &str) -> String {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(record) else {
        return record.to_string();
    };
    let text = |key: &str| value[key].as_str().unwrap_or_default().to_string();
    format!(
        "{}  {:<6} {}",
        when(value["time"].as_f64().unwrap_or_default()),
        text("agent_id"),
        text("line")
    )
}

/// `cadre plan approve|revise|withdraw|defer SESSION`: answers the session's
/// waiting questionnaire, as the interactive answer would, holding the
/// session's lease (refused, exit 75, while another process runs it).
pub fn plan(args: PlanArgs, data_dir: PathBuf, followup: &Followup) -> Result<u8, CliError> {
    let answer = match (args.verdict, args.feedback) {
        (PlanVerdict::Approve, _) => QuestionnaireAnswer::Approve,
        (PlanVerdict::Defer, _) => QuestionnaireAnswer::Defer,
        (PlanVerdict::Withdraw, _) => QuestionnaireAnswer::Withdraw,
        (PlanVerdict::Revise, Some(feedback)) if !feedback.trim().is_empty() => {
            QuestionnaireAnswer::Revise { feedback }
        }
        (PlanVerdict::Revise, _) => {
            return Err(CliError::usage(
                "revise needs --feedback TEXT saying what to change",
            ));
        }
    };
    let mut store = open(&data_dir)?;
    let session = store.resolve(&args.session, None).map_err(not_found)?;
    let answered =
        crate::lease::with_lease(&mut store, &session.id, "answer its plan there", |store| {
            answer_plan(store, &data_dir, &session.id, &answer)
        })?;
    let next = match &answer {
        QuestionnaireAnswer::Approve | QuestionnaireAnswer::Revise { .. } => {
            format!(
                "; run it with: {}",
                followup.implement(&session.id, session.posture)
            )
        }
        QuestionnaireAnswer::Defer | QuestionnaireAnswer::Withdraw => String::new(),
    };
    crate::outln!("{answered} {}{next}", crate::render::answer_text(&answer));
    Ok(exit::SUCCESS)
}

/// Answers `session_id`'s waiting questionnaire with `answer`; returns the
/// questionnaire's id. Read under the lease, so what waits is what is
/// answered.
fn answer_plan(
    store: &mut Store,
    data_dir: &std::path::Path,
    session_id: &str,
    answer: &QuestionnaireAnswer,
) -> Result<String, CliError> {
    let Some(q) = store
        .pending_questionnaire(session_id)
        .map_err(|e| CliError::internal(e.to_string()))?
    else {
        return Err(CliError::usage(format!(
            "session {session_id} has no questionnaire waiting for an answer"
        )));
    };
    if q.kind == QuestionnaireKind::PlanEntry && *answer == QuestionnaireAnswer::Approve {
        // Entering Plan backs up the old plan around the answer.
        let plan_file = cadre_runtime::paths::DataDir::new(data_dir)
            .session(session_id)
            .plan_file();
        cadre_runtime::plan::enter(&plan_file, || {
            store.answer(session_id, &q.id, answer)?;
            Ok::<(), cadre_runtime::store::StoreError>(())
        })
        .map_err(|e| CliError::internal(format!("{e:?}")))?;
    } else {
        store
            .answer(session_id, &q.id, answer)
            .map_err(|e| CliError::usage(e.to_string()))?;
    }
    Ok(q.id)
}

/// How to answer a session's waiting plan: the approval in full, the other
/// answers named.
pub(crate) fn answer_commands(followup: &Followup, session_id: &str) -> String {
    format!(
        "{} (or revise --feedback TEXT, withdraw, defer)",
        followup.offline(&["plan", "approve", session_id])
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_print_as_utc_dates() {
        assert_eq!(super::when(0.0), "1970-01-01 00:00");
        assert_eq!(super::when(1_700_000_000.0), "2023-11-14 22:13");
        assert_eq!(super::when(951_782_400.0), "2000-02-29 00:00");
    }
}
