//! The group service: the I/O around a shard's group coordinator: feeding it calls, timer
//! ticks and append outcomes; appending its records to `__consumer_offsets`; loading its
//! partitions at startup and when leadership comes; and compacting them (the coordinator's
//! live state rewritten, older records dropped). It reaches the shard's partitions only
//! through [`GroupHost`].

use crate::util::hash::{HashMap, HashSet};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use super::api::OFFSETS_TOPIC;
use super::api::{Call, OffsetsRecord, Output, Reply, Token};
use super::GroupCoordinator;
use crate::config::GroupConfig;
use crate::idempotence::append::ProduceError;
use crate::log::LogError;
use crate::protocol::batch_builder::BatchBuilder;
use crate::protocol::decompressed_records::decode_records_decompressed;
use crate::protocol::record_batch::{BatchHeader, Compression};
use crate::protocol::ResponseError;
use crate::runtime;
use crate::util::local_oneshot;
use crate::util::notify::Notify;

use crate::partition::Partition;

/// After a change wakes the group ticker, how long it gathers further changes before it
/// looks at every group's deadlines again.
const REARM_COALESCE: Duration = Duration::from_millis(100);

/// Records per batch when rewriting a partition's live state (keeps batches far below
/// `message.max.bytes`: a record is at most a few KiB of offset metadata).
const COMPACTION_BATCH_RECORDS: usize = 200;

/// How long a group's records may take to reach the in-sync replicas (Kafka's
/// `offsets.commit.timeout.ms` default).
const OFFSETS_COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Largest decompressed batch accepted while loading.
const MAX_LOAD_BATCH_BYTES: usize = 64 << 20;

/// `segment.bytes` of `__consumer_offsets` (Kafka's `offsets.topic.segment.bytes` is 100 MiB;
/// smaller here because compaction frees whole segments).
pub const OFFSETS_SEGMENT_BYTES: u64 = 16 << 20;

/// A partition of `__consumer_offsets` is compacted once it holds this many bytes.
const COMPACT_AFTER_BYTES: u64 = 64 << 20;

/// What the group service needs of the shard hosting it: the `__consumer_offsets`
/// partitions it owns. Passed in on each call (the shard holds the service; the service
/// holding the shard would be a reference cycle), so the service never sees the rest of the
/// shard.
pub trait GroupHost {
    /// The owned `__consumer_offsets` partition `index`, if this shard serves it.
    fn offsets_partition(&self, index: i32) -> Option<Rc<Partition>>;
    /// Every `__consumer_offsets` partition this shard serves.
    fn offsets_partitions(&self) -> Vec<Rc<Partition>>;
    /// How many partitions `__consumer_offsets` has (None until it exists).
    fn offsets_partition_count(&self) -> Option<i32>;
}

/// A shard's consumer-group service: its coordinator (the pure state machine) and the I/O
/// around it, on the shard's `__consumer_offsets` partitions.
pub struct GroupService {
    coordinator: RefCell<GroupCoordinator>,
    /// Group records are acks=all writes; with this set they are also fsynced first.
    fsync_on_acks_all: bool,
    waiting: RefCell<HashMap<Token, local_oneshot::Sender<Reply>>>,
    next_token: Cell<Token>,
    /// `__consumer_offsets` partitions loaded (or loading) into the coordinator, each with
    /// its load's number: a load whose partition was unloaded and loaded again meanwhile
    /// stops (two replays into one partition would apply old records after new ones).
    loaded: RefCell<HashMap<i32, u64>>,
    next_load: Cell<u64>,
    /// Appends issued and not finished, per partition (compaction waits for none).
    appends_in_flight: RefCell<HashMap<i32, usize>>,
    /// Partitions being compacted: new appends wait, so the rewritten (older) state never
    /// lands after a newer record.
    compacting: RefCell<HashSet<i32>>,
    /// Appends held back by a compaction, in arrival order.
    after_compaction: RefCell<Vec<local_oneshot::Sender<()>>>,
    /// Set at shutdown: calls are refused so no client waits out a rebalance on a stopping
    /// broker.
    closed: Cell<bool>,
    /// Wakes the ticker when the coordinator's state changed (its next deadline may be
    /// earlier than the one the ticker sleeps towards).
    rearm: Notify,
}

