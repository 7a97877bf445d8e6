//! Placement by free slots, with no actors: where the next step agent
//! runs.
//!
//! The places are the coordinator itself (`local_slots`) and every node
//! that joined and is alive, each with the slots it advertised. A step goes
//! to the place with the most free slots that serves its workspace (the
//! coordinator first on a tie, then nodes by name). When every such place
//! is full it waits; when no live node serves the workspace at all, the
//! coordinator runs it whatever its slots, so a run never stalls for want
//! of nodes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where one attempt runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Place {
    /// In the coordinator's process.
    Local,
    /// On the node of this name.
    Node(String),
}

#[derive(Debug, Clone)]
struct Slots {
    slots: u32,
    running: u32,
}

impl Slots {
    fn free(&self) -> u32 {
        self.slots.saturating_sub(self.running)
    }
}

#[derive(Debug, Clone)]
struct NodePlace {
    slots: Slots,
    workspaces: Vec<PathBuf>,
}

impl NodePlace {
    fn serves(&self, workspace: &Path) -> bool {
        self.workspaces
            .iter()
            .any(|root| workspace.starts_with(root))
    }
}

/// The places and their slots.
#[derive(Debug, Clone)]
pub struct Places {
    local: Slots,
    nodes: BTreeMap<String, NodePlace>,
    /// Attempts placed on each node since the start, lost or not.
    placed: BTreeMap<String, u64>,
}

impl Places {
    /// The coordinator's own slots, and no nodes yet.
    pub fn new(local_slots: u32) -> Self {
        Self {
            local: Slots {
                slots: local_slots,
                running: 0,
            },
            nodes: BTreeMap::new(),
            placed: BTreeMap::new(),
        }
    }

    /// A node joined (or joined again: its count starts over).
    pub fn join(&mut self, name: &str, slots: u32, workspaces: Vec<PathBuf>) {
        self.nodes.insert(
            name.to_string(),
            NodePlace {
                slots: Slots { slots, running: 0 },
                workspaces,
            },
        );
    }

    /// A node is gone; its attempts are lost with it.
    pub fn lose(&mut self, name: &str) {
        self.nodes.remove(name);
    }

    /// Whether a node of that name is alive.
    pub fn has(&self, name: &str) -> bool {
        self.nodes.contains_key(name)
    }

    /// Takes a slot for an attempt in `workspace`, or `None` to wait.
    pub fn take(&mut self, workspace: &Path) -> Option<Place> {
        let serving: Vec<(&String, u32)> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.serves(workspace))
            .map(|(name, n)| (name, n.slots.free()))
            .collect();
        let best_node = serving
            .iter()
            .filter(|(_, free)| *free > 0)
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
            .map(|(name, free)| ((*name).clone(), *free));
        let local_free = self.local.free();
        let place = match best_node {
            Some((name, free)) if free > local_free => Place::Node(name),
            _ if local_free > 0 => Place::Local,
            None if serving.is_empty() => Place::Local,
            None => return None,
            Some((name, _)) => Place::Node(name),
        };
        match &place {
            Place::Local => self.local.running += 1,
            Place::Node(name) => {
                if let Some(node) = self.nodes.get_mut(name) {
                    node.slots.running += 1;
                }
                *self.placed.entry(name.clone()).or_default() += 1;
            }
        }
        Some(place)
    }

    /// Takes a slot on the coordinator, for an attempt that must run here
    /// (its worktree or its verifier is here), or `None` to wait. With no
    /// local slots at all it runs here anyway: there is nowhere else.
    pub fn take_local(&mut self) -> Option<Place> {
        if self.local.free() == 0 && self.local.slots > 0 {
            return None;
        }
        self.local.running += 1;
        Some(Place::Local)
    }

    /// Gives back the slot `place` took.
    pub fn release(&mut self, place: &Place) {
        let slots = match place {
            Place::Local => Some(&mut self.local),
            Place::Node(name) => self.nodes.get_mut(name).map(|n| &mut n.slots),
        };
        if let Some(slots) = slots {
            slots.running = slots.running.saturating_sub(1);
        }
    }

    /// The live nodes: name, slots, running.
    pub fn nodes(&self) -> Vec<(String, u32, u32)> {
        self.nodes
            .iter()
            .map(|(name, n)| (name.clone(), n.slots.slots, n.slots.running))
            .collect()
    }

    /// Attempts placed on each node so far.
    pub fn placed(&self) -> &BTreeMap<String, u64> {
        &self.placed
    }
}

#[cfg(test)]
mod tests;
