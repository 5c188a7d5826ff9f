//! Zigzag variable-length integers, as used by Kafka record format v2 (`varint`, `varlong`).
//!
//! A signed value is first zigzag-mapped to an unsigned one (0 → 0, -1 → 1, 1 → 2, -2 → 3, ...)
//! and then written seven bits at a time, least significant group first, with the high bit set on
//! every byte except the last. An `i32` takes at most [`MAX_VARINT_LEN`] bytes, an `i64` at most
//! [`MAX_VARLONG_LEN`].
//!
//! Decoding is strict: an encoding longer than the maximum, or whose last byte carries bits that do
//! not fit the target type, is rejected with [`VarintError::Overflow`] rather than silently
//! truncated.

use bytes::BufMut;

/// Longest encoding of a zigzag `i32`.
pub const MAX_VARINT_LEN: usize = 5;
/// Longest encoding of a zigzag `i64`.
pub const MAX_VARLONG_LEN: usize = 10;

/// Why a varint could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum VarintError {
    /// The input ended before the final byte (the one without the continuation bit).
    #[error("truncated varint: input ended after {read} bytes")]
    Truncated { read: usize },
    /// The encoding is longer than `max` bytes or its value does not fit the target type.
    #[error("malformed varint: longer than {max} bytes or out of range")]
    Overflow { max: usize },
}

#[inline]
fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

#[inline]
fn unzigzag32(u: u32) -> i32 {
    ((u >> 1) as i32) ^ -((u & 1) as i32)
}

