//! Helpers shared by the log integration tests: a tiny seeded RNG, batches whose record values
//! encode a sequence number, and a verifier that walks a whole log checking offsets, CRCs and
//! values.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::Path;

use ringbroker::log::{AppendOptions, Log};
use ringbroker::protocol::batch_builder::{decode_records, BatchBuilder};
use ringbroker::protocol::record_batch::{self, BatchHeader};

/// xorshift64*: deterministic, seedable, good enough to pick sizes and delays.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        // Mix the seed so that nearby seeds give unrelated streams; never zero.
        let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
        s = (s ^ (s >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        s = (s ^ (s >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        XorShift((s ^ (s >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..hi` (`hi > lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }
}

/// Length of the `seq=<16 digits>;` prefix every value starts with.
pub const VALUE_PREFIX_LEN: usize = 21;

/// A record value of `len` bytes (at least the prefix) that encodes `seq` and whose padding is
/// a function of `seq`, so that any change to it is visible.
pub fn encode_value(seq: u64, len: usize) -> Vec<u8> {
    let mut v = format!("seq={seq:016};").into_bytes();
    debug_assert_eq!(v.len(), VALUE_PREFIX_LEN);
    let pad = len.saturating_sub(VALUE_PREFIX_LEN);
    v.extend((0..pad).map(|i| b'a' + ((seq as usize + i) % 26) as u8));
    v
}

/// The sequence number in a value made by [`encode_value`], checking its padding.
pub fn decode_value(value: &[u8]) -> Result<u64, String> {
    let bad = || format!("malformed value {:?}", String::from_utf8_lossy(value));
    if value.len() < VALUE_PREFIX_LEN || !value.starts_with(b"seq=") || value[20] != b';' {
        return Err(bad());
    }
    let seq: u64 = std::str::from_utf8(&value[4..20])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    let pad_ok = value[VALUE_PREFIX_LEN..]
        .iter()
        .enumerate()
        .all(|(i, b)| *b == b'a' + ((seq as usize + i) % 26) as u8);
    if !pad_ok {
        return Err(format!("value of seq {seq}: padding corrupted"));
    }
    Ok(seq)
}

/// One uncompressed batch holding sequence numbers `first_seq..first_seq + value_lens.len()`,
/// the i-th record's value being `value_lens[i]` bytes and its timestamp `timestamp + i`.
pub fn seq_batch(first_seq: u64, value_lens: &[usize], timestamp: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(timestamp);
    for (i, len) in value_lens.iter().enumerate() {
        let v = encode_value(first_seq + i as u64, *len);
        b.push(None, Some(&v), timestamp + i as i64, &[]);
    }
    b.build().to_vec()
}

/// As [`seq_batch`], from an idempotent producer: `producer_id`, `epoch` and the producer
/// sequence number of the first record (`base_sequence`).
pub fn producer_seq_batch(
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    first_seq: u64,
    value_lens: &[usize],
    timestamp: i64,
) -> Vec<u8> {
    let mut b = BatchBuilder::new(timestamp).producer(producer_id, epoch, base_sequence);
    for (i, len) in value_lens.iter().enumerate() {
        let v = encode_value(first_seq + i as u64, *len);
        b.push(None, Some(&v), timestamp + i as i64, &[]);
    }
    b.build().to_vec()
}

/// A batch of `count` small records, sequence numbers from `first_seq`, all with timestamps
/// `timestamp_of(seq)`.
pub fn seq_batch_ts(
    first_seq: u64,
    count: usize,
    value_len: usize,
    timestamp_of: impl Fn(u64) -> i64,
) -> Vec<u8> {
    let first_ts = timestamp_of(first_seq);
    let mut b = BatchBuilder::new(first_ts);
    for i in 0..count as u64 {
        let seq = first_seq + i;
        let v = encode_value(seq, value_len);
        b.push(None, Some(&v), timestamp_of(seq), &[]);
    }
    b.build().to_vec()
}

pub fn opts(durable: bool) -> AppendOptions {
    AppendOptions {
        durable,
        now_ms: ringbroker::runtime::now_ms(),
        leader_epoch: None,
    }
}

/// Splits concatenated batches into (position, header), validating each one (CRC included).
pub fn split_batches(mut bytes: &[u8]) -> Result<Vec<(usize, BatchHeader)>, String> {
    let mut out = Vec::new();
    let mut position = 0;
    while !bytes.is_empty() {
        let h = record_batch::validate(bytes)
            .map_err(|e| format!("invalid batch at byte {position} of a read: {e}"))?;
        out.push((position, h));
        position += h.total_len();
        bytes = &bytes[h.total_len()..];
    }
    Ok(out)
}

/// Positions and headers of the batches in a segment file, read with std I/O; stops at the
/// first thing that is not a whole batch (header only, CRC not checked).
pub fn file_batches(path: &Path) -> Vec<(u64, BatchHeader)> {
    let data = std::fs::read(path).expect("reading a segment file");
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Ok(h) = BatchHeader::parse(&data[pos..]) {
        if pos + h.total_len() > data.len() {
            break;
        }
        out.push((pos as u64, h));
        pos += h.total_len();
    }
    out
}

/// Where the last whole batch of a segment file ends. A direct-I/O log pads its active
/// segment with zeros up to the block size until it is closed or sealed, so after an unclean
/// stop the file is longer than its data.
pub fn data_len(path: &Path) -> u64 {
    file_batches(path)
        .last()
        .map_or(0, |(pos, h)| pos + h.total_len() as u64)
}

/// What [`verify_log`] saw.
#[derive(Debug, Default, Clone)]
pub struct Verified {
    pub batches: u64,
    pub records: u64,
    pub bytes: u64,
    /// (base offset, stored CRC) of every batch, in log order.
    pub crcs: Vec<(i64, u32)>,
}

/// Reads the whole log from its start to its written end and checks that it is a valid,
/// contiguous prefix: batch base offsets follow each other with no gap or overlap, every batch
/// passes validation (CRC32C included), and, for batches ending at or after `decode_from`,
/// every record decodes, sits at the offset its position implies and carries the sequence
/// number equal to its offset (the writers number records so). Returns a description of the
/// first problem found.
pub async fn verify_log(log: &Log, decode_from: i64) -> Result<Verified, String> {
    let offsets = log.offsets();
    let end = offsets.written_end_offset;
    let mut next = offsets.log_start_offset;
    let mut seen = Verified::default();
    // Each read returns at least one batch (one offset) or we fail, so this is bounded.
    let max_reads = (end - next).max(0) as u64 + 1;
    for _ in 0..max_reads {
        if next >= end {
            break;
        }
        let r = log
            .read(next, 1 << 20, None)
            .await
            .map_err(|e| format!("read at offset {next}: {e}"))?;
        if r.records.is_empty() {
            return Err(format!(
                "read at offset {next} (< end {end}) returned nothing"
            ));
        }
        for (pos, h) in split_batches(&r.records).map_err(|e| format!("offset {next}: {e}"))? {
            if h.base_offset != next {
                return Err(format!(
                    "batch at offset {} where {next} was expected (gap or overlap)",
                    h.base_offset
                ));
            }
            if h.last_offset() >= decode_from {
                let bytes = &r.records[pos..pos + h.total_len()];
                let recs = decode_records(bytes)
                    .map_err(|e| format!("batch at {}: cannot decode: {e}", h.base_offset))?;
                if recs.len() as i64 != h.last_offset() - h.base_offset + 1 {
                    return Err(format!("batch at {}: wrong record count", h.base_offset));
                }
                for (i, rec) in recs.iter().enumerate() {
                    let want = h.base_offset + i as i64;
                    if rec.offset != want {
                        return Err(format!(
                            "record at {} where {want} was expected",
                            rec.offset
                        ));
                    }
                    let value = rec.value.as_deref().ok_or("null value")?;
                    let seq = decode_value(value).map_err(|e| format!("offset {want}: {e}"))?;
                    if seq as i64 != want {
                        return Err(format!("offset {want} holds sequence number {seq}"));
                    }
                }
            }
            seen.batches += 1;
            seen.records += (h.last_offset() - h.base_offset + 1) as u64;
            seen.bytes += h.total_len() as u64;
            seen.crcs.push((h.base_offset, h.crc));
            next = h.next_offset();
        }
    }
    if next != end {
        return Err(format!(
            "the log ends at {next}, its written end says {end}"
        ));
    }
    Ok(seen)
}

/// Drops `log` and lets the executor run its I/O loop once more.
///
/// `Log::close` syncs but does not close the segment files; glommio closes a dropped file
/// asynchronously, on the executor's next I/O cycle. When the executor stops right after the
/// drop (the end of a `block_on`), that never happens and the descriptors leak until the
/// process exits: three per segment per open. Tests that open a log many times call this
/// last, so that they do not run out of descriptors.
pub async fn release(log: Log) {
    drop(log);
    ringbroker::runtime::sleep(std::time::Duration::from_millis(1)).await;
}

/// Open file descriptors of this process that point into `dir`.
pub fn open_fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|entries| {
            entries
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|target| target.starts_with(dir))
                .count()
        })
        .unwrap_or(0)
}

/// The sequence number of the last record in the log (`None` when the log is empty).
pub async fn last_seq(log: &Log) -> Option<u64> {
    let o = log.offsets();
    if o.log_end_offset <= o.log_start_offset {
        return None;
    }
    let r = log
        .read(o.log_end_offset - 1, 1, None)
        .await
        .expect("reading the last batch");
    let recs = decode_records(&r.records).expect("decoding the last batch");
    let last = recs.last().expect("a record");
    Some(decode_value(last.value.as_deref().expect("a value")).expect("a sequence number"))
}

/// Runs `run` on a thread of its own and waits for it from outside, at most `bound`: a task
/// stranded by the runtime (its executor asleep with nothing pending) never sees a timer of
/// its own fire, so only a waiter on another thread can end such a hang.
pub fn on_a_thread_bounded<T: Send + 'static>(
    what: &str,
    bound: std::time::Duration,
    run: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(run());
    });
    match done_rx.recv_timeout(bound) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("{what}: the run panicked (see its message above)")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: stranded: its executor did not finish within {bound:?}")
        }
    }
}