impl GroupService {
    pub fn new(config: GroupConfig, fsync_on_acks_all: bool) -> GroupService {
        GroupService {
            coordinator: RefCell::new(GroupCoordinator::new(config)),
            fsync_on_acks_all,
            waiting: RefCell::new(HashMap::default()),
            next_token: Cell::new(0),
            loaded: RefCell::new(HashMap::default()),
            next_load: Cell::new(0),
            appends_in_flight: RefCell::new(HashMap::default()),
            compacting: RefCell::new(HashSet::default()),
            after_compaction: RefCell::new(Vec::new()),
            closed: Cell::new(false),
            rearm: Notify::new(),
        }
    }
}

impl GroupService {
    /// The committed offsets of the groups coordinated here (for metrics).
    pub fn committed_offsets(&self) -> Vec<(String, String, i32, i64)> {
        self.coordinator.borrow().committed_offsets()
    }
}

impl GroupService {
    /// Runs a call on this shard's coordinator and waits for its reply (which may come after
    /// a rebalance completes or an append finishes).
    pub async fn run_call(
        self: &Rc<Self>,
        host: &Rc<dyn GroupHost>,
        call: Call,
    ) -> Result<Reply, i16> {
        if self.closed.get() {
            return Err(ResponseError::NotCoordinator.code());
        }
        let token = self.next_token.get();
        self.next_token.set(token + 1);
        let (tx, rx) = local_oneshot::channel();
        self.waiting.borrow_mut().insert(token, tx);
        let out = self
            .coordinator
            .borrow_mut()
            .handle(token, call, runtime::now_ms());
        self.apply_output(host, out);
        rx.await.ok_or(ResponseError::NotCoordinator.code())
    }

    /// Sends the replies that are ready and starts the appends the coordinator asked for.
    fn apply_output(self: &Rc<Self>, host: &Rc<dyn GroupHost>, out: Output) {
        self.rearm.notify();
        for (token, reply) in out.replies {
            if let Some(tx) = self.waiting.borrow_mut().remove(&token) {
                tx.send(reply);
            }
        }
        for append in out.appends {
            *self
                .appends_in_flight
                .borrow_mut()
                .entry(append.partition)
                .or_default() += 1;
            let service = Rc::clone(self);
            let host = Rc::clone(host);
            runtime::spawn_detached(async move {
                let id = append.id;
                let partition = append.partition;
                // Wait out a compaction in arrival order: records must reach the log in
                // the order the coordinator emitted them.
                if service.compacting.borrow().contains(&partition) {
                    let (tx, rx) = local_oneshot::channel();
                    service.after_compaction.borrow_mut().push(tx);
                    rx.await;
                }
                let ok = match service
                    .append_records(&*host, partition, &append.records)
                    .await
                {
                    Ok(_) => true,
                    Err(e) => {
                        tracing::error!(partition, error = %e, "could not append to {OFFSETS_TOPIC}");
                        false
                    }
                };
                service.finish_append(partition);
                let out = service
                    .coordinator
                    .borrow_mut()
                    .append_done(id, ok, runtime::now_ms());
                service.apply_output(&host, out);
            });
        }
    }

    fn finish_append(&self, partition: i32) {
        if let Some(n) = self.appends_in_flight.borrow_mut().get_mut(&partition) {
            *n = n.saturating_sub(1);
        }
    }

    /// Appends records as one batch (uncompressed, so tools can read them); returns the batch's
    /// base offset.
    async fn append_records(
        &self,
        host: &dyn GroupHost,
        partition: i32,
        records: &[OffsetsRecord],
    ) -> Result<i64, GroupAppendError> {
        let p = host
            .offsets_partition(partition)
            .ok_or(GroupAppendError::NotOwned(partition))?;
        let now = runtime::now_ms();
        let batch = build_batch(records, now)?;
        // In cluster mode only the leader writes, at its epoch, and a commit is acks=all:
        // answered once the in-sync replicas have it (Kafka's offsets.commit.required.acks).
        let options = p
            .leader_append_options(self.fsync_on_acks_all, now)
            .map_err(|e| GroupAppendError::Replication(e.message))?;
        // As any acks=all write: refused before appending when the ISR is below
        // `min.insync.replicas` (Kafka's coordinator answers COORDINATOR_NOT_AVAILABLE).
        p.check_acks_all()
            .map_err(|e| GroupAppendError::Replication(e.message))?;
        let epoch = p.leading_epoch();
        let info = p.append_own(&batch, options).await?;
        p.notify_append();
        p.after_leader_append();
        p.wait_acks_all(epoch, info.last_offset.0, OFFSETS_COMMIT_TIMEOUT)
            .await
            .map_err(|e| GroupAppendError::Replication(e.message))?;
        Ok(info.base_offset.0)
    }

