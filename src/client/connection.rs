//! One TCP connection to one broker: requests are written by the caller's thread, responses are
//! read by a reader thread and matched to their request by correlation id. Up to
//! `max_in_flight` requests may wait for a response at once (pipelining); a caller that wants
//! to send more waits (bounded by the request timeout).
//!
//! A request that gets no response within the request timeout fails, and so does the
//! connection (as Kafka clients do: after a lost response the stream cannot be trusted).

use crate::util::hash::HashMap;
use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::error::{ClientError, ClientResult};

/// Largest response frame accepted (a fetch answer is bounded by the fetch's max bytes).
const MAX_RESPONSE_BYTES: usize = 256 << 20;
/// How often the reader thread wakes up to expire requests when nothing arrives.
const READER_TICK: Duration = Duration::from_millis(100);

/// What to do with a response frame (header + body, size prefix removed).
pub type ResponseHandler = Box<dyn FnOnce(ClientResult<Bytes>) + Send>;

struct Pending {
    deadline: Instant,
    handler: ResponseHandler,
}

#[derive(Default)]
struct State {
    pending: HashMap<i32, Pending>,
    /// Why the connection is unusable, once it is.
    closed: Option<String>,
}

struct Shared {
    addr: String,
    state: Mutex<State>,
    /// Signalled when a response arrives or the connection closes.
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A handler that panicked must not wedge every later request.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the connection closed and fails every pending request.
    fn close(&self, reason: String) {
        let pending: Vec<Pending> = {
            let mut state = self.lock();
            if state.closed.is_none() {
                state.closed = Some(reason.clone());
            }
            state.pending.drain().map(|(_, p)| p).collect()
        };
        self.changed.notify_all();
        for p in pending {
            (p.handler)(Err(ClientError::Disconnected {
                addr: self.addr.clone(),
                reason: Some(reason.clone()),
            }));
        }
    }
}

/// A connection to one broker. Cheap to share (`Arc<Connection>`); dropping the last handle
/// closes the socket and ends the reader thread.
pub struct Connection {
    shared: Arc<Shared>,
    writer: Mutex<TcpStream>,
    next_correlation: AtomicI32,
    client_id: StrBytes,
    request_timeout: Duration,
    max_in_flight: usize,
    reader: Option<JoinHandle<()>>,
}

