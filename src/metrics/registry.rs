//! The metrics of one shard: stage latencies, per-API request counters and latencies,
//! connection counters. Recorded with plain (non-atomic) arithmetic into a registry owned by
//! the shard's thread, and read by asking each shard for a copy over the mesh.
//!
//! The registry is a thread-local rather than a field of `Shard` because some stages are
//! measured where no `Shard` is at hand (the log's group-commit task); every shard is one
//! executor thread, so a thread-local is exactly one registry per shard, with no locks.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use super::latency::Latency;
use crate::protocol::messages::ApiKey;

/// Where a request spends its time, in the order a produce request meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Frame fully read → its task starts running (a Fetch's turn, scheduling). The byte
    /// budgets are waited for before the frame's body is read, so not here.
    Queue,
    /// Task started → body decoded (known API and version, body parsed).
    Decode,
    /// Request sent to another shard over the mesh → its reply received (includes the work
    /// done there).
    Hop,
    /// Batch staged in the log → its bytes written to the segment file (group-commit wait
    /// included; before any fdatasync).
    Append,
    /// One fdatasync call of the group committer.
    Fsync,
    /// Batch written → its appender told the write is done and durable as asked (the fsync
    /// of an acks=all produce, or ~0 when no fsync is due).
    Acks,
    /// A fetch's read of one partition's log (index lookup, then the file or the tail
    /// cache): the broker's cost of serving data that is there.
    Read,
    /// A fetch waiting for data (long poll: `max_wait_ms` / `min_bytes`), which the client asked
    /// for; the Fetch request's latency minus this is its service time.
    FetchWait,
    /// Response body encoded.
    Encode,
    /// Response bytes written to the socket.
    Write,
}

impl Stage {
    pub const ALL: [Stage; 10] = [
        Stage::Queue,
        Stage::Decode,
        Stage::Hop,
        Stage::Append,
        Stage::Fsync,
        Stage::Acks,
        Stage::Read,
        Stage::FetchWait,
        Stage::Encode,
        Stage::Write,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Queue => "queue",
            Stage::Decode => "decode",
            Stage::Hop => "hop",
            Stage::Append => "append",
            Stage::Fsync => "fsync",
            Stage::Acks => "acks",
            Stage::Read => "read",
            Stage::FetchWait => "fetch_wait",
            Stage::Encode => "encode",
            Stage::Write => "write",
        }
    }
}

/// Counters and whole-request latency of one API on one shard.
#[derive(Debug, Clone, Default)]
pub struct ApiStats {
    /// Requests answered (or completed without an answer: produce acks=0).
    pub requests: u64,
    /// Requests that failed so that the connection was closed.
    pub failed: u64,
    /// Request bytes read, length prefix included.
    pub bytes_in: u64,
    /// Response bytes written, length prefix included.
    pub bytes_out: u64,
    /// Frame read → response written.
    pub latency: Latency,
    /// Handler started → response framed: the handler's whole work (decode, hops, appends,
    /// acks, encode; a Fetch's long-poll wait). Per API because it is what differs most
    /// between APIs.
    pub handle: Latency,
    /// Partition-level error codes returned, by code.
    pub partition_errors: BTreeMap<i16, u64>,
}

/// One shard's metrics; cloning it is the snapshot sent over the mesh.
#[derive(Debug, Clone)]
pub struct Registry {
    stages: Vec<Latency>,
    apis: BTreeMap<i16, ApiStats>,
    /// Requests with an API key the broker does not know (their connection is closed).
    pub unknown_api_requests: u64,
    pub connections_accepted: u64,
    pub connections_closed: u64,
    /// Partitions of followers' fetches received here and read here.
    pub replica_fetch_local: u64,
    /// Partitions of followers' fetches received here and read on another shard (a hop).
    pub replica_fetch_forwarded: u64,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    pub fn new() -> Registry {
        Registry {
            stages: Stage::ALL.iter().map(|_| Latency::new()).collect(),
            apis: BTreeMap::new(),
            unknown_api_requests: 0,
            connections_accepted: 0,
            connections_closed: 0,
            replica_fetch_local: 0,
            replica_fetch_forwarded: 0,
        }
    }