    /// Shutdown: answers every waiting call (a pending JoinGroup may otherwise wait minutes)
    /// with NOT_COORDINATOR, so clients look for the coordinator again, and refuses new ones.
    pub fn close(&self) {
        self.closed.set(true);
        // Dropping the senders resolves each waiter with an error.
        self.waiting.borrow_mut().clear();
    }

    /// Drives the coordinator's timers until the shard stops.
    pub fn spawn_ticker(
        self: &Rc<Self>,
        host: Rc<dyn GroupHost>,
        stopping: impl Fn() -> bool + 'static,
    ) {
        let service = Rc::clone(self);
        runtime::spawn_detached(async move {
            while !stopping() {
                // Sleep until the coordinator's next deadline, or until a call, an append
                // outcome or a load changed what that deadline is. Notifications before this
                // point are reflected in the deadline read now.
                service.rearm.forget_pending();
                let next = service.coordinator.borrow().next_deadline();
                let wait = next.map(|at| at.saturating_sub(runtime::now_ms()).max(0) as u64);
                if wait != Some(0) {
                    let sleep = async {
                        match wait {
                            Some(ms) => runtime::sleep(Duration::from_millis(ms)).await,
                            None => std::future::pending().await,
                        }
                        false
                    };
                    let changed = async {
                        service.rearm.notified().await;
                        true
                    };
                    if futures_lite::future::or(sleep, changed).await {
                        // Every call changes the state: gather a burst of them into one scan
                        // of the groups (at most one per REARM_COALESCE under load, as the
                        // old fixed tick; nothing at all while idle).
                        runtime::sleep(REARM_COALESCE).await;
                    }
                }
                let out = service.coordinator.borrow_mut().tick(runtime::now_ms());
                service.apply_output(&host, out);
            }
        });
    }

    /// Loads every owned `__consumer_offsets` partition not loaded yet: replays its records
    /// into the coordinator. Groups of a partition answer COORDINATOR_LOAD_IN_PROGRESS until
    /// its load finished.
    pub async fn load_partitions(&self, host: &dyn GroupHost) {
        let loads = self.begin_loads(host);
        self.finish_loads(host, loads).await;
    }

    /// The first half of [`GroupService::load_partitions`], at once: the partitions to load
    /// are marked loading (their groups answer COORDINATOR_LOAD_IN_PROGRESS, not
    /// NOT_COORDINATOR, from now on). Returns them with their load numbers.
    pub fn begin_loads(&self, host: &dyn GroupHost) -> Vec<(i32, u64)> {
        if let Some(partitions) = host.offsets_partition_count() {
            self.coordinator
                .borrow_mut()
                .set_offsets_partitions(partitions);
        }
        // In cluster mode a partition's groups are served where it is led (a follower's copy
        // is loaded when it becomes leader, after it has replicated what it could).
        let mut owned: Vec<i32> = host
            .offsets_partitions()
            .iter()
            .filter(|p| !p.is_replicated() || p.leading_epoch().is_some())
            .map(|p| p.index)
            .filter(|i| !self.loaded.borrow().contains_key(i))
            .collect();
        owned.sort_unstable();
        let mut loads = Vec::with_capacity(owned.len());
        for index in owned {
            let load = self.next_load.get() + 1;
            self.next_load.set(load);
            self.loaded.borrow_mut().insert(index, load);
            self.coordinator.borrow_mut().begin_load(index);
            loads.push((index, load));
        }
        loads
    }

    /// Whether `load` of `index` is still the partition's current one.
    fn load_current(&self, index: i32, load: u64) -> bool {
        self.loaded.borrow().get(&index) == Some(&load)
    }

