//! Produce on one partition with idempotent-producer checks: the producer table of the
//! partition, the check-then-stage step that must not be interleaved, reporting write
//! outcomes back to the table, and loading/saving the table (snapshots + log replay).
//!
//! The sequence check and the staging happen with no `.await` in between, so two produces of
//! one producer cannot both pass the check against the same state. The write itself is still
//! group-committed: a producer's pipelined batches are staged one after the other and written
//! together. Each staged idempotent batch's outcome is reported to the table by a detached
//! task (so it is reported even if the request is abandoned): success makes it a plain
//! retained batch, failure removes it so that its retry is appended, not taken for a
//! duplicate.

use crate::util::hash::HashMap;
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use crate::idempotence::producer_snapshot;
use crate::idempotence::producer_state::{
    Admission, ProducerBatch, ProducerStateTable, SequenceError,
};
use crate::log::record_check::RecordCheckError;
use crate::log::{AppendInfo, AppendOptions, Log, LogError};
use crate::model::Offset;
use crate::protocol::record_batch::{BatchHeader, TimestampType};
use crate::protocol::ResponseError;
use crate::runtime;
use crate::util::exclusive::Exclusive;
use crate::util::local_oneshot;

/// Bytes read per step when rebuilding the table from the log.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// Why a produce to a partition failed.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Sequence(#[from] SequenceError),
    #[error("transactional and control batches are not supported: this broker does not implement transactions")]
    Transactional,
    #[error("an idempotent produce must carry exactly one record batch per partition, got {0}")]
    MultipleBatches(usize),
    #[error("the batch of producer {0} has no base sequence")]
    MissingSequence(i64),
    /// Records the topic's config refuses (compacted without a key, timestamp out of range).
    #[error(transparent)]
    Records(#[from] crate::log::record_check::RecordCheckError),
    /// The partition stopped leading (or led at another epoch) while this produce waited to
    /// be staged: the log may be a follower's now.
    #[error("this broker stopped leading the partition before the batch was appended")]
    LeadershipChanged,
}

impl ProduceError {
    /// The Kafka error code a client expects.
    pub fn kafka_code(&self) -> Option<i16> {
        let e = match self {
            ProduceError::Log(_) => return None,
            ProduceError::Sequence(SequenceError::StaleEpoch { .. }) => {
                ResponseError::InvalidProducerEpoch
            }
            ProduceError::Sequence(_) => ResponseError::OutOfOrderSequenceNumber,
            // No transaction can be open here (InitProducerId refuses transactional ids), so
            // a transactional batch is in an invalid transaction state; the message says why.
            ProduceError::Transactional => ResponseError::InvalidTxnState,
            // Kafka rejects both with INVALID_RECORD.
            ProduceError::MultipleBatches(_) | ProduceError::MissingSequence(_) => {
                ResponseError::InvalidRecord
            }
            ProduceError::LeadershipChanged => ResponseError::NotLeaderOrFollower,
            ProduceError::Records(e) => match e {
                RecordCheckError::InvalidTimestamp(_) => ResponseError::InvalidTimestamp,
                RecordCheckError::InvalidRecord(_) => ResponseError::InvalidRecord,
                RecordCheckError::Corrupt(_) => ResponseError::CorruptMessage,
            },
        };
        Some(e.code())
    }
}

/// What loading a partition's producer state found (for the startup line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProducerLoad {
    /// The offset of the snapshot loaded, if one was usable.
    pub snapshot_offset: Option<Offset>,
    /// Idempotent batches replayed from the log after the snapshot.
    pub replayed_batches: u64,
}

/// The idempotent producers of one partition and the requests waiting on their in-flight
/// batches. Shared (`Rc`) with the tasks that report write outcomes.
#[derive(Default)]
pub struct ProducerStates {
    table: RefCell<ProducerStateTable>,
    /// Produces waiting for an in-flight batch of a producer to be reported.
    waiters: RefCell<HashMap<i64, Vec<local_oneshot::Sender<()>>>>,
    /// The log offset of the last snapshot written (to skip writing identical ones).
    last_snapshot_offset: RefCell<Option<Offset>>,
    /// One snapshot writer at a time (a roll and housekeeping may ask at once).
    snapshot_writer: Exclusive,
}

impl ProducerStates {
    pub fn new() -> Rc<ProducerStates> {
        Rc::new(ProducerStates::default())
    }

    /// A copy of the table (tests, metrics).
    pub fn table(&self) -> ProducerStateTable {
        self.table.borrow().clone()
    }

    /// Forgets producers idle for `expiration_ms`; returns how many.
    pub fn expire(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.table.borrow_mut().expire(now_ms, expiration_ms)
    }

