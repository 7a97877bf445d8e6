//! The turn's side of compaction (CX2): when to compact, the summary
//! request, the fallback, and what a context-length error does. The
//! decisions are `context`'s pure functions; this file keeps the turn's
//! state and says what to perform.

use std::sync::Arc;

use super::{Phase, TurnConfig, TurnEffect, TurnMachine, TurnOutcome};
use crate::context::{
    self, Compaction, CompactionKind, SUMMARY_MAX_BYTES, SUMMARY_SYSTEM, keep_from,
    summary_instruction, transcript,
};
use crate::message::Message;
use crate::model::{ModelError, ModelRequest, ProviderUsage};
use crate::protocol::{Event, FailureCategory};

/// The turn's view of its context window.
#[derive(Debug)]
pub(super) struct Window {
    /// The window in tokens: the configured one, narrowed when a server
    /// states a smaller one in an overflow error.
    pub(super) window: u64,
    /// The threshold's percentage of it.
    percent: u8,
    /// The window is cadre's guess, not known: what does not fit it is
    /// sent anyway (see `ContextBudget::assumed`); a server that states
    /// its window makes it known.
    assumed: bool,
    /// Tokens of the system prompt and the tool schemas, the same for every
    /// request of the turn.
    fixed: u64,
    /// How many messages the last request sent, and the prompt tokens the
    /// provider counted for it.
    reported: Option<(usize, u64)>,
    /// Messages the request in flight sends (base and tail).
    pub(super) sent: usize,
    /// A compaction was asked for (`Op::Compact`).
    pub(super) requested: bool,
    /// An overflow error was already answered by compacting and retrying:
    /// another one ends the turn (one retry, CX2).
    overflow_retried: bool,
    /// Where the summary in flight cuts the view, and the tokens before.
    pending: Option<(usize, u64)>,
    /// The estimate the last compaction left. When even it was past the
    /// threshold (a large record, the tools), the next one waits until the
    /// conversation grew by a tenth of the window: not a summary request
    /// before every request.
    floor: u64,
}

impl Window {
    pub(super) fn new(config: &TurnConfig) -> Self {
        let tools: usize = config
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + context::json_bytes(&t.parameters) + 32)
            .sum();
        Self {
            window: config.context_budget.window,
            percent: config.context_budget.threshold_percent,
            assumed: config.context_budget.assumed,
            fixed: context::tokens_of(config.system.len() + tools),
            reported: None,
            sent: 0,
            requested: config.compact_first,
            overflow_retried: false,
            pending: None,
            floor: 0,
        }
    }

    fn threshold(&self) -> u64 {
        self.window.saturating_mul(u64::from(self.percent)) / 100
    }

    /// Whether a request of `tokens` is compacted first (unless asked).
    fn due(&self, tokens: u64) -> bool {
        let after_last = self.floor.saturating_add(self.window / 10);
        tokens > self.window || tokens > self.threshold().max(after_last)
    }

    /// The provider answered the request in flight.
    pub(super) fn answered(&mut self, usage: Option<ProviderUsage>) {
        self.overflow_retried = false;
        self.reported = usage
            .filter(|u| u.prompt_tokens > 0)
            .map(|u| (self.sent, u.prompt_tokens));
    }
}

impl TurnMachine {
    /// The conversation the next request sends.
    fn current_view(&self) -> Vec<Arc<Message>> {
        self.base.iter().chain(self.tail.iter()).cloned().collect()
    }

    /// The tokens the next request takes: the larger of the bytes estimate
    /// and the provider's count of the last request plus the estimate of
    /// what came after it (a provider that truncates silently reports too
    /// few, so its count never lowers the estimate).
    pub(super) fn context_tokens(&self) -> u64 {
        // Asked before every request: no copy of the conversation.
        let view = || self.base.iter().chain(self.tail.iter()).map(AsRef::as_ref);
        let estimated = self.window.fixed + context::estimate(view());
        match self.window.reported {
            Some((covered, prompt)) if covered <= self.base.len() + self.tail.len() => {
                let since = context::estimate(view().skip(covered));
                estimated.max(prompt + since)
            }
            Some(_) | None => estimated,
        }
    }