    pub fn stage(&self, stage: Stage) -> &Latency {
        &self.stages[stage as usize]
    }

    /// Per-API statistics, by API key, for the APIs seen so far.
    pub fn apis(&self) -> impl Iterator<Item = (ApiKey, &ApiStats)> {
        self.apis
            .iter()
            .filter_map(|(key, stats)| ApiKey::try_from(*key).ok().map(|api| (api, stats)))
    }

    pub fn connections_open(&self) -> u64 {
        self.connections_accepted
            .saturating_sub(self.connections_closed)
    }

    pub fn record_stage(&mut self, stage: Stage, elapsed: Duration) {
        self.stages[stage as usize].record(elapsed);
    }

    /// Only known APIs get an entry (allocated the first time each is seen), so a client
    /// cannot grow the registry by sending made-up keys.
    fn api_mut(&mut self, api_key: i16) -> Option<&mut ApiStats> {
        if ApiKey::try_from(api_key).is_err() {
            self.unknown_api_requests += 1;
            return None;
        }
        Some(self.apis.entry(api_key).or_default())
    }

    pub fn record_request(&mut self, done: RequestDone) {
        let Some(stats) = self.api_mut(done.api_key) else {
            return;
        };
        stats.requests += 1;
        stats.bytes_in += done.bytes_in as u64;
        stats.bytes_out += done.bytes_out as u64;
        if done.failed {
            stats.failed += 1;
        }
        stats.latency.record(done.elapsed);
    }

    pub fn record_handle(&mut self, api_key: i16, elapsed: Duration) {
        if let Some(stats) = self.api_mut(api_key) {
            stats.handle.record(elapsed);
        }
    }

    pub fn record_partition_error(&mut self, api: ApiKey, code: i16) {
        if let Some(stats) = self.api_mut(api as i16) {
            *stats.partition_errors.entry(code).or_default() += 1;
        }
    }

    /// Adds another shard's registry (for the merged JSON breakdown).
    pub fn merge(&mut self, other: &Registry) {
        for (mine, theirs) in self.stages.iter_mut().zip(&other.stages) {
            mine.merge(theirs);
        }
        for (key, theirs) in &other.apis {
            let mine = self.apis.entry(*key).or_default();
            mine.requests += theirs.requests;
            mine.failed += theirs.failed;
            mine.bytes_in += theirs.bytes_in;
            mine.bytes_out += theirs.bytes_out;
            mine.latency.merge(&theirs.latency);
            mine.handle.merge(&theirs.handle);
            for (code, n) in &theirs.partition_errors {
                *mine.partition_errors.entry(*code).or_default() += n;
            }
        }
        self.unknown_api_requests += other.unknown_api_requests;
        self.connections_accepted += other.connections_accepted;
        self.connections_closed += other.connections_closed;
        self.replica_fetch_local += other.replica_fetch_local;
        self.replica_fetch_forwarded += other.replica_fetch_forwarded;
    }
}

/// What the connection knows once a request is finished.
#[derive(Debug, Clone, Copy)]
pub struct RequestDone {
    pub api_key: i16,
    pub bytes_in: usize,
    pub bytes_out: usize,
    pub elapsed: Duration,
    /// The request failed and the connection is being closed.
    pub failed: bool,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::new());
}

/// Runs `f` on this shard's registry. Metrics are never worth a panic: during thread
/// teardown (or a re-entrant borrow, which nothing here does) the sample is dropped.
fn with_registry(f: impl FnOnce(&mut Registry)) {
    let _ = REGISTRY.try_with(|r| {
        if let Ok(mut registry) = r.try_borrow_mut() {
            f(&mut registry);
        }
    });
}

