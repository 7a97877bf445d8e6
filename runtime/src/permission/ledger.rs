//! The denial ledger (P8): too many automatic denials in Auto-Review pause
//! autonomy.
//!
//! Three denials in a row, or twenty in a session, trip it. An interactive
//! host then falls back to Ask; a headless one ends the turn with
//! `paused_by_denials`. The user's next message resets the streak (not the
//! session total); choosing a posture again clears the pause.

use super::Posture;
use super::engine::{Decision, Layer, Verdict};

/// Denials in a row that trip the ledger.
pub const CONSECUTIVE_LIMIT: u32 = 3;
/// Denials in a session that trip the ledger.
pub const TOTAL_LIMIT: u32 = 20;

/// Counts automatic denials under Auto-Review.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DenialLedger {
    consecutive: u32,
    total: u32,
    paused: bool,
}

/// The ledger just tripped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trip {
    /// Denials in a row when it tripped.
    pub consecutive: u32,
    /// Denials in the session when it tripped.
    pub total: u32,
}

impl Trip {
    /// Why autonomy paused, in words.
    pub fn reason(&self) -> String {
        if self.consecutive >= CONSECUTIVE_LIMIT {
            format!("{} automatic denials in a row", self.consecutive)
        } else {
            format!("{} automatic denials in this session", self.total)
        }
    }
}

impl DenialLedger {
    /// Counts one decision made while `posture` was in force; returns the
    /// trip when this decision trips the ledger.
    pub fn record(&mut self, posture: Posture, decision: &Decision) -> Option<Trip> {
        let automatic = matches!(
            decision.layer,
            Layer::Rule | Layer::Floor | Layer::Posture | Layer::Guardian
        );
        if posture != Posture::Auto || !automatic || self.paused {
            return None;
        }
        match decision.verdict {
            Verdict::Allow => {
                self.consecutive = 0;
                None
            }
            Verdict::Deny => {
                self.consecutive += 1;
                self.total += 1;
                if self.consecutive >= CONSECUTIVE_LIMIT || self.total >= TOTAL_LIMIT {
                    self.paused = true;
                    Some(Trip {
                        consecutive: self.consecutive,
                        total: self.total,
                    })
                } else {
                    None
                }
            }
        }
    }

    /// A user message: the streak starts over.
    pub fn user_message(&mut self) {
        self.consecutive = 0;
    }

    /// The user chose a posture again: autonomy resumes, the counts stay.
    pub fn resume(&mut self) {
        self.paused = false;
        self.consecutive = 0;
    }

    /// Whether autonomy is paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// (in a row, in the session).
    pub fn counts(&self) -> (u32, u32) {
        (self.consecutive, self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deny(layer: Layer) -> Decision {
        Decision::new(Verdict::Deny, layer, "no")
    }

    fn allow() -> Decision {
        Decision::new(Verdict::Allow, Layer::Guardian, "ok")
    }

    #[test]
    fn three_in_a_row_trip_and_an_allow_or_a_user_message_resets_the_streak() {
        let mut ledger = DenialLedger::default();
        assert_eq!(ledger.record(Posture::Auto, &deny(Layer::Guardian)), None);
        assert_eq!(ledger.record(Posture::Auto, &deny(Layer::Floor)), None);
        assert_eq!(ledger.record(Posture::Auto, &allow()), None);
        assert_eq!(ledger.record(Posture::Auto, &deny(Layer::Rule)), None);
        ledger.user_message();
        assert_eq!(ledger.record(Posture::Auto, &deny(Layer::Guardian)), None);
        assert_eq!(ledger.record(Posture::Auto, &deny(Layer::Guardian)), None);
        let trip = ledger.record(Posture::Auto, &deny(Layer::Posture));
        assert_eq!(
            trip,
            Some(Trip {
                consecutive: 3,
                total: 6
            })
        );
        assert!(ledger.is_paused());
        assert_eq!(
            ledger.record(Posture::Auto, &deny(Layer::Guardian)),
            None,
            "trips once"
        );
    }

    #[test]
    fn twenty_in_a_session_trip_even_when_never_three_in_a_row() {
        let mut ledger = DenialLedger::default();
        let mut tripped = None;
        for n in 1..=40 {
            let decision = if n % 3 == 0 {
                allow()
            } else {
                deny(Layer::Guardian)
            };
            if let Some(trip) = ledger.record(Posture::Auto, &decision) {
                tripped = Some((n, trip));
                break;
            }
        }
        assert_eq!(
            tripped,
            Some((
                29,
                Trip {
                    consecutive: 2,
                    total: 20
                }
            ))
        );
    }

    #[test]
    fn only_automatic_denials_under_auto_review_count() {
        let mut ledger = DenialLedger::default();
        for _ in 0..5 {
            assert_eq!(ledger.record(Posture::Suggest, &deny(Layer::Posture)), None);
            assert_eq!(ledger.record(Posture::Auto, &deny(Layer::Mode)), None);
            assert_eq!(ledger.record(Posture::Auto, &deny(Layer::User)), None);
        }
        assert_eq!(ledger.counts(), (0, 0));
        ledger.resume();
        assert!(!ledger.is_paused());
    }
}
