//! A follower's connection to a leader broker: Kafka requests over the shard's own io_uring
//! socket, one in flight at a time (a follower shard sends one long-poll Fetch per leader and
//! waits for it). Any failure drops the connection; the fetcher connects again.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::runtime::{self, TcpStream};

/// The largest response a follower accepts: `replica.fetch.response.max.bytes` is far below.
const MAX_RESPONSE_BYTES: usize = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ReplicaClientError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("talking to {addr}: {source}")]
    Io {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("no response from {addr} within {after:?}")]
    Timeout { addr: SocketAddr, after: Duration },
    #[error("{addr} sent a frame of {size} bytes")]
    Implausible { addr: SocketAddr, size: i64 },
    #[error("encoding or decoding a {key:?} message for {addr}: {reason}")]
    Codec {
        addr: SocketAddr,
        key: ApiKey,
        reason: String,
    },
    #[error("{addr} answered correlation id {got}, expected {expected}")]
    Correlation {
        addr: SocketAddr,
        expected: i32,
        got: i32,
    },
}

pub struct ReplicaClient {
    addr: SocketAddr,
    stream: TcpStream,
    client_id: StrBytes,
    next_correlation: i32,
}

impl ReplicaClient {
    /// Connects from a local port that steers the connection to leader shard `shard` of
    /// `shards` (the follower's own shard and count: slots place a partition on the same
    /// shard of every broker running the same count).
    pub async fn connect(
        addr: SocketAddr,
        client_id: &str,
        (shard, shards): (usize, usize),
        timeout: Duration,
    ) -> Result<ReplicaClient, ReplicaClientError> {
        let stream = runtime::port_steering::connect_steered(addr, shard, shards, timeout)
            .await
            .map_err(|source| ReplicaClientError::Connect { addr, source })?;
        Ok(ReplicaClient {
            addr,
            stream,
            client_id: StrBytes::from_string(client_id.to_string()),
            next_correlation: 1,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends `request` and waits at most `timeout` for its response.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, ReplicaClientError> {
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let frame = self.encode(key, version, correlation, request)?;
        let addr = self.addr;
        let exchange = async {
            self.write(&frame).await?;
            self.read_frame().await
        };
        let timed_out = async {
            runtime::sleep(timeout).await;
            Err(ReplicaClientError::Timeout {
                addr,
                after: timeout,
            })
        };
        let mut body = futures_lite::future::or(exchange, timed_out).await?;
        let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
            .map_err(|e| codec(addr, key, e))?;
        if header.correlation_id != correlation {
            return Err(ReplicaClientError::Correlation {
                addr,
                expected: correlation,
                got: header.correlation_id,
            });
        }
        Resp::decode(&mut body, version).map_err(|e| codec(addr, key, e))
    }

    fn encode<Req: Encodable>(
        &self,
        key: ApiKey,
        version: i16,
        correlation: i32,
        request: &Req,
    ) -> Result<Bytes, ReplicaClientError> {
        let addr = self.addr;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation;
        header.client_id = Some(self.client_id.clone());
        let mut body = BytesMut::new();
        header
            .encode(&mut body, key.request_header_version(version))
            .map_err(|e| codec(addr, key, e))?;
        request
            .encode(&mut body, version)
            .map_err(|e| codec(addr, key, e))?;
        let size = i32::try_from(body.len()).map_err(|_| ReplicaClientError::Implausible {
            addr: self.addr,
            size: body.len() as i64,
        })?;
        let mut frame = BytesMut::with_capacity(4 + body.len());
        frame.put_i32(size);
        frame.extend_from_slice(&body);
        Ok(frame.freeze())
    }

    async fn write(&mut self, frame: &[u8]) -> Result<(), ReplicaClientError> {
        let addr = self.addr;
        let io = |source| ReplicaClientError::Io { addr, source };
        self.stream.write_all(frame).await.map_err(io)?;
        self.stream.flush().await.map_err(io)
    }

    async fn read_frame(&mut self) -> Result<Bytes, ReplicaClientError> {
        let addr = self.addr;
        let io = |source| ReplicaClientError::Io { addr, source };
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).await.map_err(io)?;
        let size = i32::from_be_bytes(len);
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s >= 4 && *s <= MAX_RESPONSE_BYTES)
            .ok_or(ReplicaClientError::Implausible {
                addr,
                size: i64::from(size),
            })?;
        let mut body = vec![0u8; size];
        self.stream.read_exact(&mut body).await.map_err(io)?;
        Ok(Bytes::from(body))
    }
}

fn codec(addr: SocketAddr, key: ApiKey, e: impl std::fmt::Display) -> ReplicaClientError {
    ReplicaClientError::Codec {
        addr,
        key,
        reason: e.to_string(),
    }
}