#[inline]
fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag64(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

#[inline]
fn put_unsigned(out: &mut impl BufMut, mut u: u64) {
    while u >= 0x80 {
        out.put_u8((u as u8) | 0x80);
        u >>= 7;
    }
    out.put_u8(u as u8);
}

#[inline]
fn unsigned_len(u: u64) -> usize {
    let bits = 64 - (u | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Decodes an unsigned base-128 integer of at most `max_bits` significant bits, encoded in at most
/// `max_len` bytes. Returns the value and the number of bytes consumed.
#[inline]
fn get_unsigned(buf: &[u8], max_len: usize, max_bits: u32) -> Result<(u64, usize), VarintError> {
    let mut value: u64 = 0;
    for (i, &byte) in buf.iter().take(max_len).enumerate() {
        let shift = 7 * i as u32;
        let group = u64::from(byte & 0x7f);
        // The last permitted byte may only carry the bits that are left.
        if shift + 7 > max_bits && (group >> (max_bits - shift)) != 0 {
            return Err(VarintError::Overflow { max: max_len });
        }
        value |= group << shift;
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    if buf.len() >= max_len {
        Err(VarintError::Overflow { max: max_len })
    } else {
        Err(VarintError::Truncated { read: buf.len() })
    }
}

/// Appends `v` as a zigzag varint.
#[inline]
pub fn put_varint(out: &mut impl BufMut, v: i32) {
    put_unsigned(out, u64::from(zigzag32(v)));
}

/// Appends `v` as a zigzag varlong.
#[inline]
pub fn put_varlong(out: &mut impl BufMut, v: i64) {
    put_unsigned(out, zigzag64(v));
}

/// Number of bytes [`put_varint`] writes for `v`.
#[inline]
pub fn varint_len(v: i32) -> usize {
    unsigned_len(u64::from(zigzag32(v)))
}

/// Number of bytes [`put_varlong`] writes for `v`.
#[inline]
pub fn varlong_len(v: i64) -> usize {
    unsigned_len(zigzag64(v))
}

/// Decodes a zigzag varint from the start of `buf`; returns the value and the bytes consumed.
#[inline]
pub fn get_varint(buf: &[u8]) -> Result<(i32, usize), VarintError> {
    let (u, n) = get_unsigned(buf, MAX_VARINT_LEN, 32)?;
    // get_unsigned guarantees at most 32 significant bits.
    Ok((unzigzag32(u as u32), n))
}

/// Decodes a zigzag varlong from the start of `buf`; returns the value and the bytes consumed.
#[inline]
pub fn get_varlong(buf: &[u8]) -> Result<(i64, usize), VarintError> {
    let (u, n) = get_unsigned(buf, MAX_VARLONG_LEN, 64)?;
    Ok((unzigzag64(u), n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc32(v: i32) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        out
    }

    fn enc64(v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        put_varlong(&mut out, v);
        out
    }

    #[test]
    fn known_varint_encodings() {
        let cases: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-2, &[0x03]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (-65, &[0x81, 0x01]),
            (300, &[0xd8, 0x04]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for &(v, bytes) in cases {
            assert_eq!(enc32(v), bytes, "encode {v}");
            assert_eq!(varint_len(v), bytes.len(), "len {v}");
            assert_eq!(get_varint(bytes), Ok((v, bytes.len())), "decode {v}");
        }
    }

    #[test]
    fn known_varlong_encodings() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (
                i64::MAX,
                &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
            (
                i64::MIN,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ];
        for &(v, bytes) in cases {
            assert_eq!(enc64(v), bytes, "encode {v}");
            assert_eq!(varlong_len(v), bytes.len(), "len {v}");
            assert_eq!(get_varlong(bytes), Ok((v, bytes.len())), "decode {v}");
        }
    }

    #[test]
    fn truncated_input() {
        assert_eq!(get_varint(&[]), Err(VarintError::Truncated { read: 0 }));
        assert_eq!(
            get_varint(&[0x80, 0x80]),
            Err(VarintError::Truncated { read: 2 })
        );
        assert_eq!(get_varlong(&[]), Err(VarintError::Truncated { read: 0 }));
        assert_eq!(
            get_varlong(&[0xff; 9]),
            Err(VarintError::Truncated { read: 9 })
        );
    }

    #[test]
    fn overlong_or_out_of_range_input() {
        // Six bytes for an i32.
        assert_eq!(
            get_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]),
            Err(VarintError::Overflow { max: 5 })
        );
        // Fifth byte carries more than the 4 remaining bits.
        assert_eq!(
            get_varint(&[0xff, 0xff, 0xff, 0xff, 0x1f]),
            Err(VarintError::Overflow { max: 5 })
        );
        // Eleven bytes for an i64.
        assert_eq!(
            get_varlong(&[0x80; 11]),
            Err(VarintError::Overflow { max: 10 })
        );
        // Tenth byte carries more than the 1 remaining bit.
        let mut bytes = [0xffu8; 10];
        bytes[9] = 0x02;
        assert_eq!(get_varlong(&bytes), Err(VarintError::Overflow { max: 10 }));
    }

    #[test]
    fn decoding_stops_at_last_byte() {
        assert_eq!(get_varint(&[0x02, 0xff, 0xff]), Ok((1, 1)));
        assert_eq!(get_varlong(&[0x80, 0x01, 0x00]), Ok((64, 2)));
    }

    proptest! {
        #[test]
        fn varint_round_trip(v in any::<i32>()) {
            let bytes = enc32(v);
            prop_assert_eq!(bytes.len(), varint_len(v));
            prop_assert!(bytes.len() <= MAX_VARINT_LEN);
            prop_assert_eq!(get_varint(&bytes), Ok((v, bytes.len())));
        }

        #[test]
        fn varlong_round_trip(v in any::<i64>()) {
            let bytes = enc64(v);
            prop_assert_eq!(bytes.len(), varlong_len(v));
            prop_assert!(bytes.len() <= MAX_VARLONG_LEN);
            prop_assert_eq!(get_varlong(&bytes), Ok((v, bytes.len())));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            if let Ok((_, n)) = get_varint(&bytes) {
                prop_assert!(n >= 1 && n <= bytes.len().min(MAX_VARINT_LEN));
            }
            if let Ok((_, n)) = get_varlong(&bytes) {
                prop_assert!(n >= 1 && n <= bytes.len().min(MAX_VARLONG_LEN));
            }
        }
    }
}
