//! Writes a [`ResponseFrame`] with vectored writes: the header and fields, and the record
//! batches shared with storage, in as few `sendmsg` calls as the socket allows.

use std::io::{self, IoSlice};

use futures_lite::{AsyncWrite, AsyncWriteExt};

use crate::protocol::response_frame::ResponseFrame;

/// Parts handed to one write (the kernel's limit is 1024; a Fetch has ~2 per partition).
const MAX_SLICES: usize = 64;

pub async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    frame: &ResponseFrame,
) -> io::Result<()> {
    let parts = frame.parts();
    // The first part not fully written, and how much of it was.
    let (mut part, mut offset) = (0usize, 0usize);
    while part < parts.len() {
        let slices: Vec<IoSlice<'_>> = std::iter::once(&parts[part][offset..])
            .chain(parts[part + 1..].iter().map(|p| &p[..]))
            .take(MAX_SLICES)
            .map(IoSlice::new)
            .collect();
        let mut written = writer.write_vectored(&slices).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while written > 0 && part < parts.len() {
            let left = parts[part].len() - offset;
            if written >= left {
                written -= left;
                part += 1;
                offset = 0;
            } else {
                offset += written;
                written = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// Accepts at most `chunk` bytes per write, vectored or not.
    struct Trickle {
        out: Vec<u8>,
        chunk: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.chunk);
            self.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.chunk - n);
                self.out.extend_from_slice(&b[..take]);
                n += take;
                if n == self.chunk {
                    break;
                }
            }
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn partial_writes_resume_inside_and_across_parts() {
        let body: Vec<Bytes> = (0..100u8)
            .map(|i| Bytes::from(vec![i; 100 + usize::from(i) * 37]))
            .collect();
        let frame = ResponseFrame::new(3, 1, body);
        for chunk in [1, 7, 4096, 1 << 20] {
            let mut w = Trickle {
                out: Vec::new(),
                chunk,
            };
            futures_lite::future::block_on(write_frame(&mut w, &frame)).unwrap();
            assert_eq!(w.out, frame.to_bytes().to_vec(), "chunk {chunk}");
        }
    }
}
