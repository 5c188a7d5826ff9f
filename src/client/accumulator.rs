//! Per-partition batching, without I/O: records go into the open batch of their partition; a
//! batch is closed when it reaches `batch_size` bytes or when `linger` has passed since its
//! first record. Time is an argument, so the rules are unit-testable.

use crate::util::hash::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::protocol::batch_builder::{BatchBuilder, BuildError};

/// A new batch reserves room for `batch_size` bytes, up to this much (a larger batch grows).
const MAX_RESERVED: usize = 1 << 20;

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: Arc<str>,
    pub partition: i32,
}

/// One record to add (borrowed: the builder copies it).
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(&'a str, &'a [u8])],
    pub timestamp_ms: i64,
}

impl RecordRef<'_> {
    /// Bytes the record adds to a batch, close enough for batching and memory accounting
    /// (the varint fields are counted at their largest).
    pub fn estimated_size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(k, v)| k.len() + v.len() + 10)
            .sum();
        self.key.map_or(0, <[u8]>::len) + self.value.map_or(0, <[u8]>::len) + headers + 26
    }
}

/// A closed batch waiting to be sent (or sent again), with what to call per record.
pub struct ReadyBatch<T> {
    pub tp: TopicPartition,
    pub builder: BatchBuilder,
    /// One per record, in offset order.
    pub payloads: Vec<T>,
    /// Sum of the records' [`RecordRef::estimated_size`].
    pub bytes: usize,
    pub created: Instant,
    /// Sends so far (a retry increments it).
    pub attempts: u32,
    /// The wire bytes, once built (kept so a retry sends the very same batch).
    pub encoded: Option<Bytes>,
}

struct OpenBatch<T> {
    builder: BatchBuilder,
    payloads: Vec<T>,
    bytes: usize,
    created: Instant,
}

pub struct Accumulator<T> {
    batch_size: usize,
    linger: Duration,
    open: HashMap<TopicPartition, OpenBatch<T>>,
    /// Closed batches, oldest first (so batches of one partition stay in order).
    ready: VecDeque<ReadyBatch<T>>,
}

impl<T> Accumulator<T> {
    pub fn new(batch_size: usize, linger: Duration) -> Accumulator<T> {
        Accumulator {
            batch_size: batch_size.max(1),
            linger,
            open: HashMap::default(),
            ready: VecDeque::new(),
        }
    }

    /// Adds a record to its partition's open batch. A record that does not fit in the open
    /// batch closes it first; a batch that reaches `batch_size` is closed at once. A record
    /// larger than `batch_size` travels alone.
    pub fn append(
        &mut self,
        tp: &TopicPartition,
        record: RecordRef<'_>,
        payload: T,
        now: Instant,
    ) -> Result<(), BuildError> {
        let size = record.estimated_size();
        let full = self.open.get(tp).is_some_and(|open| {
            !open.builder.is_empty() && open.builder.encoded_len() + size > self.batch_size
        });
        if full {
            self.close(tp);
        }
        let open = self.open.entry(tp.clone()).or_insert_with(|| OpenBatch {
            builder: BatchBuilder::with_capacity(
                record.timestamp_ms,
                self.batch_size.min(MAX_RESERVED),
            ),
            payloads: Vec::new(),
            bytes: 0,
            created: now,
        });
        open.builder.try_push(
            record.key,
            record.value,
            record.timestamp_ms,
            record.headers,
        )?;
        open.payloads.push(payload);
        open.bytes += size;
        if open.builder.encoded_len() >= self.batch_size {
            self.close(tp);
        }
        Ok(())
    }

    fn close(&mut self, tp: &TopicPartition) {
        if let Some(open) = self.open.remove(tp) {
            self.ready.push_back(ReadyBatch {
                tp: tp.clone(),
                builder: open.builder,
                payloads: open.payloads,
                bytes: open.bytes,
                created: open.created,
                attempts: 0,
                encoded: None,
            });
        }
    }

