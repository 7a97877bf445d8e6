//! The link against nodes that lie: items for attempts they were not
//! given, items sent twice, a name already in use. The nodes here are
//! actors in this process that record what the link sends them.

use std::marker::PhantomData;
use std::path::PathBuf;

use cadre_runtime::Mode;
use cadre_runtime::permission::Posture;
use cadre_runtime::protocol::Event;
use ractor::Actor;

use super::*;
use crate::cluster::wire::{AgentEnd, Item};

/// Records every message it gets, as `Debug` text.
struct Recorder<M>(PhantomData<fn() -> M>);

impl<M: ractor::Message + std::fmt::Debug> Actor for Recorder<M> {
    type Msg = M;
    type State = mpsc::UnboundedSender<String>;
    type Arguments = mpsc::UnboundedSender<String>;

    async fn pre_start(
        &self,
        _myself: ActorRef<M>,
        seen: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(seen)
    }

    async fn handle(
        &self,
        _myself: ActorRef<M>,
        message: M,
        seen: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = seen.send(format!("{message:?}"));
        Ok(())
    }
}

async fn recorder<M: ractor::Message + std::fmt::Debug>()
-> (ActorRef<M>, mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (actor, _) = Actor::spawn(None, Recorder::<M>(PhantomData), tx)
        .await
        .expect("recorder");
    (actor, rx)
}

struct World {
    state: LinkState,
    myself: ActorRef<LinkMsg>,
    joined: watch::Receiver<Joined>,
    notices: mpsc::UnboundedReceiver<LinkNotice>,
}

async fn world() -> World {
    let (joined_tx, joined) = watch::channel(Joined::default());
    let (notices_tx, notices) = mpsc::unbounded_channel();
    let state = LinkState {
        args: LinkArgs {
            coordinator: "coordinator".into(),
            places: Arc::new(Mutex::new(Places::new(0))),
            timeout: Duration::from_secs(5),
            joined: joined_tx,
            notices: notices_tx,
        },
        nodes: HashMap::new(),
        by_id: HashMap::new(),
        asking: std::collections::HashSet::new(),
        attempts: HashMap::new(),
    };
    let (myself, _) = recorder::<LinkMsg>().await;
    World {
        state,
        myself,
        joined,
        notices,
    }
}

fn info(name: &str, slots: u32) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        protocol: PROTOCOL,
        slots,
        workspaces: vec![PathBuf::from("/ws")],
    }
}

impl World {
    /// A node `name` joins; what it is sent is recorded.
    async fn node(&mut self, name: &str) -> (ActorRef<NodeMsg>, mpsc::UnboundedReceiver<String>) {
        let (remote, seen) = recorder::<NodeMsg>().await;
        self.state.join(&self.myself, remote.clone(), info(name, 2));
        (remote, seen)
    }

    /// Attempt `id` runs on `node`; what its step hears.
    fn attempt(&mut self, id: u64, node: &str) -> mpsc::UnboundedReceiver<Remote> {
        let (news, heard) = mpsc::unbounded_channel();
        self.state.attempts.insert(
            id,
            Attempt {
                node: node.into(),
                live: LiveAuthority::root(Mode::Work, Posture::Suggest),
                news,
            },
        );
        heard
    }
}

fn item(seq: u64, attempt: u64, what: Outbound) -> Item {
    Item { seq, attempt, what }
}

fn answer(text: &str) -> Outbound {
    Outbound::Event(Envelope {
        op_id: None,
        event: Event::AssistantMessage {
            turn_id: 1,
            text: text.into(),
        },
    })
}

fn heard(news: &mut mpsc::UnboundedReceiver<Remote>) -> Vec<Remote> {
    std::iter::from_fn(|| news.try_recv().ok()).collect()
}

#[tokio::test]
async fn a_node_cannot_speak_for_another_nodes_attempts() {
    let mut w = world().await;
    w.node("a").await;
    w.node("b").await;
    let mut on_a = w.attempt(1, "a");
    let mut on_b = w.attempt(2, "b");
    let forged = Batch {
        items: vec![
            item(1, 2, answer("forged")),
            item(
                2,
                2,
                Outbound::Checked {
                    passed: true,
                    detail: String::new(),
                },
            ),
            item(3, 2, Outbound::Ended(AgentEnd::Failed("crashed".into()))),
            item(4, 1, answer("mine")),
            item(5, 99, Outbound::Ended(AgentEnd::Failed("nobody's".into()))),
        ],
        free: 0,
    };
    w.state.deliver("a", forged);
    assert_eq!(heard(&mut on_b), []);
    assert!(
        w.state.attempts.contains_key(&2),
        "b's attempt is still b's"
    );
    assert_eq!(
        heard(&mut on_a),
        [Remote::Event(Box::new(Envelope {
            op_id: None,
            event: Event::AssistantMessage {
                turn_id: 1,
                text: "mine".into()
            }
        }))]
    );
}

#[tokio::test]
async fn an_item_sent_twice_is_heard_once() {
    let mut w = world().await;
    w.node("a").await;
    let mut news = w.attempt(1, "a");
    let checked = || Outbound::Checked {
        passed: true,
        detail: "ok".into(),
    };
    let batch = Batch {
        items: vec![item(1, 1, checked())],
        free: 1,
    };
    w.state.deliver("a", batch.clone());
    w.state.deliver("a", batch);
    // The same check again under a number already acknowledged.
    w.state.deliver(
        "a",
        Batch {
            items: vec![item(1, 1, checked()), item(0, 1, checked())],
            free: 1,
        },
    );
    assert_eq!(heard(&mut news), [Remote::Checked(true, "ok".into())]);
}

#[tokio::test]
async fn a_node_cannot_take_over_the_name_of_a_node_in_use() {
    let mut w = world().await;
    let (first, _) = w.node("a").await;
    let mut news = w.attempt(1, "a");
    let (impostor, _) = recorder::<NodeMsg>().await;
    w.state.join(&w.myself, impostor.clone(), info("a", 100));
    assert_eq!(
        w.state.nodes["a"].remote.get_id(),
        first.get_id(),
        "the first node keeps the name"
    );
    assert_eq!(w.state.places().nodes(), [("a".to_string(), 2, 0)]);
    assert_eq!(
        *w.joined.borrow(),
        Joined {
            nodes: 1,
            refused: 1
        }
    );
    let notices: Vec<LinkNotice> = std::iter::from_fn(|| w.notices.try_recv().ok()).collect();
    assert_eq!(
        notices,
        [
            LinkNotice::Joined(info("a", 2)),
            LinkNotice::NameTaken("a".into())
        ]
    );
    // What the first node says still reaches its attempt.
    w.state.deliver(
        "a",
        Batch {
            items: vec![item(1, 1, answer("from the first"))],
            free: 1,
        },
    );
    assert_eq!(heard(&mut news).len(), 1);
}