    fn wait_for_producer(&self, producer_id: i64) -> local_oneshot::Receiver<()> {
        let (tx, rx) = local_oneshot::channel();
        self.waiters
            .borrow_mut()
            .entry(producer_id)
            .or_default()
            .push(tx);
        rx
    }

    fn wake_producer(&self, producer_id: i64) {
        let waiters = self.waiters.borrow_mut().remove(&producer_id);
        for w in waiters.into_iter().flatten() {
            w.send(());
        }
    }

    /// Rebuilds the table after the log opened: the newest usable snapshot, then every batch
    /// from its offset (or from the log start) to the log end.
    pub async fn load(&self, log: &Log, now_ms: i64) -> Result<ProducerLoad, LogError> {
        let offsets = log.offsets();
        let end = Offset(offsets.written_end_offset);
        let dir = log.dir().to_path_buf();
        let snapshot = producer_snapshot::load_newest(&dir, end)
            .await
            .map_err(|e| LogError::from_io(&dir, "loading a producer snapshot", e))?;
        let snapshot_offset = snapshot.as_ref().map(|s| s.offset);
        let (mut table, from) = match snapshot {
            Some(s) => (s.table, s.offset),
            None => (ProducerStateTable::new(), Offset(offsets.log_start_offset)),
        };
        table.truncate_to(end);
        let mut next = from.max(Offset(offsets.log_start_offset));
        let mut replayed = 0u64;
        while next < end {
            let read = log.read(next.0, REPLAY_READ_BYTES, Some(end.0)).await?;
            if read.records.is_empty() {
                break;
            }
            let mut rest: &[u8] = &read.records;
            let before = next;
            while let Ok(h) = BatchHeader::parse(rest) {
                if h.total_len() > rest.len() {
                    break;
                }
                if let Some(b) = ProducerBatch::from_header(&h) {
                    // The broker's clock at load: the log holds producers' own timestamps,
                    // not when they were last active, and a restart must not expire them.
                    let (first, last) = (Offset(h.base_offset), Offset(h.last_offset()));
                    table.replay(&b, first, last, h.max_timestamp, now_ms);
                    replayed += 1;
                }
                next = next.max(Offset(h.next_offset()));
                rest = &rest[h.total_len()..];
            }
            if next == before {
                break;
            }
        }
        tracing::debug!(dir = %dir.display(), from = from.0, end = end.0, replayed, producers = table.len(), "producer state loaded");
        *self.table.borrow_mut() = table;
        Ok(ProducerLoad {
            snapshot_offset,
            replayed_batches: replayed,
        })
    }

    /// Writes a snapshot if the log moved since the last one. Its offset is the lowest
    /// in-flight batch's (in-flight batches are left out) or the written end.
    pub async fn snapshot(&self, log: &Log) -> Result<(), LogError> {
        let _writer = self.snapshot_writer.enter().await;
        let (offset, table) = {
            let table = self.table.borrow();
            let written = Offset(log.offsets().written_end_offset);
            let offset = table
                .lowest_in_flight_offset()
                .map_or(written, |o| o.min(written));
            (offset, table.clone())
        };
        if *self.last_snapshot_offset.borrow() == Some(offset) {
            return Ok(());
        }
        let dir = log.dir().to_path_buf();
        producer_snapshot::write_snapshot(&dir, offset, &table)
            .await
            .map_err(|e| LogError::from_io(&dir, "writing a producer snapshot", e))?;
        *self.last_snapshot_offset.borrow_mut() = Some(offset);
        Ok(())
    }

    /// A follower appended the leader's batches: their producers are recorded as the log has
    /// them (no checks: the leader checked), so that after a failover a retry of an
    /// acknowledged batch is a duplicate here too.
    pub fn replay_replicated(&self, headers: &[BatchHeader], now_ms: i64) {
        let mut table = self.table.borrow_mut();
        for h in headers {
            if let Some(b) = ProducerBatch::from_header(h) {
                let (first, last) = (Offset(h.base_offset), Offset(h.last_offset()));
                table.replay(&b, first, last, h.max_timestamp, now_ms);
            }
        }
    }

    /// The log was truncated to `log_end`: batches past it are forgotten.
    pub fn truncate_to(&self, log_end: Offset) {
        self.table.borrow_mut().truncate_to(log_end);
    }

    /// The log is about to start over empty (a follower behind the leader's log start):
    /// snapshots go first (durably, so a crash cannot load producers of records the log no
    /// longer has), then every producer is forgotten.
    pub async fn start_over(&self, dir: &Path) -> Result<(), LogError> {
        let _writer = self.snapshot_writer.enter().await;
        let io = |e| LogError::from_io(dir, "removing producer snapshots", e);
        for offset in producer_snapshot::list_snapshots(dir).map_err(io)? {
            runtime::remove_file(&producer_snapshot::snapshot_path(dir, offset))
                .await
                .map_err(io)?;
        }
        runtime::sync_dir(dir)
            .await
            .map_err(|e| LogError::from_sync(dir, "syncing the log directory", e))?;
        *self.table.borrow_mut() = ProducerStateTable::new();
        *self.last_snapshot_offset.borrow_mut() = None;
        Ok(())
    }

