//! Authority that narrows live (S2): a parent's mode or posture change
//! reaches every running descendant before its next tool call.
//!
//! Each agent holds a [`LiveAuthority`]: its own mode and posture, and a
//! link to its parent's. What is in force is the narrowest along the chain
//! up to the session, read at the moment a call is gated or decided, so a
//! parent that switches to Plan (or to `never`) narrows its whole subtree
//! at once, with no message to deliver and no window in which a child still
//! acts on the old authority. A call already running finishes.

use std::sync::{Arc, PoisonError, RwLock};

use crate::mode::Mode;
use crate::permission::Posture;

#[derive(Debug, Clone, Copy)]
struct Own {
    mode: Mode,
    posture: Posture,
}

/// One agent's live mode and posture, under its parent's.
#[derive(Debug)]
pub struct LiveAuthority {
    own: RwLock<Own>,
    parent: Option<Arc<LiveAuthority>>,
}

impl LiveAuthority {
    /// A session's: no parent.
    pub fn root(mode: Mode, posture: Posture) -> Arc<Self> {
        Arc::new(Self {
            own: RwLock::new(Own { mode, posture }),
            parent: None,
        })
    }

    /// A child's, under `parent`; what it is given is narrowed by the
    /// parent's at every read, whatever it says itself.
    pub fn child(parent: &Arc<Self>, mode: Mode, posture: Posture) -> Arc<Self> {
        Arc::new(Self {
            own: RwLock::new(Own { mode, posture }),
            parent: Some(parent.clone()),
        })
    }

    fn own(&self) -> Own {
        *self.own.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The mode in force: the narrowest along the chain.
    pub fn mode(&self) -> Mode {
        let own = self.own().mode;
        match &self.parent {
            Some(parent) => own.narrower(parent.mode()),
            None => own,
        }
    }

    /// The posture in force: the narrowest along the chain.
    pub fn posture(&self) -> Posture {
        let own = self.own().posture;
        match &self.parent {
            Some(parent) => own.narrower(parent.posture()),
            None => own,
        }
    }

    /// This agent's own mode (before its ancestors narrow it).
    pub fn own_mode(&self) -> Mode {
        self.own().mode
    }

    /// Sets this agent's own mode; its descendants see it at once.
    pub fn set_mode(&self, mode: Mode) {
        self.own
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .mode = mode;
    }

    /// Sets this agent's own posture (after the denial ledger); its
    /// descendants see it at once.
    pub fn set_posture(&self, posture: Posture) {
        self.own
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .posture = posture;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parents_change_narrows_every_descendant_at_once() {
        let session = LiveAuthority::root(Mode::Work, Posture::Bypass);
        let child = LiveAuthority::child(&session, Mode::Work, Posture::Bypass);
        let grandchild = LiveAuthority::child(&child, Mode::Operate, Posture::Bypass);
        assert_eq!(grandchild.mode(), Mode::Work, "never above an ancestor");
        session.set_mode(Mode::Plan);
        session.set_posture(Posture::Never);
        for agent in [&child, &grandchild] {
            assert_eq!(
                (agent.mode(), agent.posture()),
                (Mode::Plan, Posture::Never)
            );
        }
        // Widening the parent again gives back only what the child had.
        session.set_mode(Mode::Operate);
        session.set_posture(Posture::Bypass);
        assert_eq!(child.mode(), Mode::Work);
        assert_eq!(grandchild.mode(), Mode::Work);
        assert_eq!(grandchild.own_mode(), Mode::Operate);
    }

    #[test]
    fn a_child_cannot_widen_itself_past_its_parent() {
        let session = LiveAuthority::root(Mode::Plan, Posture::Suggest);
        let child = LiveAuthority::child(&session, Mode::Plan, Posture::Suggest);
        child.set_mode(Mode::Operate);
        child.set_posture(Posture::Bypass);
        assert_eq!(
            (child.mode(), child.posture()),
            (Mode::Plan, Posture::Suggest)
        );
    }
}