    /// The summary the turn waits for, as its `pre_compact` hooks read
    /// it: the conversation's estimated tokens and the context window.
    pub fn compacting(&self) -> Option<(u64, u64)> {
        self.window
            .pending
            .map(|(_, tokens)| (tokens, self.window.window))
    }

    /// Starts a compaction when one is due; `true` when the turn now waits
    /// for a summary or has ended, `false` when the request may go.
    pub(super) fn compact_if_due(&mut self, effects: &mut Vec<TurnEffect>) -> bool {
        let tokens = self.context_tokens();
        let asked = std::mem::take(&mut self.window.requested);
        if !asked && !self.window.due(tokens) {
            return false;
        }
        let view = self.current_view();
        let first = usize::from(view.first().is_some_and(|m| is_record(m)));
        let budget = self
            .config
            .context_budget
            .keep_tokens()
            .min(self.window.window / 4);
        let mut cut = keep_from(&view, budget).max(first);
        if asked && cut == first && view.len() > first + 1 {
            // Asked for, and everything fits in the kept part: keep only
            // the last exchange that can stand alone.
            cut = context::valid_cuts(&view)
                .into_iter()
                .rfind(|&c| c > first && c < view.len())
                .unwrap_or(cut);
        }
        if tokens > self.window.window || cut <= first {
            // No room to ask for a summary, or nothing to summarise.
            if tokens <= self.window.threshold() {
                return false;
            }
            let target = self.window.threshold();
            return self.fallback(tokens, target, effects);
        }
        let max_bytes = usize::try_from(self.window.window.saturating_mul(2)).unwrap_or(usize::MAX);
        let text = summary_instruction(&transcript(&view[..cut], max_bytes));
        let mut context = self.config.context.clone();
        context.iteration = self.iteration;
        self.window.pending = Some((cut, tokens));
        self.phase = Phase::Compacting;
        effects.push(TurnEffect::Summarize(ModelRequest {
            system: Arc::from(SUMMARY_SYSTEM),
            history: Arc::from(vec![Arc::new(Message::user(text))]),
            turn: Vec::new(),
            reminder: None,
            tools: Arc::from(Vec::new()),
            context,
            model: self.config.model.clone(),
            single_attempt: false,
        }));
        true
    }

    /// The summary came back (`None`: the request failed): compact with
    /// it, or fall back, then send the request it was for.
    pub(super) fn on_summary(&mut self, summary: Option<String>, effects: &mut Vec<TurnEffect>) {
        self.phase = Phase::AwaitingModel;
        let Some((cut, before)) = self.window.pending.take() else {
            return self.send(effects);
        };
        let summary = summary
            .map(|s| crate::tool::truncate_middle(s.trim(), SUMMARY_MAX_BYTES))
            .filter(|s| !s.is_empty());
        let Some(summary) = summary else {
            let target = self.window.threshold();
            if !self.fallback(before, target, effects) {
                self.send(effects);
            }
            return;
        };
        let view = self.current_view();
        let cut = cut.min(view.len());
        let record = Compaction {
            kind: CompactionKind::Model,
            summary: Some(summary),
            pinned: self.config.pinned.render(&self.trail),
            keep: view.len() - cut,
            stubs: Vec::new(),
            tokens_before: before,
            tokens_after: 0,
        };
        if !self.install(record, &view[cut..], self.window.threshold(), effects) {
            self.send(effects);
        }
    }

