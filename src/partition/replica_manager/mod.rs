//! Cluster mode, on every shard: the partitions' roles follow the published metadata, the
//! shard's followers fetch from their leaders ([`fetcher`]), and leaders' ISR changes go to
//! the controller (Kafka's ReplicaManager, AlterPartitionManager and fetcher threads, one set
//! per shard). It works on the shard's [`PartitionManager`] and tells a [`RoleListener`]
//! (the group service) of leadership changes, as Kafka's ReplicaManager tells the group
//! coordinator.
//!
//! - **Roles**: before each publication (so that clients learn of a new leader only once it
//!   leads), every partition this shard hosts leads or follows as the controller says
//!   ([`Partition::lead`], [`Partition::follow`]); a slower poll of the published metadata
//!   catches anything a shard missed.
//! - **Fetchers**: one task per leader broker, sending one long-poll Fetch (v12: replica id,
//!   `LastFetchedEpoch`, `DivergingEpoch`) for all of this shard's partitions that broker
//!   leads; a diverging answer truncates, records are appended as the leader has them.
//! - **ISR changes**: proposals (expansion when a follower caught up, shrink when one fell
//!   behind `replica.lag.time.max.ms`) are sent as AlterPartition, one in flight per
//!   partition (the leader state keeps to that), and applied when committed.

use crate::util::hash::HashSet;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::manager::PartitionManager;
use super::Partition;
use crate::metadata::{MetadataCache, MetadataImage};
use crate::model::BrokerId;
use crate::replication::leader_state::LeaderConfig;
use crate::runtime;
use crate::util::exclusive::Exclusive;
use crate::util::shutdown::ShutdownSignal;

mod fetcher;
mod isr_changes;
pub mod out_of_range;
#[cfg(test)]
mod roles_tests;
#[cfg(test)]
mod test_support;

pub use isr_changes::IsrChannel;

/// The Fetch version followers send: the first with `LastFetchedEpoch` and
/// `DivergingEpoch`, still naming topics (v13 names them by id).
const REPLICA_FETCH_VERSION: i16 = 12;
/// How often the published metadata is looked at for role changes (roles are applied
/// before each publication; this catches a shard that missed one).
const ROLE_POLL: Duration = Duration::from_millis(250);
/// A fetcher's pause after a failed round (connection refused, an error answer).
const FETCH_BACKOFF: Duration = Duration::from_millis(100);

/// The replication settings (Kafka's names).
#[derive(Debug, Clone, Copy)]
pub struct ReplicaSettings {
    pub replica_lag_time_max_ms: u64,
    pub replica_fetch_wait_max_ms: u64,
    pub replica_fetch_max_bytes: u64,
    /// `replica.fetch.response.max.bytes`
    pub replica_fetch_response_max_bytes: u64,
}

/// Hears of the shard's leadership changes (the group service: groups of `__consumer_offsets`
/// partitions load where they are led and unload where they are not).
pub trait RoleListener {
    /// `p` is followed now (or has no leader on this broker); told before any promotion.
    fn followed(&self, p: &Partition);
    /// Roles were applied; `leading` are the partitions this broker leads now.
    fn leading(&self, leading: &[Rc<Partition>]);
}

pub struct ReplicaManager {
    me: BrokerId,
    /// This process's registration: until the metadata holds it, nothing is led here.
    incarnation: uuid::Uuid,
    settings: ReplicaSettings,
    /// This shard's own line to the controller (AlterPartition).
    link: Rc<dyn IsrChannel>,
    /// The shard's partitions.
    partitions: Rc<PartitionManager>,
    /// The shard's metadata cache (the published view of leaders and ISRs).
    cache: Rc<MetadataCache>,
    roles: Rc<dyn RoleListener>,
    /// Leaders with a fetcher task running.
    fetching_from: RefCell<HashSet<BrokerId>>,
    /// The image the roles were last applied from.
    applied: RefCell<Option<Arc<MetadataImage>>>,
    /// Role changes one at a time (the publisher's and the poll's).
    applying: Exclusive,
    last_shrink_check_ms: Cell<i64>,
    shutdown: Rc<ShutdownSignal>,
}

impl ReplicaManager {
    pub fn new(
        me: BrokerId,
        incarnation: uuid::Uuid,
        settings: ReplicaSettings,
        link: Rc<dyn IsrChannel>,
        partitions: Rc<PartitionManager>,
        cache: Rc<MetadataCache>,
        roles: Rc<dyn RoleListener>,
    ) -> ReplicaManager {
        ReplicaManager {
            me,
            incarnation,
            settings,
            link,
            partitions,
            cache,
            roles,
            fetching_from: RefCell::new(HashSet::default()),
            applied: RefCell::new(None),
            applying: Exclusive::new(),
            last_shrink_check_ms: Cell::new(0),
            shutdown: Rc::new(ShutdownSignal::new()),
        }
    }