    /// The second half of [`GroupService::load_partitions`]: replays the partitions
    /// [`GroupService::begin_loads`] marked, one after another.
    pub async fn finish_loads(&self, host: &dyn GroupHost, loads: Vec<(i32, u64)>) {
        for (index, load) in loads {
            if !self.load_current(index, load) {
                continue;
            }
            let started = std::time::Instant::now();
            let mut replayed = Replayed::default();
            if let Err(e) = self
                .replay_partition(host, index, load, &mut replayed)
                .await
            {
                // The data that could be read is loaded; serving the rest beats refusing
                // every group of the partition forever.
                tracing::error!(partition = index, error = %e, "loading {OFFSETS_TOPIC} stopped early");
                replayed.complete = false;
            }
            if !self.load_current(index, load) {
                // Unloaded meanwhile (leadership moved): a newer load, if any, serves it.
                continue;
            }
            if !replayed.complete {
                tracing::error!(
                    partition = index,
                    "{OFFSETS_TOPIC} partition loaded in part: it is not compacted until a \
                     restart loads it whole (compaction would delete what was not loaded)"
                );
            }
            {
                let mut coordinator = self.coordinator.borrow_mut();
                if !replayed.complete {
                    coordinator.load_incomplete(index);
                }
                coordinator.finish_load(index, runtime::now_ms());
            }
            self.rearm.notify();
            if replayed.records > 0 {
                tracing::info!(
                    partition = index,
                    records = replayed.records,
                    ms = started.elapsed().as_millis() as u64,
                    "loaded {OFFSETS_TOPIC} partition"
                );
            }
        }
    }

    /// This broker stopped leading `index`: its groups are dropped from the coordinator
    /// (waiting joins and syncs get NOT_COORDINATOR) and loaded again from the log if it
    /// leads the partition again.
    pub fn unload_partition(self: &Rc<Self>, host: &Rc<dyn GroupHost>, index: i32) {
        if self.loaded.borrow_mut().remove(&index).is_none() {
            return;
        }
        tracing::info!(
            partition = index,
            "no longer coordinating the groups of {OFFSETS_TOPIC} partition"
        );
        let out = self.coordinator.borrow_mut().unload(index);
        self.apply_output(host, out);
    }

    /// Replays the partition into the coordinator, counting into `replayed` as it goes (an
    /// error leaves what was replayed before it).
    async fn replay_partition(
        &self,
        host: &dyn GroupHost,
        index: i32,
        load: u64,
        replayed: &mut Replayed,
    ) -> Result<(), GroupAppendError> {
        let p = host
            .offsets_partition(index)
            .ok_or(GroupAppendError::NotOwned(index))?;
        let mut offset = p.log.offsets().log_start_offset;
        replayed.complete = true;
        loop {
            let read = p.log.read(offset, 1 << 20, None).await?;
            if offset >= read.log_end_offset {
                break;
            }
            if read.records.is_empty() {
                replayed.complete = false;
                break;
            }
            let mut rest: &[u8] = &read.records;
            let mut progressed = false;
            while let Ok(header) = BatchHeader::parse(rest) {
                let len = header.total_len();
                if len > rest.len() {
                    break;
                }
                let batch = &rest[..len];
                let decoded = if matches!(header.compression(), Ok(Compression::None)) {
                    decode_records_decompressed(batch, MAX_LOAD_BATCH_BYTES)
                } else {
                    // Up to 64 MiB of decompression: off the reactor.
                    let owned = batch.to_vec();
                    runtime::spawn_blocking(move || {
                        decode_records_decompressed(&owned, MAX_LOAD_BATCH_BYTES)
                    })
                    .await
                };
                if !self.load_current(index, load) {
                    return Ok(());
                }
                match decoded {
                    Ok(records) => {
                        let mut coordinator = self.coordinator.borrow_mut();
                        for r in records {
                            let Some(key) = r.key.as_deref() else {
                                continue;
                            };
                            match coordinator.replay(index, key, r.value.as_deref()) {
                                Ok(()) => replayed.records += 1,
                                Err(e) => replayed.skip(index, r.offset, "record", &e),
                            }
                        }
                    }
                    Err(e) => replayed.skip(index, header.base_offset, "batch", &e),
                }
                offset = header.next_offset();
                progressed = true;
                rest = &rest[len..];
            }
            if !progressed {
                // Bytes at `offset` that are not a batch: what follows is not read.
                replayed.complete = false;
                break;
            }
        }
        Ok(())
    }

