//! Record values: the first 8 bytes are the time the record was due (or sent), in ns since the
//! run's start, so a consumer in the same run measures end-to-end latency; the rest is filler
//! from a seeded pool of letters (compressible about as much as text, like Kafka's
//! producer-perf-test payloads).

use super::rng::Rng;

/// Bytes of the timestamp at the start of each value.
pub const STAMP_LEN: usize = 8;

pub struct PayloadPool {
    pool: Vec<u8>,
}

impl PayloadPool {
    /// Filler for values up to `max_size` bytes.
    pub fn new(max_size: usize, rng: &mut Rng) -> PayloadPool {
        let len = max_size.max(STAMP_LEN) * 2 + 4096;
        let pool = (0..len)
            .map(|_| b'A' + (rng.next_u64() % 26) as u8)
            .collect();
        PayloadPool { pool }
    }

    /// Writes a value of `size` bytes into `buf` (reused between records), stamped with
    /// `stamp_ns` when it has room for it.
    pub fn fill(&self, buf: &mut Vec<u8>, size: usize, stamp_ns: u64, rng: &mut Rng) {
        buf.clear();
        let start = (rng.next_u64() as usize) % (self.pool.len() - size);
        buf.extend_from_slice(&self.pool[start..start + size]);
        if size >= STAMP_LEN {
            buf[..STAMP_LEN].copy_from_slice(&stamp_ns.to_be_bytes());
        }
    }
}

/// The stamp of a value written by [`PayloadPool::fill`].
pub fn stamp_of(value: &[u8]) -> Option<u64> {
    let bytes: [u8; STAMP_LEN] = value.get(..STAMP_LEN)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_carry_their_stamp() {
        let mut rng = Rng::new(9);
        let pool = PayloadPool::new(100, &mut rng);
        let mut buf = Vec::new();
        pool.fill(&mut buf, 100, 123_456_789, &mut rng);
        assert_eq!(buf.len(), 100);
        assert_eq!(stamp_of(&buf), Some(123_456_789));
        assert!(buf[8..].iter().all(u8::is_ascii_uppercase));
        pool.fill(&mut buf, 3, 1, &mut rng);
        assert_eq!((buf.len(), stamp_of(&buf)), (3, None));
    }
}
