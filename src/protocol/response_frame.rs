//! A framed response: the length prefix and response header, then the body, kept as the
//! parts it was encoded in (record batches shared with storage, see [`super::sharing_buf`]),
//! to be written with one vectored write.

use bytes::{BufMut, Bytes, BytesMut};

/// Bodies shorter than this are copied behind the header: one part, one iovec.
const SEPARATE_BODY_BYTES: usize = 4096;

#[derive(Debug, Clone)]
pub struct ResponseFrame {
    parts: Vec<Bytes>,
    len: usize,
}

impl ResponseFrame {
    /// Frames `body` (its parts in order): size, correlation id, and the empty tagged fields
    /// of header v1.
    pub fn new(correlation_id: i32, header_version: i16, body: Vec<Bytes>) -> ResponseFrame {
        let header_len = if header_version >= 1 { 5 } else { 4 };
        let body_len: usize = body.iter().map(Bytes::len).sum();
        let copy_body = body_len < SEPARATE_BODY_BYTES;
        let mut head =
            BytesMut::with_capacity(4 + header_len + if copy_body { body_len } else { 0 });
        head.put_i32((header_len + body_len) as i32);
        head.put_i32(correlation_id);
        if header_version >= 1 {
            head.put_u8(0);
        }
        let mut parts = Vec::with_capacity(1 + if copy_body { 0 } else { body.len() });
        if copy_body {
            for p in &body {
                head.put_slice(p);
            }
            parts.push(head.freeze());
        } else {
            parts.push(head.freeze());
            parts.extend(body.into_iter().filter(|p| !p.is_empty()));
        }
        ResponseFrame {
            parts,
            len: 4 + header_len + body_len,
        }
    }

    /// Frames a body encoded in one piece.
    pub fn single(correlation_id: i32, header_version: i16, body: Bytes) -> ResponseFrame {
        ResponseFrame::new(correlation_id, header_version, vec![body])
    }

    /// Bytes on the wire, length prefix included.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// The frame in one buffer (what the parts add up to, for tests).
    #[cfg(test)]
    pub fn to_bytes(&self) -> Bytes {
        if self.parts.len() == 1 {
            return self.parts[0].clone();
        }
        let mut all = BytesMut::with_capacity(self.len);
        for p in &self.parts {
            all.put_slice(p);
        }
        all.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bodies_are_framed_in_one_part() {
        let r = ResponseFrame::single(9, 0, Bytes::from_static(b"abc"));
        assert_eq!(r.parts().len(), 1);
        assert_eq!(
            &r.to_bytes()[..],
            &[0, 0, 0, 7, 0, 0, 0, 9, b'a', b'b', b'c']
        );
        assert_eq!(r.len(), 11);
        let r = ResponseFrame::single(9, 1, Bytes::new());
        assert_eq!(&r.to_bytes()[..], &[0, 0, 0, 5, 0, 0, 0, 9, 0]);
    }

    #[test]
    fn large_bodies_keep_their_parts() {
        let big = Bytes::from(vec![7u8; 10_000]);
        let r = ResponseFrame::new(
            1,
            1,
            vec![Bytes::from_static(b"xy"), big.clone(), Bytes::new()],
        );
        assert_eq!(r.parts().len(), 3);
        assert_eq!(r.parts()[2].as_ptr(), big.as_ptr());
        let all = r.to_bytes();
        assert_eq!(all.len(), r.len());
        assert_eq!(&all[..4], &(5i32 + 10_002).to_be_bytes());
        assert_eq!(&all[9..11], b"xy");
    }
}