    /// Rewrites the live state of big `__consumer_offsets` partitions at their end and drops
    /// everything before it (we have no log compaction; this keeps the partitions small and
    /// loading fast). Skips a partition while appends to it are in flight (their records are
    /// not in the coordinator's state yet) and one loaded in part (the records not loaded
    /// are in no state at all): neither may be dropped.
    pub async fn compact_partitions(&self, host: &dyn GroupHost) {
        let candidates: Vec<i32> = host
            .offsets_partitions()
            .iter()
            .filter(|p| p.log.offsets().size_bytes >= COMPACT_AFTER_BYTES)
            .map(|p| p.index)
            .collect();
        for index in candidates {
            let busy = self
                .appends_in_flight
                .borrow()
                .get(&index)
                .copied()
                .unwrap_or(0)
                > 0;
            if busy || !self.loaded.borrow().contains_key(&index) {
                continue;
            }
            let Some(records) = self.coordinator.borrow().snapshot_records(index) else {
                continue;
            };
            self.compacting.borrow_mut().insert(index);
            let result = self.rewrite_partition(host, index, records).await;
            self.compacting.borrow_mut().remove(&index);
            for waiter in self.after_compaction.borrow_mut().drain(..) {
                waiter.send(());
            }
            if let Err(e) = result {
                tracing::warn!(partition = index, error = %e, "compacting {OFFSETS_TOPIC} failed");
            }
        }
    }

    async fn rewrite_partition(
        &self,
        host: &dyn GroupHost,
        index: i32,
        records: Vec<OffsetsRecord>,
    ) -> Result<(), GroupAppendError> {
        let p = host
            .offsets_partition(index)
            .ok_or(GroupAppendError::NotOwned(index))?;
        let keep_from = p.log.offsets().written_end_offset;
        // One append of all batches: the rewrite lands whole or not at all.
        let now = runtime::now_ms();
        let mut batches = Vec::new();
        for chunk in records.chunks(COMPACTION_BATCH_RECORDS) {
            batches.extend_from_slice(&build_batch(chunk, now)?);
        }
        if !batches.is_empty() {
            let options = p
                .leader_append_options(true, now)
                .map_err(|e| GroupAppendError::Replication(e.message))?;
            let epoch = p.leading_epoch();
            let info = p.append_own(&batches, options).await?;
            p.notify_append();
            p.after_leader_append();
            // Nothing is deleted before every in-sync replica has the rewrite (acks=all): a
            // follower elected without it would hold neither the old records nor the new.
            // Not replicated in time: the next round appends the state again.
            p.wait_acks_all(epoch, info.last_offset.0, OFFSETS_COMMIT_TIMEOUT)
                .await
                .map_err(|e| GroupAppendError::Replication(e.message))?;
        }
        let start = p.log.delete_records_before(keep_from).await?;
        tracing::info!(
            partition = index,
            log_start = start,
            records = records.len(),
            "compacted {OFFSETS_TOPIC} partition"
        );
        Ok(())
    }
}

/// What loading one `__consumer_offsets` partition got through.
#[derive(Debug, Default)]
struct Replayed {
    records: u64,
    /// Every batch up to the log's end was read and replayed.
    complete: bool,
}

impl Replayed {
    /// A record or batch (`what`) at `offset` that could not be replayed: logged, and the
    /// load is no longer complete.
    fn skip(&mut self, partition: i32, offset: i64, what: &str, error: &dyn std::fmt::Display) {
        self.complete = false;
        tracing::warn!(partition, offset, error = %error, "skipping an unreadable {OFFSETS_TOPIC} {what}");
    }
}

fn build_batch(records: &[OffsetsRecord], now_ms: i64) -> Result<bytes::Bytes, GroupAppendError> {
    let mut batch = BatchBuilder::new(now_ms);
    for r in records {
        batch
            .try_push(Some(&r.key), r.value.as_deref(), now_ms, &[])
            .map_err(|e| GroupAppendError::TooLarge(e.to_string()))?;
    }
    Ok(batch.build())
}

#[derive(Debug, thiserror::Error)]
pub enum GroupAppendError {
    #[error("this shard does not own {OFFSETS_TOPIC}-{0}")]
    NotOwned(i32),
    #[error("record does not fit in a batch: {0}")]
    TooLarge(String),
    #[error(transparent)]
    Log(#[from] LogError),
    /// Not the leader any more, or the in-sync replicas did not take the records in time.
    #[error("{0}")]
    Replication(String),
}

impl From<ProduceError> for GroupAppendError {
    fn from(e: ProduceError) -> Self {
        match e {
            ProduceError::Log(e) => GroupAppendError::Log(e),
            other => GroupAppendError::Replication(other.to_string()),
        }
    }
}

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