    /// Waits (bounded) until no batch is in flight: after a log closed, its appenders are
    /// answered but their outcome tasks may not have run yet.
    pub async fn settle(&self) {
        for _ in 0..100 {
            if !self.table.borrow().has_in_flight() {
                return;
            }
            runtime::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
}

/// Appends `records` to `log`, applying the idempotent-producer rules when the batch has a
/// producer id. A duplicate is answered with its original offsets and not written.
///
/// `may_stage` is asked right before staging, with no `.await` after it: a leader passes
/// whether it still leads at the epoch the batch is stamped with (everything before may
/// wait: the log's turn, an in-flight batch of the same producer).
pub async fn append(
    states: &Rc<ProducerStates>,
    log: &Log,
    records: &[u8],
    options: AppendOptions,
    may_stage: &dyn Fn() -> bool,
) -> Result<AppendInfo, ProduceError> {
    let Some((header, batch)) = producer_batch(records)? else {
        log.wait_appendable().await?;
        if !may_stage() {
            return Err(ProduceError::LeadershipChanged);
        }
        return Ok(log.stage_append(records, options)?.written().await?);
    };
    loop {
        log.wait_appendable().await?;
        // From here to the staging: no `.await`.
        if !may_stage() {
            return Err(ProduceError::LeadershipChanged);
        }
        let generation = log.write_generation();
        let admission = states.table.borrow().check(&batch, generation)?;
        match admission {
            Admission::Duplicate(original) => {
                let log_append_time =
                    log.config().message_timestamp_type == TimestampType::LogAppendTime;
                return Ok(AppendInfo {
                    base_offset: original.first_offset,
                    last_offset: original.last_offset,
                    log_append_time_ms: if log_append_time {
                        original.max_timestamp
                    } else {
                        -1
                    },
                    log_start_offset: Offset(log.offsets().log_start_offset),
                    record_count: (original.last_offset.0 - original.first_offset.0 + 1).max(0)
                        as u64,
                });
            }
            Admission::WaitForInFlight => {
                states.wait_for_producer(batch.producer_id).await;
                continue;
            }
            Admission::Append => {}
        }
        let staged = log.stage_append(records, options)?;
        let info = staged.info();
        let max_timestamp = if info.log_append_time_ms >= 0 {
            info.log_append_time_ms
        } else {
            header.max_timestamp
        };
        let first_offset = info.base_offset;
        states.table.borrow_mut().record_staged(
            &batch,
            first_offset,
            info.last_offset,
            max_timestamp,
            options.now_ms,
            generation,
        );
        let (tx, rx) = local_oneshot::channel();
        let reporter = Rc::clone(states);
        runtime::spawn_detached(async move {
            let result = staged.written().await;
            {
                let mut table = reporter.table.borrow_mut();
                match &result {
                    Ok(_) => table.mark_written(batch.producer_id, first_offset, batch.first_seq),
                    Err(_) => table.remove_failed(batch.producer_id, first_offset, batch.first_seq),
                }
            }
            reporter.wake_producer(batch.producer_id);
            tx.send(result);
        });
        return match rx.await {
            Some(result) => Ok(result?),
            None => Err(LogError::Closed(log.dir().to_path_buf()).into()),
        };
    }
}

/// The producer of an idempotent produce, or `None` for a plain one. Only headers are parsed
/// here; the log validates the batches fully. Bytes that do not parse are left to the log to
/// reject.
fn producer_batch(records: &[u8]) -> Result<Option<(BatchHeader, ProducerBatch)>, ProduceError> {
    let mut headers = Vec::new();
    let mut rest = records;
    while let Ok(h) = BatchHeader::parse(rest) {
        headers.push(h);
        if h.total_len() >= rest.len() {
            break;
        }
        rest = &rest[h.total_len()..];
    }
    if headers
        .iter()
        .any(|h| h.is_transactional() || h.is_control())
    {
        return Err(ProduceError::Transactional);
    }
    let Some(first) = headers.iter().find(|h| h.has_producer_id()) else {
        return Ok(None);
    };
    if headers.len() > 1 {
        return Err(ProduceError::MultipleBatches(headers.len()));
    }
    if first.base_sequence < 0 {
        return Err(ProduceError::MissingSequence(first.producer_id));
    }
    Ok(ProducerBatch::from_header(first).map(|b| (*first, b)))
}