    pub fn stop(&self) {
        self.shutdown.trigger();
    }

    fn image(&self) -> Arc<MetadataImage> {
        self.cache.get()
    }

    fn leader_config(&self, p: &Partition) -> LeaderConfig {
        LeaderConfig {
            min_insync_replicas: crate::partition::replica_role::min_insync_replicas(
                &p.log.config(),
            ),
            replica_lag_time_max_ms: self.settings.replica_lag_time_max_ms as i64,
        }
    }

    /// Starts the role loop (which starts fetchers as needed), and takes the leaders' ISR
    /// proposals of the shard's partitions from now on.
    pub fn start(self: &Rc<Self>) {
        // Weak: the partition manager would otherwise keep its replica manager alive.
        let weak = Rc::downgrade(self);
        self.partitions
            .set_isr_sink(Rc::new(move |p, proposal| match weak.upgrade() {
                Some(manager) => manager.submit_isr_change(p, proposal),
                None => p.isr_rejected(proposal.leader_epoch),
            }));
        let manager = Rc::clone(self);
        runtime::spawn_detached(async move {
            while !manager.shutdown.is_triggered() {
                manager.apply_roles(manager.image()).await;
                manager.check_shrinks();
                futures_lite::future::or(runtime::sleep(ROLE_POLL), manager.shutdown.wait()).await;
            }
        });
    }

    /// Leads or follows each hosted partition as `image` says, unless roles were applied from
    /// it or from newer metadata already.
    pub async fn apply_roles(self: &Rc<Self>, image: Arc<MetadataImage>) {
        let manager = self;
        let _one_at_a_time = manager.applying.enter().await;
        let done =
            manager.applied.borrow().as_ref().is_some_and(|a| {
                Arc::ptr_eq(a, &image) || a.metadata_offset > image.metadata_offset
            });
        if done {
            return;
        }
        let now = runtime::now_ms();
        // A restarted broker replays metadata of its previous life, which may name it leader
        // at an epoch it led before the crash (with a log that may have lost its unflushed
        // tail). It leads only once its new registration is applied: the controller fenced
        // the old one in the same batch, which moved or bumped those leaderships.
        let registered = image
            .broker(manager.me)
            .is_some_and(|b| b.incarnation == manager.incarnation);
        // Demotions at once; promotions after them and side by side: each makes an epoch
        // entry durable, and one after another they held the publication back by as many
        // fsyncs as partitions (seconds on a loaded disk).
        let mut leading = Vec::new();
        for p in manager.partitions.all() {
            let Some(state) = image.partition_by_name(&p.topic, p.index) else {
                continue;
            };
            if state.leader == Some(manager.me) && registered {
                leading.push((p, state.clone()));
            } else {
                // Not registered yet, a partition named ours is followed with no leader.
                let leader = state.leader.filter(|l| *l != manager.me);
                p.follow(leader, state.leader_epoch);
                manager.roles.followed(&p);
                if let Some(leader) = leader {
                    manager.ensure_fetcher(leader);
                }
            }
        }
        let led: Vec<Rc<Partition>> = leading.iter().map(|(p, _)| Rc::clone(p)).collect();
        let tasks: Vec<_> = leading
            .into_iter()
            .map(|(p, state)| {
                let (me, config, image) = (manager.me, manager.leader_config(&p), Arc::clone(&image));
                runtime::spawn(async move {
                    let led = p.lead(me, &state, config, now).await;
                    if let Err(e) = &led {
                        tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "cannot become leader; trying again at the next role check");
                    }
                    p.note_replica_liveness(|b| b == me || image.is_unfenced(b));
                    led.is_ok()
                })
            })
            .collect();
        let mut all_led = true;
        for t in tasks {
            all_led &= t.await;
        }
        // A leadership that failed to start (its epoch entry not durable) is tried again at
        // the next role poll: recorded as applied, it would wait for the next metadata change.
        if all_led {
            *manager.applied.borrow_mut() = Some(image);
        }
        manager.roles.leading(&led);
    }

    /// Every half `replica.lag.time.max.ms` (Kafka's ISR expiration task), leaders look for
    /// members that fell behind.
    fn check_shrinks(self: &Rc<Self>) {
        let manager = self;
        let now = runtime::now_ms();
        let every = (manager.settings.replica_lag_time_max_ms / 2).max(1) as i64;
        if now - manager.last_shrink_check_ms.get() < every {
            return;
        }
        manager.last_shrink_check_ms.set(now);
        for p in manager.partitions.all() {
            p.advance_hw_on_timer(now);
            if let Some(proposal) = p.check_isr_shrink(now) {
                manager.submit_isr_change(&p, proposal);
            }
        }
    }
}
