//! Idempotent producers: the per-partition table of producer ids, epochs and sequence numbers
//! that lets the broker drop retried batches and reject gaps. Pure state, no I/O.
//!
//! Kafka's rules (ProducerStateManager / ProducerAppendInfo, KIP-360):
//! - a batch without a producer id (-1) is not tracked at all;
//! - a batch equal (same epoch, first and last sequence) to one of the producer's last
//!   [`RETAINED_BATCHES`] is a duplicate: answered with the original offsets, not written;
//! - an epoch older than the producer's current one is fenced (INVALID_PRODUCER_EPOCH);
//! - a newer epoch starts over and must begin at sequence 0 (OUT_OF_ORDER_SEQUENCE_NUMBER);
//! - within an epoch a batch must start right after the previous one (wrapping at `i32::MAX`);
//! - a producer the broker knows nothing about (new, expired, or its data deleted) is accepted
//!   at any sequence: Kafka has done so since 2.5 rather than answer UNKNOWN_PRODUCER_ID, and
//!   current Java and librdkafka clients expect it.
//!
//! Batches are recorded when they are staged in the log, before their write completes, so
//! that a producer's pipelined batches are checked against each other. Such a batch is "in
//! flight" (tagged with the log's write generation, i.e. its count of failed flights at staging)
//! until the shard reports its outcome; a retry of it waits for that outcome rather than being
//! answered with offsets that might never be stored.

use crate::util::hash::HashMap;
use std::collections::VecDeque;

use crate::model::Offset;
use crate::protocol::record_batch::BatchHeader;

/// Batches remembered per producer for duplicate detection (Kafka's
/// `NUM_BATCHES_TO_RETAIN`, matching `max.in.flight.requests.per.connection` ≤ 5).
pub const RETAINED_BATCHES: usize = 5;

/// Kafka's default `producer.id.expiration.ms` (one day).
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;

/// What an idempotent batch says about its producer (from the batch header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
}

impl ProducerBatch {
    /// The producer fields of a batch; `None` for a batch without a producer id.
    pub fn from_header(header: &BatchHeader) -> Option<ProducerBatch> {
        if header.producer_id < 0 {
            return None;
        }
        Some(ProducerBatch {
            producer_id: header.producer_id,
            epoch: header.producer_epoch,
            first_seq: header.base_sequence,
            last_seq: increment_sequence(header.base_sequence, header.last_offset_delta),
        })
    }
}

/// `sequence + delta`, wrapping from `i32::MAX` to 0 as Kafka's sequences do.
pub fn increment_sequence(sequence: i32, delta: i32) -> i32 {
    let next = i64::from(sequence) + i64::from(delta);
    if next > i64::from(i32::MAX) {
        (next - i64::from(i32::MAX) - 1) as i32
    } else {
        next as i32
    }
}

/// Whether `next` directly follows `last`.
pub fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

/// One of the batches retained for a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: Offset,
    pub last_offset: Offset,
    /// The batch's max timestamp as stored (the append time on LogAppendTime logs).
    pub max_timestamp: i64,
    /// `Some(write generation)` while the batch is staged but its write has not been reported.
    pub in_flight: Option<u64>,
}

/// What the broker remembers of one producer on one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub epoch: i16,
    /// Oldest first, at most [`RETAINED_BATCHES`], ordered by offset.
    pub batches: VecDeque<BatchMetadata>,
    /// Broker time of the producer's last append (what `producer.id.expiration.ms` measures).
    pub last_activity_ms: i64,
}

/// What to do with a batch that passed the sequence checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Append it.
    Append,
    /// Already in the log: answer with these offsets, write nothing.
    Duplicate(BatchMetadata),
    /// Wait until an in-flight batch of this producer is reported, then check again (a retry
    /// of a batch being written, or a batch behind one whose write is known to have failed).
    WaitForInFlight,
}

