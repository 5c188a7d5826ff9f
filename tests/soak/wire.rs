//! A blocking Kafka connection whose every failure is an `io::Error` rather than a panic: the
//! crash soak expects the broker to vanish mid-request and must retry, not abort.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Bound on a connect and on each read or write; a SIGKILLed broker resets its sockets at
/// once, so this only matters if the broker hangs.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response accepted.
const MAX_RESPONSE: i32 = 64 << 20;

pub struct Connection {
    stream: TcpStream,
    next_correlation: i32,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

impl Connection {
    pub fn open(addr: SocketAddr) -> io::Result<Connection> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            next_correlation: 1,
        })
    }

    /// Sends one request without waiting for its response; returns its correlation id.
    pub fn send<Req: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> io::Result<i32> {
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation;
        header.client_id = Some(StrBytes::from_static_str("crash-soak"));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, key.request_header_version(version))
            .map_err(|e| invalid(format!("encode header: {e}")))?;
        request
            .encode(&mut body, version)
            .map_err(|e| invalid(format!("encode {key:?} v{version}: {e}")))?;
        let mut frame = Vec::with_capacity(body.len() + 4);
        frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame)?;
        Ok(correlation)
    }

    /// Reads the next response, which must answer `correlation`.
    pub fn receive<Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        correlation: i32,
    ) -> io::Result<Resp> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let size = i32::from_be_bytes(size);
        if !(0..MAX_RESPONSE).contains(&size) {
            return Err(invalid(format!("implausible response size {size}")));
        }
        let mut buf = vec![0u8; size as usize];
        self.stream.read_exact(&mut buf)?;
        let mut buf = Bytes::from(buf);
        let header = ResponseHeader::decode(&mut buf, key.response_header_version(version))
            .map_err(|e| invalid(format!("decode response header: {e}")))?;
        if header.correlation_id != correlation {
            return Err(invalid(format!(
                "{key:?}: correlation {} where {correlation} was expected",
                header.correlation_id
            )));
        }
        Resp::decode(&mut buf, version)
            .map_err(|e| invalid(format!("decode {key:?} v{version} response: {e}")))
    }

    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> io::Result<Resp> {
        let correlation = self.send(key, version, request)?;
        self.receive(key, version, correlation)
    }
}