impl Connection {
    /// Connects to `addr` (host:port), bounded by `request_timeout`.
    pub fn connect(
        addr: &str,
        client_id: &str,
        request_timeout: Duration,
        max_in_flight: usize,
    ) -> ClientResult<Connection> {
        let resolved = addr
            .to_socket_addrs()
            .map_err(|e| ClientError::io(format!("resolve {addr}"), e))?
            .next()
            .ok_or_else(|| {
                ClientError::io(
                    format!("resolve {addr}"),
                    std::io::Error::new(ErrorKind::NotFound, "no address"),
                )
            })?;
        let stream = TcpStream::connect_timeout(&resolved, request_timeout)
            .map_err(|e| ClientError::io(format!("connect to {addr}"), e))?;
        let setup = |e| ClientError::io(format!("set up the socket to {addr}"), e);
        stream.set_nodelay(true).map_err(setup)?;
        stream
            .set_write_timeout(Some(request_timeout))
            .map_err(setup)?;
        let read_half = stream.try_clone().map_err(setup)?;
        read_half
            .set_read_timeout(Some(READER_TICK))
            .map_err(setup)?;
        let shared = Arc::new(Shared {
            addr: addr.to_string(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let reader_shared = shared.clone();
        let reader = std::thread::Builder::new()
            .name(format!("kafka-reader-{addr}"))
            .spawn(move || read_loop(read_half, reader_shared))
            .map_err(|e| ClientError::io("spawn the reader thread", e))?;
        Ok(Connection {
            shared,
            writer: Mutex::new(stream),
            next_correlation: AtomicI32::new(1),
            client_id: StrBytes::from_string(client_id.to_string()),
            request_timeout,
            max_in_flight: max_in_flight.max(1),
            reader: Some(reader),
        })
    }

    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed.is_some()
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().pending.len()
    }

    /// Sends a request and waits (bounded) for its decoded response.
    pub fn call<Req: Encodable, Resp: Decodable>(
        &self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> ClientResult<Resp> {
        let (tx, rx) = mpsc::channel();
        self.send(
            key,
            version,
            request,
            Some(Box::new(move |frame| {
                let _ = tx.send(frame);
            })),
        )?;
        // The reader thread expires the request at its deadline; the margin covers its tick.
        let wait = self.request_timeout + READER_TICK * 5;
        let frame = rx.recv_timeout(wait).map_err(|_| ClientError::Timeout {
            what: format!("{key:?} v{version} response from {}", self.addr()),
            after: wait,
        })??;
        decode_response(frame, key, version)
    }

    /// Sends a request; `handler` gets the response frame (on the reader thread, so it must not
    /// block on this connection). `None`: no response is expected (Produce with acks=0).
    ///
    /// Waits while `max_in_flight` requests are outstanding (at most the request timeout).
    /// The handler is called exactly once, also when this returns an error (with a copy of it).
    pub fn send<Req: Encodable>(
        &self,
        key: ApiKey,
        version: i16,
        request: &Req,
        handler: Option<ResponseHandler>,
    ) -> ClientResult<()> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let frame = match self.encode(key, version, correlation, request) {
            Ok(frame) => frame,
            Err(e) => return Err(fail_handler(handler, e)),
        };
        self.transmit(key, correlation, &[frame.freeze()], handler)
    }

    /// Like [`Connection::send`], for a body already encoded as segments (written with one
    /// vectored write, so large parts such as record batches are not copied).
    pub fn send_segments(
        &self,
        key: ApiKey,
        version: i16,
        body: Vec<Bytes>,
        handler: Option<ResponseHandler>,
    ) -> ClientResult<()> {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let body_len: usize = body.iter().map(Bytes::len).sum();
        let head = match self.encode_header(key, version, correlation, body_len) {
            Ok(head) => head,
            Err(e) => return Err(fail_handler(handler, e)),
        };
        let mut frame = Vec::with_capacity(body.len() + 1);
        frame.push(head.freeze());
        frame.extend(body);
        self.transmit(key, correlation, &frame, handler)
    }

    /// Registers the handler (waiting for a free in-flight slot), then writes the frame.
    fn transmit(
        &self,
        key: ApiKey,
        correlation: i32,
        frame: &[Bytes],
        handler: Option<ResponseHandler>,
    ) -> ClientResult<()> {
        // Register before writing: the response may arrive before the write returns.
        {
            let deadline = Instant::now() + self.request_timeout;
            let mut state = self.shared.lock();
            loop {
                if let Some(reason) = &state.closed {
                    let e = ClientError::Disconnected {
                        addr: self.shared.addr.clone(),
                        reason: Some(reason.clone()),
                    };
                    drop(state);
                    return Err(fail_handler(handler, e));
                }
                if state.pending.len() < self.max_in_flight {
                    break;
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let e = ClientError::Timeout {
                        what: format!("a free in-flight slot on {}", self.shared.addr),
                        after: self.request_timeout,
                    };
                    drop(state);
                    return Err(fail_handler(handler, e));
                }
                state = self
                    .shared
                    .changed
                    .wait_timeout(state, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            if let Some(handler) = handler {
                state.pending.insert(
                    correlation,
                    Pending {
                        deadline: Instant::now() + self.request_timeout,
                        handler,
                    },
                );
            }
        }
        let written = {
            let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            write_all_vectored(&mut writer, frame)
        };
        if let Err(e) = written {
            // The handler (if registered) is failed by close().
            self.shared.close(format!("write failed: {e}"));
            let _ = self.writer.lock().map(|w| w.shutdown(Shutdown::Both)).ok();
            return Err(ClientError::io(
                format!("send {key:?} to {}", self.addr()),
                e,
            ));
        }
        Ok(())
    }

    /// The whole frame (size prefix, header, body) in one buffer sized up front.
    fn encode<Req: Encodable>(
        &self,
        key: ApiKey,
        version: i16,
        correlation: i32,
        request: &Req,
    ) -> ClientResult<BytesMut> {
        let body_len = request
            .compute_size(version)
            .map_err(|e| ClientError::codec(format!("{key:?} v{version} request"), e))?;
        let mut frame = self.encode_header(key, version, correlation, body_len)?;
        let header_len = frame.len();
        request
            .encode(&mut frame, version)
            .map_err(|e| ClientError::codec(format!("{key:?} v{version} request"), e))?;
        if frame.len() != header_len + body_len {
            return Err(ClientError::codec(
                format!("{key:?} v{version} request"),
                "encoded size differs from the computed size",
            ));
        }
        Ok(frame)
    }

    /// Size prefix and request header for a body of `body_len` bytes, in a buffer with room
    /// for that body.
    fn encode_header(
        &self,
        key: ApiKey,
        version: i16,
        correlation: i32,
        body_len: usize,
    ) -> ClientResult<BytesMut> {
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation;
        header.client_id = Some(self.client_id.clone());
        let header_version = key.request_header_version(version);
        let header_err = |e| ClientError::codec(format!("{key:?} request header"), e);
        let header_len = header.compute_size(header_version).map_err(header_err)?;
        let size = i32::try_from(header_len + body_len)
            .map_err(|_| ClientError::codec(format!("{key:?} request"), "larger than 2 GiB"))?;
        let mut frame = BytesMut::with_capacity(4 + header_len + body_len);
        frame.put_i32(size);
        header
            .encode(&mut frame, header_version)
            .map_err(header_err)?;
        Ok(frame)
    }
}

/// Writes every part, in order, with as few (vectored) writes as the socket allows.
fn write_all_vectored(w: &mut TcpStream, parts: &[Bytes]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| IoSlice::new(p))
        .collect();
    let mut left = &mut slices[..];
    while !left.is_empty() {
        match w.write_vectored(left) {
            Ok(0) => return Err(std::io::Error::from(ErrorKind::WriteZero)),
            Ok(n) => IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Ok(w) = self.writer.lock() {
            let _ = w.shutdown(Shutdown::Both);
        }
        self.shared.close("connection dropped".to_string());
        if let Some(reader) = self.reader.take() {
            // The last handle may be dropped by a response handler on the reader thread
            // itself; that thread ends on its own once the socket is shut down.
            if reader.thread().id() != std::thread::current().id() {
                let _ = reader.join();
            }
        }
    }
}

/// Gives the handler (if any) a copy of `e` and returns `e`.
fn fail_handler(handler: Option<ResponseHandler>, e: ClientError) -> ClientError {
    if let Some(handler) = handler {
        handler(Err(e.duplicate()));
    }
    e
}

/// Decodes a response frame (header + body) of `key` at `version`.
pub fn decode_response<Resp: Decodable>(
    mut frame: Bytes,
    key: ApiKey,
    version: i16,
) -> ClientResult<Resp> {
    ResponseHeader::decode(&mut frame, key.response_header_version(version))
        .map_err(|e| ClientError::codec(format!("{key:?} response header"), e))?;
    Resp::decode(&mut frame, version)
        .map_err(|e| ClientError::codec(format!("{key:?} v{version} response"), e))
}

/// Frames at least this large are read straight into a buffer of their own size (no copy out
/// of the read buffer): fetch responses.
const LARGE_FRAME: usize = 256 << 10;

/// Reads frames until the socket fails or closes; hands each to its request's handler and
/// expires requests past their deadline.
fn read_loop(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = BytesMut::with_capacity(64 << 10);
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        // Complete frames first.
        while buf.len() >= 4 {
            let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            if size < 4 || size as usize > MAX_RESPONSE_BYTES {
                shared.close(format!("implausible response size {size}"));
                return;
            }
            let size = size as usize;
            if buf.len() < 4 + size && size >= LARGE_FRAME {
                let _ = buf.split_to(4);
                let mut frame = Vec::with_capacity(size);
                frame.extend_from_slice(&buf.split_to(buf.len()));
                if !read_rest(&mut stream, &mut frame, size, &shared) {
                    return;
                }
                if !dispatch(&shared, Bytes::from(frame)) {
                    return;
                }
                continue;
            }
            if buf.len() < 4 + size {
                buf.reserve(4 + size - buf.len());
                break;
            }
            let _ = buf.split_to(4);
            if !dispatch(&shared, buf.split_to(size).freeze()) {
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => {
                shared.close("closed by the broker".to_string());
                return;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !tick(&shared, &stream) {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                shared.close(format!("read failed: {e}"));
                return;
            }
        }
    }
}

/// Hands a frame to its request's handler; false (the connection is closed) if no request
/// waits for it.
fn dispatch(shared: &Shared, frame: Bytes) -> bool {
    let correlation = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    let pending = shared.lock().pending.remove(&correlation);
    shared.changed.notify_all();
    match pending {
        Some(p) => {
            (p.handler)(Ok(frame));
            true
        }
        None => {
            shared.close(format!(
                "response with unknown correlation id {correlation}"
            ));
            false
        }
    }
}

/// Reads from the socket until `frame` holds `size` bytes (into its spare capacity, which
/// the socket fills without zeroing it first). False if the connection ended.
fn read_rest(stream: &mut TcpStream, frame: &mut Vec<u8>, size: usize, shared: &Shared) -> bool {
    while frame.len() < size {
        let want = (size - frame.len()) as u64;
        match (&mut *stream).take(want).read_to_end(frame) {
            Ok(0) => {
                shared.close("closed by the broker".to_string());
                return false;
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !tick(shared, stream) {
                    return false;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                shared.close(format!("read failed: {e}"));
                return false;
            }
        }
    }
    true
}

/// The reader's periodic check while nothing arrives: false (and the connection is closed)
/// once it was closed or a request is past its deadline.
fn tick(shared: &Shared, stream: &TcpStream) -> bool {
    let now = Instant::now();
    let state = shared.lock();
    if state.closed.is_some() {
        drop(state);
        shared.close(String::new());
        return false;
    }
    let expired = state.pending.values().any(|p| p.deadline <= now);
    drop(state);
    if expired {
        shared.close("a request timed out".to_string());
        let _ = stream.shutdown(Shutdown::Both);
        return false;
    }
    true
}