    /// The deterministic fallback: keep every message (the old record
    /// aside) and stub old outputs, oldest first, until the estimate is at
    /// `target`. `true` when the turn ended because nothing fits.
    fn fallback(&mut self, before: u64, target: u64, effects: &mut Vec<TurnEffect>) -> bool {
        let view = self.current_view();
        let (first, summary) = match view.first().map(AsRef::as_ref) {
            Some(Message::Compaction(old)) => (1, old.summary.clone()),
            Some(_) | None => (0, None),
        };
        let record = Compaction {
            kind: CompactionKind::Fallback,
            summary,
            pinned: self.config.pinned.render(&self.trail),
            keep: view.len() - first,
            stubs: Vec::new(),
            tokens_before: before,
            tokens_after: 0,
        };
        self.install(record, &view[first..], target, effects)
    }

    /// Stubs what `record` keeps until it reaches `target` (when it does
    /// not already), and records it, unless even then the request cannot
    /// fit the window: then the turn fails as the task's (`true`).
    fn install(
        &mut self,
        mut record: Compaction,
        kept: &[Arc<Message>],
        target: u64,
        effects: &mut Vec<TurnEffect>,
    ) -> bool {
        let draft: Vec<Arc<Message>> =
            std::iter::once(Arc::new(Message::Compaction(Box::new(record.clone()))))
                .chain(kept.iter().cloned())
                .collect();
        let (stubs, _) = context::fit_by_stubs(&draft, self.window.fixed, target);
        record.stubs = stubs;
        let mut raw = self.current_view();
        raw.push(Arc::new(Message::Compaction(Box::new(record.clone()))));
        let after =
            self.window.fixed + context::estimate(context::view(&raw).iter().map(AsRef::as_ref));
        let fits = after <= self.window.window;
        // A fallback that stubs nothing would only add a record.
        let idle = record.kind == CompactionKind::Fallback && record.stubs.is_empty();
        if idle && (fits || self.window.assumed) {
            // Sent as it is; past a window that is only a guess, the
            // server decides (a refusal comes back as an overflow).
            return false;
        }
        if !fits && !self.window.assumed {
            let window = self.window.window;
            self.finish(
                TurnOutcome::Failed {
                    category: FailureCategory::Agent,
                    message: format!(
                        "the conversation does not fit the model's context window of {window} \
                         tokens even after compaction (about {after} tokens remain: the system \
                         prompt, the tools and the recent messages); use a model with a larger \
                         window, set `[context] window` if it is larger, or split the task"
                    ),
                    retryable: false,
                },
                effects,
            );
            return true;
        }
        record.tokens_after = after;
        effects.push(TurnEffect::Emit(Event::ContextCompacted {
            agent: self.config.context.agent_id.to_string(),
            tokens_before: record.tokens_before,
            tokens_after: after,
            kind: record.kind,
        }));
        self.record(Message::Compaction(Box::new(record)), effects);
        self.base = context::view(&self.current_view()).into();
        self.tail.clear();
        self.window.reported = None;
        self.window.floor = after;
        false
    }

    /// The server said the request is longer than the window: compact
    /// (the fallback: a summary request would be as long) and retry once;
    /// a second refusal is the task's failure, never a retryable one.
    pub(super) fn on_overflow(&mut self, error: &ModelError, effects: &mut Vec<TurnEffect>) {
        if let Some(stated) = error.stated_window() {
            self.window.window = self.window.window.min(stated.max(1));
            self.window.assumed = false;
        }
        if self.window.overflow_retried {
            let window = self.window.window;
            return self.finish(
                TurnOutcome::Failed {
                    category: FailureCategory::Agent,
                    message: format!(
                        "the conversation does not fit the model's context window ({window} \
                         tokens) even after compaction: {error}"
                    ),
                    retryable: false,
                },
                effects,
            );
        }
        self.window.overflow_retried = true;
        let tokens = self.context_tokens();
        // The estimate said it fit and the server disagreed: aim well under.
        let target = self.window.threshold().min(tokens.saturating_mul(2) / 3);
        if !self.fallback(tokens, target, effects) {
            self.send(effects);
        }
    }
}

fn is_record(message: &Message) -> bool {
    matches!(message, Message::Compaction(_))
}
