//! An encoding buffer that shares record batches instead of copying them. kafka-protocol
//! encodes a Fetch response's `records` with `put_slice`; when that slice lies inside one of
//! the [`Bytes`] the caller registered (the batches read from storage), the buffer keeps a
//! reference-counted slice of it as a part of its own and copies only the small fields
//! around it. The parts go out in one vectored write, so record data is copied once, by the
//! kernel, from the storage buffer to the socket.

use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

/// Slices shorter than this are copied: an iovec of its own costs more than the copy.
pub const SHARE_MIN_BYTES: usize = 1024;

/// Capacity reserved each time the copied part runs out (fields are small).
const OWNED_CHUNK: usize = 512;

#[derive(Debug, Default)]
pub struct SharingBuf {
    /// What may be shared rather than copied.
    shareable: Vec<Bytes>,
    /// Where the last match was: batches are encoded in the order they were registered.
    next: usize,
    /// Finished parts, in order.
    parts: Vec<Bytes>,
    /// Bytes in `parts`.
    parts_len: usize,
    /// The part being written (copied bytes).
    owned: BytesMut,
}

impl SharingBuf {
    /// A buffer that shares any slice of `shareable` of at least [`SHARE_MIN_BYTES`].
    pub fn new(shareable: Vec<Bytes>) -> SharingBuf {
        SharingBuf {
            shareable,
            ..SharingBuf::default()
        }
    }

    /// The encoded bytes, as parts to write one after the other.
    pub fn into_parts(mut self) -> Vec<Bytes> {
        self.close_owned();
        self.parts
    }

    pub fn len(&self) -> usize {
        self.parts_len + self.owned.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn close_owned(&mut self) {
        if !self.owned.is_empty() {
            let part = self.owned.split().freeze();
            self.parts_len += part.len();
            self.parts.push(part);
        }
    }

    /// The registered buffer `src` lies in, as a shared slice.
    fn shared_slice(&mut self, src: &[u8]) -> Option<Bytes> {
        if src.len() < SHARE_MIN_BYTES {
            return None;
        }
        let start = src.as_ptr() as usize;
        let end = start + src.len();
        let n = self.shareable.len();
        let found = (0..n).map(|i| (self.next + i) % n).find(|&i| {
            let b = &self.shareable[i];
            let b_start = b.as_ptr() as usize;
            b_start <= start && end <= b_start + b.len()
        })?;
        self.next = found + 1;
        Some(self.shareable[found].slice_ref(src))
    }

    /// Copies every part into the owned one: for the (unused by the messages we encode)
    /// random-access calls of [`ByteBufMut`] that reach back into a shared part.
    fn flatten(&mut self) {
        if self.parts.is_empty() {
            return;
        }
        let mut all = BytesMut::with_capacity(self.len());
        for p in self.parts.drain(..) {
            all.extend_from_slice(&p);
        }
        all.extend_from_slice(&self.owned);
        self.owned = all;
        self.parts_len = 0;
    }
}

// SAFETY: `chunk_mut` and `advance_mut` are those of the owned `BytesMut`, which upholds the
// trait's contract; `put_slice` either appends a finished part or copies through `BytesMut`.
unsafe impl BufMut for SharingBuf {
    fn remaining_mut(&self) -> usize {
        usize::MAX - self.len()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of the chunk `chunk_mut` returned,
        // which is the owned buffer's.
        unsafe { self.owned.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        if self.owned.capacity() == self.owned.len() {
            self.owned.reserve(OWNED_CHUNK);
        }
        self.owned.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.shared_slice(src) {
            Some(shared) => {
                self.close_owned();
                self.parts_len += shared.len();
                self.parts.push(shared);
            }
            None => self.owned.extend_from_slice(src),
        }
    }
}

impl ByteBufMut for SharingBuf {
    fn offset(&self) -> usize {
        self.len()
    }

    fn seek(&mut self, offset: usize) {
        if offset < self.parts_len {
            self.flatten();
        }
        self.owned.resize(offset - self.parts_len, 0);
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        if r.start < self.parts_len {
            self.flatten();
        }
        let base = self.parts_len;
        &mut self.owned[r.start - base..r.end - base]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        FetchResponse, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::protocol::Encodable;

    fn concat(parts: &[Bytes]) -> Vec<u8> {
        parts.iter().flat_map(|p| p.iter().copied()).collect()
    }

    fn response(records: &[Bytes]) -> FetchResponse {
        let mut topic = FetchableTopicResponse::default();
        for (i, r) in records.iter().enumerate() {
            let mut p = PartitionData::default();
            p.partition_index = i as i32;
            p.high_watermark = 7;
            p.records = Some(r.clone());
            topic.partitions.push(p);
        }
        let mut response = FetchResponse::default();
        response.responses.push(topic);
        response
    }

    #[test]
    fn fetch_response_encodes_the_same_bytes_with_records_shared() {
        let records = vec![
            Bytes::from(vec![1u8; 5000]),
            Bytes::from(vec![2u8; 10]),
            Bytes::from(vec![3u8; 70_000]),
        ];
        let response = response(&records);
        for version in [4i16, 11, 12, 16] {
            let mut plain = BytesMut::new();
            response.encode(&mut plain, version).unwrap();
            let mut sharing = SharingBuf::new(records.clone());
            response.encode(&mut sharing, version).unwrap();
            assert_eq!(sharing.len(), plain.len(), "v{version}");
            let parts = sharing.into_parts();
            assert_eq!(concat(&parts), plain.to_vec(), "v{version}");
            // The two large batches are the storage buffers themselves, not copies.
            for big in [&records[0], &records[2]] {
                assert!(
                    parts.iter().any(|p| p.as_ptr() == big.as_ptr()),
                    "v{version}: not shared"
                );
            }
            assert!(!parts.iter().any(|p| p.as_ptr() == records[1].as_ptr()));
        }
    }

    #[test]
    fn unregistered_slices_are_copied() {
        let foreign = Bytes::from(vec![9u8; 4096]);
        let mut buf = SharingBuf::new(vec![Bytes::from(vec![0u8; 4096])]);
        buf.put_u8(1);
        buf.put_slice(&foreign);
        let parts = buf.into_parts();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].len(), 4097);
    }

    #[test]
    fn seek_and_range_reach_into_shared_parts() {
        let shared = Bytes::from(vec![5u8; 2048]);
        let mut buf = SharingBuf::new(vec![shared.clone()]);
        buf.put_u16(0xabcd);
        buf.put_slice(&shared);
        buf.put_u8(1);
        let gap_at = buf.offset();
        buf.seek(gap_at + 4);
        buf.range(gap_at..gap_at + 4).copy_from_slice(&[1, 2, 3, 4]);
        buf.range(0..2).copy_from_slice(&[7, 7]);
        let bytes = concat(&buf.into_parts());
        assert_eq!(bytes.len(), 2 + 2048 + 1 + 4);
        assert_eq!(&bytes[..2], &[7, 7]);
        assert_eq!(&bytes[2050..], &[1, 1, 2, 3, 4]);
        let mut back = SharingBuf::new(Vec::new());
        back.put_slice(&[1, 2, 3]);
        back.seek(1);
        assert_eq!(concat(&back.into_parts()), vec![1]);
    }
}
