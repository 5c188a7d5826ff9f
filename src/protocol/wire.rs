//! Bounds-checked reading and writing of the non-flexible (pre-KIP-482) Kafka wire types, for
//! the old request and response versions the `kafka-protocol` crate no longer knows (it
//! follows Kafka 4.0, which removed them in KIP-896).
//!
//! Every length is checked against the bytes left before anything is allocated, so an
//! untrusted count cannot make us allocate more than the request itself holds.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Why an old-version body could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum WireError {
    #[error("body truncated while reading {0}")]
    Truncated(&'static str),
    #[error("negative {what}: {value}")]
    Negative { what: &'static str, value: i32 },
    #[error("{what} count {count} does not fit in the {remaining} remaining bytes")]
    BadCount {
        what: &'static str,
        count: i32,
        remaining: usize,
    },
    #[error("{0} is not valid UTF-8")]
    BadUtf8(&'static str),
    #[error("{0} bytes after the end of the body")]
    TrailingBytes(usize),
    #[error("version {0} is not handled by this decoder")]
    Version(i16),
    #[error("{0}")]
    Crate(String),
}

/// Reads a request body from its start; `finish` checks that nothing is left.
pub struct WireReader {
    body: Bytes,
}

impl WireReader {
    pub fn new(body: Bytes) -> Self {
        WireReader { body }
    }

    fn need(&self, n: usize, what: &'static str) -> Result<(), WireError> {
        if self.body.remaining() < n {
            return Err(WireError::Truncated(what));
        }
        Ok(())
    }

    pub fn i8(&mut self, what: &'static str) -> Result<i8, WireError> {
        self.need(1, what)?;
        Ok(self.body.get_i8())
    }

    pub fn bool(&mut self, what: &'static str) -> Result<bool, WireError> {
        Ok(self.i8(what)? != 0)
    }

    pub fn i16(&mut self, what: &'static str) -> Result<i16, WireError> {
        self.need(2, what)?;
        Ok(self.body.get_i16())
    }

    pub fn i32(&mut self, what: &'static str) -> Result<i32, WireError> {
        self.need(4, what)?;
        Ok(self.body.get_i32())
    }

    pub fn i64(&mut self, what: &'static str) -> Result<i64, WireError> {
        self.need(8, what)?;
        Ok(self.body.get_i64())
    }

    /// A nullable string (i16 length, -1 = null).
    pub fn nullable_string(&mut self, what: &'static str) -> Result<Option<String>, WireError> {
        let len = self.i16(what)?;
        if len == -1 {
            return Ok(None);
        }
        let n = usize::try_from(len).map_err(|_| WireError::Negative {
            what,
            value: i32::from(len),
        })?;
        self.need(n, what)?;
        let raw = self.body.split_to(n);
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| WireError::BadUtf8(what))
    }

    /// A string; null is read as empty (old clients send null metadata, Kafka reads it so).
    pub fn string(&mut self, what: &'static str) -> Result<String, WireError> {
        Ok(self.nullable_string(what)?.unwrap_or_default())
    }

    /// An array count (i32), checked against the bytes left: each element takes at least
    /// `min_len` bytes. A null array (-1) is `None`.
    pub fn nullable_count(
        &mut self,
        what: &'static str,
        min_len: usize,
    ) -> Result<Option<usize>, WireError> {
        let count = self.i32(what)?;
        if count == -1 {
            return Ok(None);
        }
        let n = usize::try_from(count).map_err(|_| WireError::Negative { what, value: count })?;
        if n > self.body.remaining() / min_len.max(1) {
            return Err(WireError::BadCount {
                what,
                count,
                remaining: self.body.remaining(),
            });
        }
        Ok(Some(n))
    }

    /// An array count where null is read as empty.
    pub fn count(&mut self, what: &'static str, min_len: usize) -> Result<usize, WireError> {
        Ok(self.nullable_count(what, min_len)?.unwrap_or(0))
    }

    pub fn finish(self) -> Result<(), WireError> {
        match self.body.remaining() {
            0 => Ok(()),
            n => Err(WireError::TrailingBytes(n)),
        }
    }
}

/// Writes a string (i16 length). Names are bounded by Kafka's own limits, far below
/// `i16::MAX`; a longer one is cut so the encoding stays self-consistent.
pub fn put_string(out: &mut BytesMut, s: &str) {
    let n = s.len().min(i16::MAX as usize);
    out.put_i16(n as i16);
    out.put_slice(&s.as_bytes()[..n]);
}

/// Writes a nullable string (-1 for `None`).
pub fn put_nullable_string(out: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(out, s),
        None => out.put_i16(-1),
    }
}

/// Writes an array count.
pub fn put_count(out: &mut BytesMut, n: usize) {
    out.put_i32(i32::try_from(n).unwrap_or(i32::MAX));
}

/// Writes bytes with an i32 length.
pub fn put_bytes(out: &mut BytesMut, b: &[u8]) {
    put_count(out, b.len());
    out.put_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_counts_round_trip() {
        let mut out = BytesMut::new();
        put_string(&mut out, "topic");
        put_nullable_string(&mut out, None);
        put_count(&mut out, 2);
        out.put_i32(7);
        out.put_i32(8);
        let mut r = WireReader::new(out.freeze());
        assert_eq!(r.string("name").unwrap(), "topic");
        assert_eq!(r.nullable_string("meta").unwrap(), None);
        assert_eq!(r.count("items", 4).unwrap(), 2);
        assert_eq!(r.i32("a").unwrap(), 7);
        assert_eq!(r.i32("b").unwrap(), 8);
        r.finish().unwrap();
    }

    #[test]
    fn a_count_larger_than_the_body_is_refused_before_allocating() {
        let mut out = BytesMut::new();
        out.put_i32(1_000_000);
        out.put_i32(1);
        let mut r = WireReader::new(out.freeze());
        assert!(matches!(
            r.count("topics", 4),
            Err(WireError::BadCount { .. })
        ));
    }

    #[test]
    fn truncation_and_trailing_bytes_are_errors() {
        let mut r = WireReader::new(Bytes::from_static(&[0, 5, b'a']));
        assert_eq!(r.string("name"), Err(WireError::Truncated("name")));
        let r = WireReader::new(Bytes::from_static(&[1]));
        assert_eq!(r.finish(), Err(WireError::TrailingBytes(1)));
    }
}