pub fn record_stage(stage: Stage, elapsed: Duration) {
    with_registry(|r| r.record_stage(stage, elapsed));
}

pub fn record_request(done: RequestDone) {
    with_registry(|r| r.record_request(done));
}

/// Records a handler's time; unknown keys are not counted here (their request is).
pub fn record_handle(api_key: i16, elapsed: Duration) {
    with_registry(|r| {
        if ApiKey::try_from(api_key).is_ok() {
            r.record_handle(api_key, elapsed);
        }
    });
}

pub fn record_partition_error(api: ApiKey, code: i16) {
    with_registry(|r| r.record_partition_error(api, code));
}

pub fn connection_accepted() {
    with_registry(|r| r.connections_accepted += 1);
}

pub fn connection_closed() {
    with_registry(|r| r.connections_closed += 1);
}

/// `partitions` of a follower's fetch were read on this shard (`local`) or sent to another.
pub fn record_replica_fetch(local: bool, partitions: usize) {
    with_registry(|r| {
        let n = partitions as u64;
        if local {
            r.replica_fetch_local += n;
        } else {
            r.replica_fetch_forwarded += n;
        }
    });
}

/// A copy of this shard's registry.
pub fn snapshot() -> Registry {
    REGISTRY
        .try_with(|r| r.borrow().clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(api_key: i16, failed: bool) -> RequestDone {
        RequestDone {
            api_key,
            bytes_in: 100,
            bytes_out: 40,
            elapsed: Duration::from_micros(250),
            failed,
        }
    }

    #[test]
    fn counts_requests_per_api_and_ignores_unknown_keys() {
        let mut r = Registry::new();
        r.record_request(done(ApiKey::Produce as i16, false));
        r.record_request(done(ApiKey::Produce as i16, true));
        r.record_request(done(ApiKey::Fetch as i16, false));
        r.record_request(done(31_000, false));
        r.record_partition_error(ApiKey::Produce, 3);
        r.record_handle(ApiKey::Produce as i16, Duration::from_micros(90));
        r.record_stage(Stage::Append, Duration::from_micros(10));
        let apis: Vec<(ApiKey, &ApiStats)> = r.apis().collect();
        assert_eq!(apis.len(), 2);
        let (api, produce) = apis[0];
        assert_eq!(api, ApiKey::Produce);
        assert_eq!((produce.requests, produce.failed), (2, 1));
        assert_eq!((produce.bytes_in, produce.bytes_out), (200, 80));
        assert_eq!(produce.latency.count(), 2);
        assert_eq!(produce.partition_errors.get(&3), Some(&1));
        assert_eq!(produce.handle.count(), 1);
        assert_eq!(r.unknown_api_requests, 1);
        assert_eq!(r.stage(Stage::Append).count(), 1);
        assert_eq!(r.stage(Stage::Fsync).count(), 0);
    }

    #[test]
    fn merging_adds_everything() {
        let mut a = Registry::new();
        a.record_request(done(ApiKey::Produce as i16, false));
        a.connections_accepted = 3;
        a.connections_closed = 1;
        let mut b = Registry::new();
        b.record_request(done(ApiKey::Produce as i16, false));
        b.record_stage(Stage::Hop, Duration::from_micros(30));
        b.connections_accepted = 2;
        a.merge(&b);
        let (_, produce) = a.apis().next().expect("produce");
        assert_eq!(produce.requests, 2);
        assert_eq!(produce.latency.count(), 2);
        assert_eq!(a.stage(Stage::Hop).count(), 1);
        assert_eq!(a.connections_open(), 4);
    }

    #[test]
    fn the_thread_local_registry_records_and_snapshots() {
        record_stage(Stage::Write, Duration::from_micros(5));
        connection_accepted();
        let s = snapshot();
        assert!(s.stage(Stage::Write).count() >= 1);
        assert!(s.connections_accepted >= 1);
    }
}
