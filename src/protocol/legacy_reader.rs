//! The reader legacy message sets and their xerial snappy framing are parsed with.

use super::legacy_error::LegacyError;

/// Bounds-checked big-endian reader. Short reads are [`LegacyError::Truncated`] at the position
/// of the field being read.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], LegacyError> {
        if n > self.remaining() {
            return Err(LegacyError::Truncated { at: self.pos });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Result<[u8; N], LegacyError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub(super) fn i8(&mut self) -> Result<i8, LegacyError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    pub(super) fn i32(&mut self) -> Result<i32, LegacyError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub(super) fn i64(&mut self) -> Result<i64, LegacyError> {
        Ok(i64::from_be_bytes(self.array()?))
    }
}
