//! Kafka framing: every request and response is a 4-byte big-endian size, then that many
//! bytes. The size is checked against `socket.request.max.bytes` before anything is allocated.

use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncReadExt};

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("request of {size} bytes exceeds socket.request.max.bytes ({limit})")]
    TooLarge { size: usize, limit: usize },
    #[error("negative or empty request size {0}")]
    BadSize(i32),
    #[error("connection closed in the middle of a request")]
    Truncated,
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one frame. `Ok(None)`: the peer closed the connection cleanly between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> Result<Option<Bytes>, FrameError> {
    let mut size_bytes = [0u8; 4];
    let mut filled = 0;
    while filled < 4 {
        let n = reader.read(&mut size_bytes[filled..]).await?;
        if n == 0 {
            return if filled == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        filled += n;
    }
    let size = i32::from_be_bytes(size_bytes);
    if size <= 0 {
        return Err(FrameError::BadSize(size));
    }
    let size = size as usize;
    if size > limit {
        return Err(FrameError::TooLarge { size, limit });
    }
    let mut buf = BytesMut::zeroed(size);
    reader.read_exact(&mut buf).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Truncated
        } else {
            FrameError::Io(e)
        }
    })?;
    Ok(Some(buf.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8], limit: usize) -> Result<Option<Bytes>, FrameError> {
        futures_lite::future::block_on(read_frame(
            &mut futures_lite::io::Cursor::new(bytes.to_vec()),
            limit,
        ))
    }

    #[test]
    fn frames_and_limits() {
        assert_eq!(
            read(&[0, 0, 0, 2, 7, 8], 10).unwrap().unwrap(),
            Bytes::from_static(&[7, 8])
        );
        assert!(read(&[], 10).unwrap().is_none());
        assert!(matches!(read(&[0, 0], 10), Err(FrameError::Truncated)));
        assert!(matches!(
            read(&[0, 0, 0, 5, 1], 10),
            Err(FrameError::Truncated)
        ));
        // A 2 GiB length prefix is refused before allocating.
        assert!(matches!(
            read(&[0x7f, 0xff, 0xff, 0xff], 100 << 20),
            Err(FrameError::TooLarge { .. })
        ));
        assert!(matches!(
            read(&[0xff, 0xff, 0xff, 0xff], 10),
            Err(FrameError::BadSize(-1))
        ));
    }
}
