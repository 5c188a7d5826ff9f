//! The simulated network: every message between brokers, the controller and the producers
//! goes through one queue, delivered after a seeded delay (so messages reorder), maybe
//! dropped, and never across a cut link. A paused node's messages wait for it (a SIGSTOPped
//! process's socket buffers); a crashed node's are lost.

use std::collections::BTreeSet;

use crate::controller::alter_partition::AlterPartitionRequest;
use crate::controller::broker_lifecycle::{BrokerRegistrationRequest, Heartbeat};
use crate::model::{BrokerId, LeaderEpoch, PartitionEpoch};
use crate::util::rng::SeededRng;

use super::model_log::Batch;

/// A node: the controller, a broker, or a producer (client).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Node {
    Controller,
    Broker(BrokerId),
    Producer(usize),
}

/// What a follower's fetch asked, to check its answer against (`replica_role::FetchPosition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked {
    pub leader: BrokerId,
    pub leader_epoch: LeaderEpoch,
    pub fetch_offset: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchAnswer {
    /// An error code (not leader, fenced or unknown leader epoch).
    Refused(i16),
    Diverging {
        epoch: i32,
        end_offset: i64,
    },
    Records {
        batches: Vec<Batch>,
        high_watermark: i64,
    },
}

/// The committed state an AlterPartition answer carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub isr: Vec<BrokerId>,
    pub partition_epoch: PartitionEpoch,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Register(BrokerRegistrationRequest),
    Heartbeat(Heartbeat),
    AlterPartition {
        partition: usize,
        request: AlterPartitionRequest,
    },
    AlterPartitionAnswer {
        partition: usize,
        leader_epoch: LeaderEpoch,
        answer: Result<Committed, i16>,
    },
    Fetch {
        partition: usize,
        asked: Asked,
        last_fetched_epoch: i32,
    },
    FetchAnswer {
        partition: usize,
        asked: Asked,
        answer: FetchAnswer,
    },
    Produce {
        partition: usize,
        producer: i64,
        seq: i32,
        value: u64,
    },
    /// `Ok(offset)` or an error code.
    ProduceAnswer {
        seq: i32,
        answer: Result<i64, i16>,
    },
}

#[derive(Debug, Clone)]
pub struct Envelope {
    pub from: Node,
    pub to: Node,
    pub deliver_at: u64,
    /// Tie-break, so delivery order is deterministic.
    pub id: u64,
    pub message: Message,
}

/// Per-thousand and millisecond settings of the network's faults.
#[derive(Debug, Clone, Copy, Default)]
pub struct NetworkFaults {
    pub drop: u64,
    /// Most messages take 1..=base_delay_ms; `slow` of them up to max_delay_ms.
    pub base_delay_ms: u64,
    pub slow: u64,
    pub max_delay_ms: u64,
}

#[derive(Debug, Default)]
pub struct Network {
    queue: Vec<Envelope>,
    next_id: u64,
    /// Cut links, each as an ordered pair (smaller node first).
    cut: BTreeSet<(Node, Node)>,
    pub sent: u64,
    pub dropped: u64,
}

fn link(a: Node, b: Node) -> (Node, Node) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

impl Network {
    pub fn send(
        &mut self,
        rng: &mut SeededRng,
        faults: NetworkFaults,
        now: u64,
        from: Node,
        to: Node,
        message: Message,
    ) {
        self.sent += 1;
        if rng.chance(faults.drop) || !self.connected(from, to) {
            self.dropped += 1;
            return;
        }
        let max = if rng.chance(faults.slow) {
            faults.max_delay_ms
        } else {
            faults.base_delay_ms
        };
        let delay = 1 + rng.next_u64() % max.max(1);
        self.next_id += 1;
        self.queue.push(Envelope {
            from,
            to,
            deliver_at: now + delay,
            id: self.next_id,
            message,
        });
    }

    pub fn connected(&self, a: Node, b: Node) -> bool {
        !self.cut.contains(&link(a, b))
    }

    pub fn cut(&mut self, a: Node, b: Node) {
        if a != b {
            self.cut.insert(link(a, b));
        }
    }

    pub fn heal(&mut self) {
        self.cut.clear();
    }

    pub fn cut_links(&self) -> usize {
        self.cut.len()
    }

    /// The messages due at `now` whose destination `ready` accepts, in delivery order; the
    /// ones to paused nodes stay queued. Messages on links cut meanwhile are lost.
    pub fn due(&mut self, now: u64, ready: impl Fn(Node) -> bool) -> Vec<Envelope> {
        let (mut due, later): (Vec<Envelope>, Vec<Envelope>) = std::mem::take(&mut self.queue)
            .into_iter()
            .partition(|e| e.deliver_at <= now && ready(e.to));
        self.queue = later;
        due.retain(|e| {
            let ok = self.connected(e.from, e.to);
            if !ok {
                self.dropped += 1;
            }
            ok
        });
        due.sort_by_key(|e| (e.deliver_at, e.id));
        due
    }

    /// A crashed node loses what was on its way to it.
    pub fn drop_to(&mut self, node: Node) {
        let before = self.queue.len();
        self.queue.retain(|e| e.to != node);
        self.dropped += (before - self.queue.len()) as u64;
    }
}
