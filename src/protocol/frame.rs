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

/// A frame's size and, when the frame has one, the API key of the request it holds: what the
/// connection needs to decide whether to read the rest now (memory budgets), before the body
/// is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead {
    pub size: usize,
    /// The first two bytes of the body (a request's API key); `None` for a 1-byte frame.
    pub api_key: Option<i16>,
}

/// Reads one frame. `Ok(None)`: the peer closed the connection cleanly between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> Result<Option<Bytes>, FrameError> {
    match read_frame_head(reader, limit).await? {
        Some(head) => read_frame_body(reader, head).await.map(Some),
        None => Ok(None),
    }
}

/// Reads a frame's size prefix and its API key, checking the size against `limit`.
/// `Ok(None)`: the peer closed the connection cleanly between frames.
pub async fn read_frame_head<R: AsyncRead + Unpin>(
    reader: &mut R,
    limit: usize,
) -> Result<Option<FrameHead>, FrameError> {
    match read_frame_start(reader).await? {
        Some(start) => read_frame_head_rest(reader, start, limit).await.map(Some),
        None => Ok(None),
    }
}

/// The first bytes of a frame's size prefix: the moment a client starts a request, which
/// the connection times the rest of the request from.
#[derive(Debug, Clone, Copy)]
pub struct FrameStart {
    size_bytes: [u8; 4],
    filled: usize,
}

/// Waits for the first bytes of the next frame (one read, usually the whole size prefix).
/// `Ok(None)`: the peer closed the connection cleanly between frames.
pub async fn read_frame_start<R: AsyncRead + Unpin>(
    reader: &mut R,
) -> Result<Option<FrameStart>, FrameError> {
    let mut size_bytes = [0u8; 4];
    let filled = reader.read(&mut size_bytes).await?;
    if filled == 0 {
        return Ok(None);
    }
    Ok(Some(FrameStart { size_bytes, filled }))
}

/// Reads the rest of the head of a frame whose first bytes arrived: the size prefix
/// (checked against `limit`) and the API key.
pub async fn read_frame_head_rest<R: AsyncRead + Unpin>(
    reader: &mut R,
    start: FrameStart,
    limit: usize,
) -> Result<FrameHead, FrameError> {
    let FrameStart {
        mut size_bytes,
        mut filled,
    } = start;
    while filled < 4 {
        let n = reader.read(&mut size_bytes[filled..]).await?;
        if n == 0 {
            return Err(FrameError::Truncated);
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
    let api_key = if size >= 2 {
        let mut key = [0u8; 2];
        reader.read_exact(&mut key).await.map_err(truncated)?;
        Some(i16::from_be_bytes(key))
    } else {
        None
    };
    Ok(FrameHead { size, api_key })
}

/// Reads the rest of the frame whose head was read; returns the whole body (API key included).
pub async fn read_frame_body<R: AsyncRead + Unpin>(
    reader: &mut R,
    head: FrameHead,
) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::zeroed(head.size);
    let start = match head.api_key {
        Some(key) => {
            buf[..2].copy_from_slice(&key.to_be_bytes());
            2
        }
        None => 0,
    };
    reader
        .read_exact(&mut buf[start..])
        .await
        .map_err(truncated)?;
    Ok(buf.freeze())
}

fn truncated(e: std::io::Error) -> FrameError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        FrameError::Truncated
    } else {
        FrameError::Io(e)
    }
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
        assert_eq!(
            read(&[0, 0, 0, 1, 9], 10).unwrap().unwrap(),
            Bytes::from_static(&[9]),
            "a 1-byte frame has no API key but is still read whole"
        );
        assert!(matches!(
            read(&[0, 0, 0, 4, 0], 10),
            Err(FrameError::Truncated)
        ));
    }

    #[test]
    fn the_head_is_read_before_the_body_is_allocated() {
        futures_lite::future::block_on(async {
            let mut r = futures_lite::io::Cursor::new(vec![0, 0, 0, 4, 0, 3, 0xaa, 0xbb]);
            let head = read_frame_head(&mut r, 10).await.unwrap().unwrap();
            assert_eq!(
                head,
                FrameHead {
                    size: 4,
                    api_key: Some(3)
                }
            );
            assert_eq!(r.position(), 6, "only the size and the API key were read");
            let body = read_frame_body(&mut r, head).await.unwrap();
            assert_eq!(body, Bytes::from_static(&[0, 3, 0xaa, 0xbb]));
        });
    }
}