/// Why a batch is refused. Each maps to one Kafka error code (see `kafka_code`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error("producer {producer_id} used epoch {epoch}, older than its current epoch {current}")]
    StaleEpoch {
        producer_id: i64,
        epoch: i16,
        current: i16,
    },
    #[error("producer {producer_id} started epoch {epoch} at sequence {first_seq}; a new epoch must start at 0")]
    NewEpochNotAtZero {
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
    },
    #[error("producer {producer_id} epoch {epoch}: sequence {first_seq} does not follow the last one, {last_seq}")]
    OutOfOrder {
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
    },
}

/// The producers of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateTable {
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStateTable {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (i64, &ProducerEntry)> {
        self.producers.iter().map(|(id, e)| (*id, e))
    }

    /// Checks `batch` against its producer's state. `write_generation` is the log's current
    /// count of failed flights: an in-flight batch staged under an older one is doomed.
    pub fn check(
        &self,
        batch: &ProducerBatch,
        write_generation: u64,
    ) -> Result<Admission, SequenceError> {
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            return Ok(Admission::Append);
        };
        if batch.epoch == entry.epoch {
            let same = entry
                .batches
                .iter()
                .find(|b| b.first_seq == batch.first_seq && b.last_seq == batch.last_seq);
            if let Some(original) = same {
                return Ok(match original.in_flight {
                    Some(_) => Admission::WaitForInFlight,
                    None => Admission::Duplicate(*original),
                });
            }
        }
        let doomed = entry
            .batches
            .iter()
            .any(|b| b.in_flight.is_some_and(|g| g < write_generation));
        if doomed {
            return Ok(Admission::WaitForInFlight);
        }
        if batch.epoch < entry.epoch {
            return Err(SequenceError::StaleEpoch {
                producer_id: batch.producer_id,
                epoch: batch.epoch,
                current: entry.epoch,
            });
        }
        if batch.epoch > entry.epoch {
            if batch.first_seq != 0 {
                return Err(SequenceError::NewEpochNotAtZero {
                    producer_id: batch.producer_id,
                    epoch: batch.epoch,
                    first_seq: batch.first_seq,
                });
            }
            return Ok(Admission::Append);
        }
        match entry.batches.back() {
            // Known epoch but no batch left (its only batch failed): as for an unknown producer.
            None => Ok(Admission::Append),
            Some(last) if in_sequence(last.last_seq, batch.first_seq) => Ok(Admission::Append),
            Some(last) => Err(SequenceError::OutOfOrder {
                producer_id: batch.producer_id,
                epoch: batch.epoch,
                first_seq: batch.first_seq,
                last_seq: last.last_seq,
            }),
        }
    }

    /// Records a batch just staged at `first_offset..=last_offset` (after [`Self::check`]
    /// admitted it). A newer epoch replaces the producer's retained batches.
    pub fn record_staged(
        &mut self,
        batch: &ProducerBatch,
        first_offset: Offset,
        last_offset: Offset,
        max_timestamp: i64,
        now_ms: i64,
        write_generation: u64,
    ) {
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: batch.epoch,
                batches: VecDeque::new(),
                last_activity_ms: now_ms,
            });
        if entry.epoch != batch.epoch {
            entry.epoch = batch.epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(BatchMetadata {
            first_seq: batch.first_seq,
            last_seq: batch.last_seq,
            first_offset,
            last_offset,
            max_timestamp,
            in_flight: Some(write_generation),
        });
        while entry.batches.len() > RETAINED_BATCHES {
            entry.batches.pop_front();
        }
        entry.last_activity_ms = entry.last_activity_ms.max(now_ms);
    }

    /// The write of a staged batch succeeded: it is now a plain retained batch.
    pub fn mark_written(&mut self, producer_id: i64, first_offset: Offset, first_seq: i32) {
        if let Some(b) = self.find_mut(producer_id, first_offset, first_seq) {
            b.in_flight = None;
        }
    }

    /// The write of a staged batch failed (the log rolled it back): forget it, so that its
    /// retry is appended rather than taken for a duplicate.
    pub fn remove_failed(&mut self, producer_id: i64, first_offset: Offset, first_seq: i32) {
        let Some(entry) = self.producers.get_mut(&producer_id) else {
            return;
        };
        entry
            .batches
            .retain(|b| !(b.first_offset == first_offset && b.first_seq == first_seq));
    }

    fn find_mut(
        &mut self,
        producer_id: i64,
        first_offset: Offset,
        first_seq: i32,
    ) -> Option<&mut BatchMetadata> {
        self.producers
            .get_mut(&producer_id)?
            .batches
            .iter_mut()
            .find(|b| b.first_offset == first_offset && b.first_seq == first_seq)
    }

    /// Whether any batch is staged and not yet reported.
    pub fn has_in_flight(&self) -> bool {
        self.producers
            .values()
            .any(|e| e.batches.iter().any(|b| b.in_flight.is_some()))
    }

    /// The lowest first offset of the in-flight batches.
    pub fn lowest_in_flight_offset(&self) -> Option<Offset> {
        self.producers
            .values()
            .flat_map(|e| e.batches.iter())
            .filter(|b| b.in_flight.is_some())
            .map(|b| b.first_offset)
            .min()
    }

    /// Applies a batch read back from the log (recovery), without checks: the log is the
    /// truth. Idempotent: a batch already retained (same first offset) is skipped, so a log
    /// range overlapping a snapshot can be replayed.
    pub fn replay(
        &mut self,
        batch: &ProducerBatch,
        first_offset: Offset,
        last_offset: Offset,
        max_timestamp: i64,
        activity_ms: i64,
    ) {
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: batch.epoch,
                batches: VecDeque::new(),
                last_activity_ms: activity_ms,
            });
        if batch.epoch < entry.epoch {
            return;
        }
        if batch.epoch > entry.epoch {
            entry.epoch = batch.epoch;
            entry.batches.clear();
        }
        entry.last_activity_ms = entry.last_activity_ms.max(activity_ms);
        if entry.batches.iter().any(|b| b.first_offset == first_offset) {
            return;
        }
        let at = entry
            .batches
            .partition_point(|b| b.first_offset < first_offset);
        entry.batches.insert(
            at,
            BatchMetadata {
                first_seq: batch.first_seq,
                last_seq: batch.last_seq,
                first_offset,
                last_offset,
                max_timestamp,
                in_flight: None,
            },
        );
        while entry.batches.len() > RETAINED_BATCHES {
            entry.batches.pop_front();
        }
    }

    /// Inserts a producer as a snapshot recorded it.
    pub fn restore(&mut self, producer_id: i64, entry: ProducerEntry) {
        self.producers.insert(producer_id, entry);
    }

    /// Forgets batches at or past `log_end` (a snapshot may know of batches that a crash cut
    /// from the log) and producers left with none.
    pub fn truncate_to(&mut self, log_end: Offset) {
        for entry in self.producers.values_mut() {
            entry.batches.retain(|b| b.last_offset < log_end);
        }
        self.producers.retain(|_, e| !e.batches.is_empty());
    }

    /// Removes producers idle for at least `expiration_ms` with nothing in flight; returns how
    /// many went.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            let idle = now_ms.saturating_sub(e.last_activity_ms) >= expiration_ms;
            let busy = e.batches.iter().any(|b| b.in_flight.is_some());
            busy || !idle
        });
        before - self.producers.len()
    }

    /// The table without in-flight batches: what a snapshot may record.
    pub fn written_only(&self) -> ProducerStateTable {
        let producers = self
            .producers
            .iter()
            .filter_map(|(id, e)| {
                let batches: VecDeque<BatchMetadata> = e
                    .batches
                    .iter()
                    .filter(|b| b.in_flight.is_none())
                    .copied()
                    .collect();
                (!batches.is_empty()).then_some({
                    (
                        *id,
                        ProducerEntry {
                            epoch: e.epoch,
                            batches,
                            last_activity_ms: e.last_activity_ms,
                        },
                    )
                })
            })
            .collect();
        ProducerStateTable { producers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PID: i64 = 7;

    fn batch(epoch: i16, first_seq: i32, count: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: PID,
            epoch,
            first_seq,
            last_seq: increment_sequence(first_seq, count - 1),
        }
    }

    /// Checks, stages at the next offset and marks written; returns the admission.
    fn append(
        table: &mut ProducerStateTable,
        next_offset: &mut i64,
        b: ProducerBatch,
    ) -> Result<Admission, SequenceError> {
        let admission = table.check(&b, 0)?;
        if admission == Admission::Append {
            let count = i64::from(b.last_seq.wrapping_sub(b.first_seq)) + 1;
            let first = *next_offset;
            *next_offset += count;
            table.record_staged(&b, Offset(first), Offset(first + count - 1), 100, 1_000, 0);
            table.mark_written(b.producer_id, Offset(first), b.first_seq);
        }
        Ok(admission)
    }

    #[test]
    fn in_order_batches_are_appended() {
        let mut t = ProducerStateTable::new();
        let mut next = 0;
        for i in 0..20 {
            assert_eq!(
                append(&mut t, &mut next, batch(0, i * 3, 3)),
                Ok(Admission::Append)
            );
        }
        assert_eq!(next, 60);
        assert_eq!(
            t.entry(PID).map(|e| e.batches.len()),
            Some(RETAINED_BATCHES)
        );
    }

    #[test]
    fn each_of_the_last_five_is_a_duplicate_with_its_original_offsets() {
        let mut t = ProducerStateTable::new();
        let mut next = 0;
        for i in 0..8 {
            append(&mut t, &mut next, batch(0, i * 2, 2)).expect("in order");
        }
        for i in 3..8 {
            match t.check(&batch(0, i * 2, 2), 0) {
                Ok(Admission::Duplicate(m)) => {
                    assert_eq!(m.first_offset, Offset(i64::from(i) * 2));
                    assert_eq!(m.last_offset, Offset(i64::from(i) * 2 + 1));
                }
                other => panic!("batch {i}: {other:?}"),
            }
        }
        // Older than the last five: no longer recognised, and not next in sequence.
        for i in 0..3 {
            assert!(matches!(
                t.check(&batch(0, i * 2, 2), 0),
                Err(SequenceError::OutOfOrder { .. })
            ));
        }
        // Same first sequence, different length: not a duplicate.
        assert!(matches!(
            t.check(&batch(0, 14, 1), 0),
            Err(SequenceError::OutOfOrder { .. })
        ));
    }

    #[test]
    fn gaps_are_out_of_order() {
        let mut t = ProducerStateTable::new();
        let mut next = 0;
        append(&mut t, &mut next, batch(0, 0, 5)).expect("first");
        assert_eq!(
            t.check(&batch(0, 6, 1), 0),
            Err(SequenceError::OutOfOrder {
                producer_id: PID,
                epoch: 0,
                first_seq: 6,
                last_seq: 4
            })
        );
        assert_eq!(t.check(&batch(0, 5, 1), 0), Ok(Admission::Append));
    }

    #[test]
    fn epoch_bump_must_start_at_zero_and_fences_the_old_epoch() {
        let mut t = ProducerStateTable::new();
        let mut next = 0;
        append(&mut t, &mut next, batch(3, 0, 10)).expect("first");
        assert!(matches!(
            t.check(&batch(4, 10, 1), 0),
            Err(SequenceError::NewEpochNotAtZero { .. })
        ));
        assert_eq!(
            append(&mut t, &mut next, batch(4, 0, 1)),
            Ok(Admission::Append)
        );
        assert_eq!(
            t.check(&batch(3, 10, 1), 0),
            Err(SequenceError::StaleEpoch {
                producer_id: PID,
                epoch: 3,
                current: 4
            })
        );
        // A retry of an old-epoch batch is fenced too, not answered as a duplicate.
        assert!(matches!(
            t.check(&batch(3, 0, 10), 0),
            Err(SequenceError::StaleEpoch { .. })
        ));
    }

    #[test]
    fn unknown_producers_are_accepted_at_any_sequence() {
        let t = ProducerStateTable::new();
        assert_eq!(t.check(&batch(0, 0, 1), 0), Ok(Admission::Append));
        assert_eq!(t.check(&batch(9, 12345, 1), 0), Ok(Admission::Append));
    }

    #[test]
    fn sequences_wrap_from_max_to_zero() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert!(in_sequence(i32::MAX, 0));
        assert!(!in_sequence(i32::MAX, 1));
        let mut t = ProducerStateTable::new();
        let mut next = 0;
        append(&mut t, &mut next, batch(0, i32::MAX - 2, 2)).expect("first");
        // i32::MAX - 1 + 1 = MAX; this batch holds MAX, 0, 1.
        let wrapping = batch(0, i32::MAX, 3);
        assert_eq!(wrapping.last_seq, 1);
        assert_eq!(append(&mut t, &mut next, wrapping), Ok(Admission::Append));
        assert_eq!(t.check(&batch(0, 2, 1), 0), Ok(Admission::Append));
        assert!(matches!(t.check(&wrapping, 0), Ok(Admission::Duplicate(_))));
    }

    #[test]
    fn in_flight_retries_wait_and_failures_are_forgotten() {
        let mut t = ProducerStateTable::new();
        let b0 = batch(0, 0, 2);
        t.record_staged(&b0, Offset(0), Offset(1), 5, 1_000, 0);
        assert_eq!(t.check(&b0, 0), Ok(Admission::WaitForInFlight));
        // Pipelining: the next batch is admitted while the first is in flight.
        let b1 = batch(0, 2, 2);
        assert_eq!(t.check(&b1, 0), Ok(Admission::Append));
        t.record_staged(&b1, Offset(2), Offset(3), 5, 1_000, 0);
        assert!(t.has_in_flight());
        assert_eq!(t.lowest_in_flight_offset(), Some(Offset(0)));
        // A flight failed (generation 1): anything behind the doomed batches waits.
        assert_eq!(t.check(&batch(0, 4, 1), 1), Ok(Admission::WaitForInFlight));
        t.remove_failed(PID, Offset(0), 0);
        t.remove_failed(PID, Offset(2), 2);
        assert!(!t.has_in_flight());
        // The retry of the failed batch is appended, not a duplicate.
        assert_eq!(t.check(&b0, 1), Ok(Admission::Append));
        t.record_staged(&b0, Offset(0), Offset(1), 5, 1_000, 1);
        t.mark_written(PID, Offset(0), 0);
        assert!(matches!(t.check(&b0, 1), Ok(Admission::Duplicate(_))));
    }

    #[test]
    fn idle_producers_expire() {
        let mut t = ProducerStateTable::new();
        let mut next = 0;
        append(&mut t, &mut next, batch(0, 0, 1)).expect("first"); // activity at 1_000
        let other = ProducerBatch {
            producer_id: 8,
            ..batch(0, 0, 1)
        };
        t.record_staged(&other, Offset(1), Offset(1), 0, 500, 0); // in flight: never expires
        assert_eq!(t.expire(1_000 + 99, 100), 0);
        assert_eq!(t.expire(1_000 + 100, 100), 1);
        assert!(t.entry(PID).is_none());
        assert!(t.entry(8).is_some());
    }

    #[test]
    fn replay_is_idempotent_and_follows_epochs() {
        let mut t = ProducerStateTable::new();
        for i in 0..7 {
            let b = batch(0, i, 1);
            let at = Offset(i64::from(i));
            t.replay(&b, at, at, 0, 10);
            t.replay(&b, at, at, 0, 10);
        }
        let e = t.entry(PID).expect("entry");
        assert_eq!(e.batches.len(), RETAINED_BATCHES);
        assert_eq!(e.batches.front().map(|b| b.first_offset), Some(Offset(2)));
        t.replay(&batch(1, 0, 1), Offset(7), Offset(7), 0, 10);
        t.replay(&batch(0, 7, 1), Offset(8), Offset(8), 0, 10); // a stale epoch in the log is ignored
        let e = t.entry(PID).expect("entry");
        assert_eq!((e.epoch, e.batches.len()), (1, 1));
        t.truncate_to(Offset(7));
        assert!(t.is_empty());
    }
}