    /// Closes the open batches whose linger has passed (all of them with `force`, for flush
    /// and close) and takes every closed batch, oldest first.
    pub fn drain(&mut self, now: Instant, force: bool) -> Vec<ReadyBatch<T>> {
        let linger = self.linger;
        let mut due: Vec<(Instant, TopicPartition)> = self
            .open
            .iter()
            .filter(|(_, b)| force || b.created + linger <= now)
            .map(|(tp, b)| (b.created, tp.clone()))
            .collect();
        due.sort();
        for (_, tp) in due {
            self.close(&tp);
        }
        self.ready.drain(..).collect()
    }

    /// Puts batches back in front of the queue (a retry goes before later batches of its
    /// partition). `batches` in their original order.
    pub fn requeue_front(&mut self, batches: Vec<ReadyBatch<T>>) {
        for b in batches.into_iter().rev() {
            self.ready.push_front(b);
        }
    }

    /// Whether a batch is closed and waiting.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// When the oldest open batch's linger ends.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.open.values().map(|b| b.created + self.linger).min()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty() && self.ready.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::batch_builder::decode_records;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition {
            topic: Arc::from("t"),
            partition: p,
        }
    }

    fn rec(value: &[u8]) -> RecordRef<'_> {
        RecordRef {
            key: None,
            value: Some(value),
            headers: &[],
            timestamp_ms: 1_000,
        }
    }

    #[test]
    fn a_batch_waits_for_linger_then_goes() {
        let t0 = Instant::now();
        let mut acc = Accumulator::new(1 << 20, Duration::from_millis(5));
        acc.append(&tp(0), rec(b"a"), 1, t0).unwrap();
        acc.append(&tp(0), rec(b"b"), 2, t0 + Duration::from_millis(3))
            .unwrap();
        assert_eq!(acc.next_deadline(), Some(t0 + Duration::from_millis(5)));
        assert!(acc.drain(t0 + Duration::from_millis(4), false).is_empty());
        let out = acc.drain(t0 + Duration::from_millis(5), false);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].payloads, vec![1, 2]);
        let records = decode_records(&out[0].builder.build()).unwrap();
        assert_eq!(records[1].value.as_deref(), Some(&b"b"[..]));
        assert!(acc.is_empty());
    }

    #[test]
    fn batch_size_closes_batches_and_keeps_order() {
        let t0 = Instant::now();
        // Header 61 bytes + 108-byte records (126 estimated): three per 420-byte batch.
        let mut acc = Accumulator::new(420, Duration::from_secs(60));
        let value = [7u8; 100];
        for i in 0..7 {
            acc.append(&tp(0), rec(&value), i, t0).unwrap();
        }
        assert!(acc.has_ready());
        let out = acc.drain(t0, false);
        let sizes: Vec<Vec<i32>> = out.iter().map(|b| b.payloads.clone()).collect();
        assert_eq!(sizes, vec![vec![0, 1, 2], vec![3, 4, 5]]);
        assert!(out.iter().all(|b| b.builder.encoded_len() <= 420));
        // The seventh record is still open; flush takes it.
        let rest = acc.drain(t0, true);
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].payloads, vec![6]);
    }

    #[test]
    fn an_oversized_record_travels_alone() {
        let t0 = Instant::now();
        let mut acc = Accumulator::new(100, Duration::from_secs(60));
        acc.append(&tp(0), rec(b"small"), 0, t0).unwrap();
        acc.append(&tp(0), rec(&[0u8; 500]), 1, t0).unwrap();
        let out = acc.drain(t0, false);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].payloads, vec![0]);
        assert_eq!(out[1].payloads, vec![1]);
    }

    #[test]
    fn partitions_batch_separately_and_retries_go_first() {
        let t0 = Instant::now();
        let mut acc = Accumulator::new(1 << 20, Duration::ZERO);
        acc.append(&tp(0), rec(b"x"), 0, t0).unwrap();
        acc.append(&tp(1), rec(b"y"), 1, t0).unwrap();
        let mut out = acc.drain(t0, false);
        assert_eq!(out.len(), 2);
        acc.append(&tp(1), rec(b"z"), 2, t0).unwrap();
        let retry = out.remove(1);
        assert_eq!(retry.tp, tp(1));
        acc.requeue_front(vec![retry]);
        let again = acc.drain(t0, false);
        let order: Vec<Vec<i32>> = again.iter().map(|b| b.payloads.clone()).collect();
        assert_eq!(order, vec![vec![1], vec![2]]);
    }
}
