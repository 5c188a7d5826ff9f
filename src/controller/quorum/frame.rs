//! The framing of the metadata log's files: `[length u32 LE][crc32c u32 LE][payload]`, the CRC
//! over the payload. A frame is written whole and fsynced before it is acknowledged; after a
//! crash the file may end in a torn frame (short, or its CRC does not match), which recovery
//! cuts off. Pure functions: no I/O.

/// Bytes before the payload.
pub const FRAME_HEADER: usize = 8;

/// The largest payload accepted when reading: a length beyond it is garbage, not a reason to
/// allocate. Metadata batches are small; 64 MiB leaves room for a large snapshot.
pub const MAX_FRAME_PAYLOAD: usize = 64 * 1024 * 1024;

/// Appends one frame holding `payload` to `out`.
pub fn push_frame(out: &mut Vec<u8>, payload: &[u8]) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Why reading frames stopped before the end of the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailProblem {
    /// The bytes end inside a frame (a write that did not complete).
    Torn,
    /// A frame's CRC does not match its payload.
    BadCrc,
    /// A frame claims more than [`MAX_FRAME_PAYLOAD`].
    TooLong,
}

/// The frames of a file: each payload with its start position, the end of the last good
/// frame, and what (if anything) followed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frames<'a> {
    pub frames: Vec<(u64, &'a [u8])>,
    pub valid_len: u64,
    pub tail: Option<TailProblem>,
}

/// Splits `bytes` into frames, stopping at the first one that is torn or corrupt.
pub fn read_frames(bytes: &[u8]) -> Frames<'_> {
    let mut frames = Vec::new();
    let mut pos = 0usize;
    let tail = loop {
        let rest = &bytes[pos..];
        if rest.is_empty() {
            break None;
        }
        if rest.len() < FRAME_HEADER {
            break Some(TailProblem::Torn);
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if len > MAX_FRAME_PAYLOAD {
            break Some(TailProblem::TooLong);
        }
        let Some(payload) = rest.get(FRAME_HEADER..FRAME_HEADER + len) else {
            break Some(TailProblem::Torn);
        };
        if crc32c::crc32c(payload) != crc {
            break Some(TailProblem::BadCrc);
        }
        frames.push((pos as u64, payload));
        pos += FRAME_HEADER + len;
    };
    Frames {
        frames,
        valid_len: pos as u64,
        tail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            push_frame(&mut out, p);
        }
        out
    }

    #[test]
    fn frames_round_trip_with_positions() {
        let bytes = file(&[b"one", b"", b"three"]);
        let read = read_frames(&bytes);
        assert_eq!(read.tail, None);
        assert_eq!(read.valid_len, bytes.len() as u64);
        let payloads: Vec<&[u8]> = read.frames.iter().map(|(_, p)| *p).collect();
        assert_eq!(payloads, vec![&b"one"[..], b"", b"three"]);
        assert_eq!(read.frames[1].0, (FRAME_HEADER + 3) as u64);
    }

    #[test]
    fn every_cut_of_the_last_frame_is_a_torn_tail() {
        let bytes = file(&[b"first", b"second"]);
        let first_end = (FRAME_HEADER + 5) as u64;
        for cut in first_end as usize + 1..bytes.len() {
            let read = read_frames(&bytes[..cut]);
            assert_eq!(read.frames.len(), 1, "cut at {cut}");
            assert_eq!(read.valid_len, first_end);
            assert_eq!(read.tail, Some(TailProblem::Torn));
        }
    }

    #[test]
    fn a_flipped_bit_or_a_huge_length_stops_the_read() {
        let mut bytes = file(&[b"first", b"second"]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let read = read_frames(&bytes);
        assert_eq!(
            (read.frames.len(), read.tail),
            (1, Some(TailProblem::BadCrc))
        );
        let mut huge = file(&[b"x"]);
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&[0; 4]);
        let read = read_frames(&huge);
        assert_eq!(
            (read.frames.len(), read.tail),
            (1, Some(TailProblem::TooLong))
        );
    }
}
