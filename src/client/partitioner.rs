//! Which partition a keyed record goes to: Kafka's default partitioner for keys, so a key lands
//! on the partition the Java client (and librdkafka's `murmur2_random`) would pick:
//! `toPositive(murmur2(key)) % partitions`, where `toPositive` clears the sign bit.

/// MurmurHash2 (32-bit) as Kafka's `Utils.murmur2` computes it: seed `0x9747b28c`, the
/// bytes read as little-endian 32-bit words, the tail mixed in as the reference algorithm does.
/// Returned as Java's signed `int`.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;

    let mut h = SEED ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        let mut k = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= u32::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` among `partitions` (> 0), as Kafka's default partitioner picks it.
pub fn key_partition(key: &[u8], partitions: usize) -> i32 {
    let positive = (murmur2(key) & 0x7fff_ffff) as u32;
    (positive % partitions.max(1) as u32) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values of Kafka's `UtilsTest.testMurmur2`.
    #[test]
    fn matches_kafkas_murmur2() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{}", String::from_utf8_lossy(key));
        }
    }

    /// Every tail length (0 to 3 bytes after the last word), against kafka-python's
    /// `kafka.partitioner.default.murmur2` (the same algorithm).
    #[test]
    fn every_tail_length() {
        let cases: [(&[u8], i32); 5] = [
            (b"", 275_646_681),
            (b"a", -1_563_381_124),
            (b"ab", 316_155_434),
            (b"abcd", -1_323_649_548),
            (b"abcde", 461_995_741),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn partitions_are_the_positive_hash_modulo_the_count() {
        // murmur2("21") = -973932308; & 0x7fffffff = 1173551340.
        assert_eq!(key_partition(b"21", 4), 1_173_551_340 % 4);
        assert_eq!(key_partition(b"21", 7), 1_173_551_340 % 7);
        // murmur2("abc") = 479470107 is positive already.
        assert_eq!(key_partition(b"abc", 10), 7);
        assert_eq!(key_partition(b"anything", 1), 0);
    }
}
