//! Accepting connections until the shard shuts down, shared by the Kafka listener and the
//! metrics endpoint.

use std::time::Duration;

use crate::runtime::{self, TcpListener, TcpStream};
use crate::util::shutdown::ShutdownSignal;

/// The next connection, or None once `shutdown` is triggered. Accept errors (out of file
/// descriptors and the like) are logged and retried after a short back-off.
pub async fn accept_until_shutdown(
    listener: &TcpListener,
    shutdown: &ShutdownSignal,
    what: &str,
) -> Option<TcpStream> {
    loop {
        let accepted = futures_lite::future::or(async { Some(listener.accept().await) }, async {
            shutdown.wait().await;
            None
        })
        .await;
        match accepted {
            None => return None,
            Some(Ok(s)) => return Some(s),
            Some(Err(e)) => {
                tracing::warn!(error = %e, listener = what, "accept failed");
                runtime::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
