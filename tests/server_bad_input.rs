//! The broker under bad input, over real sockets.
//!
//! Every test starts its own `ringbroker serve` process (2 shards, a free loopback port, a
//! temporary data directory), throws one kind of bad input at it, and then checks that the
//! process is still running, that a well-behaved client still gets an ApiVersions v3 and a
//! Metadata v9 answered (correlation id checked, response fully decoded), that the broker's
//! resident memory is under an absolute bound, that nothing panicked, and that SIGTERM still
//! stops it cleanly.
//!
//! The well-behaved client encodes requests and decodes responses with kafka-protocol. It also
//! carries its own small codec (needed anyway to build malformed requests field by field), and
//! every request and response goes through both: the hand encoding must equal the crate's byte
//! for byte, the hand decoding must equal the crate's, and a decoded response must re-encode to
//! the exact bytes received. A broker bug that kafka-protocol happens to share (the broker uses
//! it too) is therefore still caught by the independent codec.
//!
//! No assertion depends on elapsed time. Every wait is bounded (socket timeouts, bounded polling
//! loops) only so that a hung broker fails the test instead of hanging it.

mod broker;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::record_batch::{
    ATTRIBUTES_OFFSET, BATCH_LENGTH_OFFSET, CRC_OFFSET, MAGIC_OFFSET, RECORDS_COUNT_OFFSET,
};

/// Read/write timeout of every test socket: how long a hung broker can stall a test.
const IO_TIMEOUT: Duration = Duration::from_secs(20);
/// Absolute bound on the broker's resident memory, at any point of any test.
const RSS_LIMIT_KIB: u64 = 512 * 1024;
/// Largest response frame the test client accepts.
const MAX_RESPONSE: usize = 16 << 20;
/// At most this many bytes are drained from a connection waiting for the broker to close it.
const MAX_DRAIN: usize = 1 << 20;
/// The broker's default `socket.request.max.bytes`.
const SOCKET_REQUEST_MAX_BYTES: i32 = 104_857_600;

const UNSUPPORTED_VERSION: i16 = 35;
const CORRUPT_MESSAGE: i16 = 2;
const MESSAGE_TOO_LARGE: i16 = 10;

// ---------------------------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------------------------

/// splitmix64: seeded, deterministic.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// Bytes biased towards what hurts a decoder: zeros, 0xff (-1), 0x7f (huge lengths) and
    /// small numbers, mixed with uniform noise.
    fn nasty_bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| match self.below(6) {
                0 => 0x00,
                1 => 0xff,
                2 => 0x7f,
                3 => self.below(4) as u8,
                _ => self.next_u64() as u8,
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// The broker process
// ---------------------------------------------------------------------------------------------

/// The shared broker process (tests/broker), plus the checks this file makes after each
/// attack: alive, serving, memory bounded, no panic logged.
struct Broker {
    process: broker::Broker,
    addr: SocketAddr,
}

impl Broker {
    /// Starts a broker with 2 shards on a free loopback port; `settings` are `NAME=VALUE`
    /// broker properties. Returns once it has answered a well-behaved client.
    fn start(settings: &[&str]) -> Broker {
        // The broker inherits our descriptor limit; one test holds 1,000 connections open.
        raise_fd_limit(4096);
        let process = broker::Broker::start(settings);
        let addr = process.addr;
        let mut broker = Broker { process, addr };
        broker.check_serves();
        broker
    }

    fn pid(&self) -> i32 {
        self.process.pid()
    }

    fn log_tail(&self) -> String {
        format!("--- broker log tail ---\n{}", self.process.log())
    }

    fn assert_alive(&mut self) {
        if let Some(status) = self.process.exit_status() {
            panic!("the broker died: {status}\n{}", self.log_tail());
        }
    }

    fn assert_no_panic_logged(&self) {
        let log = self.process.log();
        assert!(
            !log.contains("panicked at"),
            "the broker logged a panic\n{}",
            self.log_tail()
        );
    }

    /// Resident memory of the broker process, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read /proc/<broker>/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/<broker>/status")
    }

    fn assert_rss_bounded(&self, when: &str) -> u64 {
        let rss = self.rss_kib();
        assert!(
            rss < RSS_LIMIT_KIB,
            "broker resident memory {rss} KiB {when} exceeds {RSS_LIMIT_KIB} KiB"
        );
        rss
    }

    /// Alive, answers a well-behaved client, memory bounded, no panic in its log.
    fn check_serves(&mut self) {
        self.assert_alive();
        well_behaved_round_trip(self.addr);
        self.assert_alive();
        self.assert_rss_bounded("after the round trip");
        self.assert_no_panic_logged();
    }

    /// SIGTERM; the broker must exit 0 (it drains connections and closes its logs).
    fn stop(mut self) {
        self.assert_alive();
        self.process.assert_clean_stop();
        self.assert_no_panic_logged();
    }
}

/// Raises the soft RLIMIT_NOFILE to at least `want` (capped by the hard limit).
fn raise_fd_limit(want: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        if lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn fd_limit() -> libc::rlim_t {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscall on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

// ---------------------------------------------------------------------------------------------
// Sockets and framing
// ---------------------------------------------------------------------------------------------

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    s.set_write_timeout(Some(IO_TIMEOUT))
        .expect("write timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// Closes with RST instead of FIN (SO_LINGER 0): the abrupt way a client can vanish.
fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a socket we own, with a correctly sized option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(s);
}

/// One request frame. The header version is the one kafka-protocol gives for the key and
/// version (header v1 for keys it does not know).
fn request_frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let header_version = ApiKey::try_from(api_key).map_or(1, |k| k.request_header_version(version));
    request_frame_with_header(
        api_key,
        version,
        correlation_id,
        header_version,
        Some("bad-input-test"),
        body,
    )
}

fn request_frame_with_header(
    api_key: i16,
    version: i16,
    correlation_id: i32,
    header_version: i16,
    client_id: Option<&str>,
    body: &[u8],
) -> Vec<u8> {
    let mut h = Wr::default();
    h.i16(api_key).i16(version).i32(correlation_id);
    if header_version >= 1 {
        h.nullable_string(client_id);
    }
    if header_version >= 2 {
        h.no_tags();
    }
    h.raw(body);
    let payload = h.into_bytes();
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

/// Reads one response frame: the correlation id and what follows it.
fn read_response(s: &mut TcpStream) -> (i32, Bytes) {
    let mut size = [0u8; 4];
    s.read_exact(&mut size)
        .unwrap_or_else(|e| panic!("reading a response size: {e}"));
    let size = i32::from_be_bytes(size);
    assert!(
        (4..=MAX_RESPONSE as i32).contains(&size),
        "response frame size {size}"
    );
    let mut buf = vec![0u8; size as usize];
    s.read_exact(&mut buf)
        .unwrap_or_else(|e| panic!("reading a {size}-byte response: {e}"));
    let mut buf = Bytes::from(buf);
    let correlation_id = buf.get_i32();
    (correlation_id, buf)
}

/// Reads one response, checks its correlation id, strips the response header.
fn expect_response(s: &mut TcpStream, api: ApiKey, version: i16, correlation_id: i32) -> Bytes {
    let (got, rest) = read_response(s);
    assert_eq!(
        got, correlation_id,
        "{api:?} v{version}: response for correlation id {got}, expected {correlation_id}"
    );
    let mut rd = Rd(rest);
    if api.response_header_version(version) >= 1 {
        rd.tags()
            .unwrap_or_else(|e| panic!("{api:?} v{version} response header: {e}"));
    }
    rd.0
}

/// Sends one request and returns the response body.
fn round_trip(
    s: &mut TcpStream,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &[u8],
) -> Bytes {
    s.write_all(&request_frame(api as i16, version, correlation_id, body))
        .unwrap_or_else(|e| panic!("sending {api:?} v{version}: {e}"));
    expect_response(s, api, version, correlation_id)
}

/// Reads until the broker closes the connection (FIN or RST) and returns what came before.
/// Panics if it is still open after [`IO_TIMEOUT`] of silence, twice that in all, or
/// [`MAX_DRAIN`] bytes.
fn read_until_closed(s: &mut TcpStream, what: &str) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = Instant::now() + 2 * IO_TIMEOUT;
    loop {
        assert!(
            Instant::now() < deadline,
            "{what}: the broker kept the connection open for {:?}",
            2 * IO_TIMEOUT
        );
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                assert!(
                    got.len() <= MAX_DRAIN,
                    "{what}: the broker sent more than {MAX_DRAIN} bytes without closing"
                );
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::BrokenPipe
                ) =>
            {
                return got
            }
            Err(e) => panic!(
                "{what}: the broker did not close the connection ({e}); {} bytes received",
                got.len()
            ),
        }
    }
}

/// Sends `bytes` on a fresh connection (the send may fail part-way if the broker hangs up
/// first) and requires the broker to close the connection without answering.
fn expect_closed_without_response(addr: SocketAddr, bytes: &[u8], what: &str) {
    let mut s = connect(addr);
    let _ = s.write_all(bytes);
    let got = read_until_closed(&mut s, what);
    assert!(
        got.is_empty(),
        "{what}: expected the connection closed without a response, got {} bytes: {:02x?}",
        got.len(),
        &got[..got.len().min(64)]
    );
}

/// Sends `bytes` on a fresh connection, half-closes, and drains whatever comes back until the
/// broker closes: for inputs whose outcome (answer or hang-up) is not the point.
fn send_and_drain(addr: SocketAddr, bytes: &[u8], what: &str) {
    let mut s = connect(addr);
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    read_until_closed(&mut s, what);
}

// ---------------------------------------------------------------------------------------------
// Hand encoding and decoding
// ---------------------------------------------------------------------------------------------

/// Big-endian writer for request bodies.
#[derive(Default)]
struct Wr(BytesMut);

impl Wr {
    fn i8(&mut self, v: i8) -> &mut Wr {
        self.0.put_i8(v);
        self
    }
    fn i16(&mut self, v: i16) -> &mut Wr {
        self.0.put_i16(v);
        self
    }
    fn i32(&mut self, v: i32) -> &mut Wr {
        self.0.put_i32(v);
        self
    }
    fn i64(&mut self, v: i64) -> &mut Wr {
        self.0.put_i64(v);
        self
    }
    fn bool(&mut self, v: bool) -> &mut Wr {
        self.0.put_u8(u8::from(v));
        self
    }
    fn raw(&mut self, b: &[u8]) -> &mut Wr {
        self.0.put_slice(b);
        self
    }
    fn uvarint(&mut self, mut v: u32) -> &mut Wr {
        while v >= 0x80 {
            self.0.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.put_u8(v as u8);
        self
    }
    fn string(&mut self, s: &str) -> &mut Wr {
        self.i16(s.len() as i16).raw(s.as_bytes())
    }
    fn nullable_string(&mut self, s: Option<&str>) -> &mut Wr {
        match s {
            Some(s) => self.string(s),
            None => self.i16(-1),
        }
    }
    fn compact_string(&mut self, s: &str) -> &mut Wr {
        self.uvarint(s.len() as u32 + 1).raw(s.as_bytes())
    }
    fn compact_nullable_string(&mut self, s: Option<&str>) -> &mut Wr {
        match s {
            Some(s) => self.compact_string(s),
            None => self.uvarint(0),
        }
    }
    /// A string in the encoding of the version (compact when flexible).
    fn str_v(&mut self, flexible: bool, s: &str) -> &mut Wr {
        if flexible {
            self.compact_string(s)
        } else {
            self.string(s)
        }
    }
    /// An array length in the encoding of the version.
    fn array_v(&mut self, flexible: bool, n: usize) -> &mut Wr {
        if flexible {
            self.uvarint(n as u32 + 1)
        } else {
            self.i32(n as i32)
        }
    }
    /// An array (or string/bytes) length of `n` in the encoding of the version, clamped to
    /// what it can express: 0x7fffffff, or 2^32 - 2 for compact encodings.
    fn count_v(&mut self, flexible: bool, n: u32) -> &mut Wr {
        if flexible {
            self.uvarint(n.saturating_add(1))
        } else {
            self.i32(n.min(i32::MAX as u32) as i32)
        }
    }
    fn nullable_bytes(&mut self, b: Option<&[u8]>) -> &mut Wr {
        match b {
            Some(b) => self.i32(b.len() as i32).raw(b),
            None => self.i32(-1),
        }
    }
    fn no_tags(&mut self) -> &mut Wr {
        self.uvarint(0)
    }
    /// Empty tagged fields, if the version is flexible.
    fn tags_v(&mut self, flexible: bool) -> &mut Wr {
        if flexible {
            self.no_tags();
        }
        self
    }
    fn into_bytes(self) -> Bytes {
        self.0.freeze()
    }
    fn to_vec(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

/// Reader for response bodies; every read is bounds-checked.
struct Rd(Bytes);

type R<T> = Result<T, String>;

impl Rd {
    fn need(&self, n: usize) -> R<()> {
        if self.0.remaining() < n {
            Err(format!(
                "truncated: {n} bytes needed, {} left",
                self.0.remaining()
            ))
        } else {
            Ok(())
        }
    }
    fn i8(&mut self) -> R<i8> {
        self.need(1)?;
        Ok(self.0.get_i8())
    }
    fn i16(&mut self) -> R<i16> {
        self.need(2)?;
        Ok(self.0.get_i16())
    }
    fn i32(&mut self) -> R<i32> {
        self.need(4)?;
        Ok(self.0.get_i32())
    }
    fn i64(&mut self) -> R<i64> {
        self.need(8)?;
        Ok(self.0.get_i64())
    }
    fn bool(&mut self) -> R<bool> {
        Ok(self.i8()? != 0)
    }
    fn uvarint(&mut self) -> R<u32> {
        let mut v: u32 = 0;
        for i in 0..5 {
            self.need(1)?;
            let b = self.0.get_u8();
            v |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 5 bytes".to_string())
    }
    fn take(&mut self, n: usize) -> R<Bytes> {
        self.need(n)?;
        Ok(self.0.split_to(n))
    }
    fn utf8(&mut self, n: usize) -> R<StrBytes> {
        let b = self.take(n)?;
        StrBytes::from_utf8(b).map_err(|e| format!("string is not UTF-8: {e}"))
    }
    fn nullable_string_v(&mut self, flexible: bool) -> R<Option<StrBytes>> {
        let len: i64 = if flexible {
            i64::from(self.uvarint()?) - 1
        } else {
            i64::from(self.i16()?)
        };
        if len < 0 {
            return Ok(None);
        }
        self.utf8(len as usize).map(Some)
    }
    fn string_v(&mut self, flexible: bool) -> R<StrBytes> {
        self.nullable_string_v(flexible)?
            .ok_or_else(|| "null where a string is required".to_string())
    }
    fn array_len_v(&mut self, flexible: bool) -> R<usize> {
        let n: i64 = if flexible {
            i64::from(self.uvarint()?) - 1
        } else {
            i64::from(self.i32()?)
        };
        if n < 0 {
            return Err(format!("null or negative array length {n}"));
        }
        // Every element takes at least one byte.
        self.need(n as usize)?;
        Ok(n as usize)
    }
    fn i32_array_v(&mut self, flexible: bool) -> R<Vec<BrokerId>> {
        let n = self.array_len_v(flexible)?;
        (0..n).map(|_| self.i32().map(BrokerId)).collect()
    }
    fn tags(&mut self) -> R<BTreeMap<i32, Bytes>> {
        let n = self.uvarint()?;
        let mut out = BTreeMap::new();
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            out.insert(tag as i32, self.take(size)?);
        }
        Ok(out)
    }
    fn tags_v(&mut self, flexible: bool) -> R<BTreeMap<i32, Bytes>> {
        if flexible {
            self.tags()
        } else {
            Ok(BTreeMap::new())
        }
    }
    fn end(&self) -> R<()> {
        if self.0.has_remaining() {
            Err(format!("{} trailing bytes", self.0.remaining()))
        } else {
            Ok(())
        }
    }
}

/// The request as kafka-protocol encodes it; the test's own encoding must be byte for byte the
/// same, and must decode (with the crate) back to the struct, using every byte.
fn checked_request<T: Encodable + Decodable + PartialEq + Debug>(
    hand: Bytes,
    version: i16,
    want: &T,
) -> Bytes {
    let mut encoded = BytesMut::new();
    want.encode(&mut encoded, version)
        .unwrap_or_else(|e| panic!("kafka-protocol cannot encode {want:?} v{version}: {e}"));
    assert_eq!(
        &encoded[..],
        &hand[..],
        "the test's v{version} request encoding disagrees with kafka-protocol's"
    );
    let mut buf = hand.clone();
    let got = T::decode(&mut buf, version)
        .unwrap_or_else(|e| panic!("kafka-protocol cannot decode the test's own request: {e}"));
    assert_eq!(&got, want, "the request does not decode to what was meant");
    assert_eq!(
        buf.remaining(),
        0,
        "kafka-protocol left bytes of the request"
    );
    encoded.freeze()
}

/// The response as kafka-protocol decodes it; the test's own decoding must agree, and must
/// re-encode (with the crate) to the exact bytes received.
fn checked_response<T: Encodable + Decodable + PartialEq + Debug>(
    hand: R<T>,
    wire: &Bytes,
    version: i16,
    what: &str,
) -> T {
    let hand = hand.unwrap_or_else(|e| {
        panic!(
            "malformed {what} v{version} response ({e}): {:02x?}",
            &wire[..wire.len().min(256)]
        )
    });
    let mut buf = wire.clone();
    let decoded = T::decode(&mut buf, version)
        .unwrap_or_else(|e| panic!("kafka-protocol cannot decode the {what} v{version}: {e}"));
    assert_eq!(buf.remaining(), 0, "{what} v{version}: trailing bytes");
    assert_eq!(
        decoded, hand,
        "kafka-protocol and the test decode the {what} v{version} response differently"
    );
    let mut buf = BytesMut::new();
    decoded
        .encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("kafka-protocol cannot encode the decoded {what}: {e}"));
    assert_eq!(
        &buf[..],
        &wire[..],
        "the {what} v{version} response as decoded ({decoded:?}) does not re-encode to the bytes received"
    );
    decoded
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

// --- ApiVersions ---

fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("ringbroker-bad-input"))
        .with_client_software_version(StrBytes::from_static_str("1.0"))
}

fn encode_api_versions(req: &ApiVersionsRequest, version: i16) -> Bytes {
    let mut w = Wr::default();
    if version >= 3 {
        w.compact_string(&req.client_software_name)
            .compact_string(&req.client_software_version)
            .no_tags();
        checked_request(w.into_bytes(), version, req)
    } else {
        // v0-v2 bodies are empty.
        checked_request(w.into_bytes(), version, &ApiVersionsRequest::default())
    }
}

fn decode_api_versions(body: &Bytes, version: i16) -> ApiVersionsResponse {
    let flexible = version >= 3;
    let decoded = (|| -> R<ApiVersionsResponse> {
        let mut rd = Rd(body.clone());
        let mut r = ApiVersionsResponse::default();
        r.error_code = rd.i16()?;
        let n = rd.array_len_v(flexible)?;
        for _ in 0..n {
            let mut k = ApiVersion::default();
            k.api_key = rd.i16()?;
            k.min_version = rd.i16()?;
            k.max_version = rd.i16()?;
            k.unknown_tagged_fields = rd.tags_v(flexible)?;
            r.api_keys.push(k);
        }
        if version >= 1 {
            r.throttle_time_ms = rd.i32()?;
        }
        r.unknown_tagged_fields = rd.tags_v(flexible)?;
        rd.end()?;
        Ok(r)
    })();
    checked_response(decoded, body, version, "ApiVersions")
}

/// The version range advertised for `key`.
fn advertised(r: &ApiVersionsResponse, key: ApiKey) -> Option<(i16, i16)> {
    r.api_keys
        .iter()
        .find(|k| k.api_key == key as i16)
        .map(|k| (k.min_version, k.max_version))
}

fn check_api_versions_list(r: &ApiVersionsResponse) {
    for (key, version) in [
        (ApiKey::ApiVersions, 0),
        (ApiKey::ApiVersions, 3),
        (ApiKey::Metadata, 9),
        (ApiKey::Produce, 7),
        (ApiKey::ListOffsets, 5),
    ] {
        let (min, max) =
            advertised(r, key).unwrap_or_else(|| panic!("{key:?} is not advertised: {r:?}"));
        assert!(
            (min..=max).contains(&version),
            "{key:?} v{version} not in the advertised {min}..={max}"
        );
    }
}

// --- Metadata ---

fn metadata_request(topics: Option<&[&str]>, auto_create: bool) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(topics.map(|names| {
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
                .collect()
        }))
        .with_allow_auto_topic_creation(auto_create)
}

/// Metadata v1 (auto-creation implied, no flags) or v9 (flexible).
fn encode_metadata(req: &MetadataRequest, version: i16) -> Bytes {
    assert!(
        version == 1 || version == 9,
        "test encodes Metadata v1 and v9 only"
    );
    let flexible = version >= 9;
    let mut w = Wr::default();
    match &req.topics {
        None if flexible => {
            w.uvarint(0);
        }
        None => {
            w.i32(-1);
        }
        Some(topics) => {
            w.array_v(flexible, topics.len());
            for t in topics {
                let name = t.name.as_ref().expect("topic by name");
                w.str_v(flexible, &name.0).tags_v(flexible);
            }
        }
    }
    if version >= 4 {
        w.bool(req.allow_auto_topic_creation);
    }
    if version >= 8 {
        w.bool(req.include_cluster_authorized_operations)
            .bool(req.include_topic_authorized_operations);
    }
    w.tags_v(flexible);
    let req = if version < 4 {
        // v1-v3 carry no flag; kafka-protocol decodes it as its default.
        req.clone().with_allow_auto_topic_creation(true)
    } else {
        req.clone()
    };
    checked_request(w.into_bytes(), version, &req)
}

/// Metadata v1..=9.
fn decode_metadata(body: &Bytes, version: i16) -> MetadataResponse {
    assert!((1..=9).contains(&version));
    let flexible = version >= 9;
    let decoded = (|| -> R<MetadataResponse> {
        let mut rd = Rd(body.clone());
        let mut r = MetadataResponse::default();
        if version >= 3 {
            r.throttle_time_ms = rd.i32()?;
        }
        let n = rd.array_len_v(flexible)?;
        for _ in 0..n {
            let mut b = MetadataResponseBroker::default();
            b.node_id = BrokerId(rd.i32()?);
            b.host = rd.string_v(flexible)?;
            b.port = rd.i32()?;
            b.rack = rd.nullable_string_v(flexible)?;
            b.unknown_tagged_fields = rd.tags_v(flexible)?;
            r.brokers.push(b);
        }
        if version >= 2 {
            r.cluster_id = rd.nullable_string_v(flexible)?;
        }
        r.controller_id = BrokerId(rd.i32()?);
        let n = rd.array_len_v(flexible)?;
        for _ in 0..n {
            let mut t = MetadataResponseTopic::default();
            t.error_code = rd.i16()?;
            t.name = Some(TopicName(rd.string_v(flexible)?));
            t.is_internal = rd.bool()?;
            let np = rd.array_len_v(flexible)?;
            for _ in 0..np {
                let mut p = MetadataResponsePartition::default();
                p.error_code = rd.i16()?;
                p.partition_index = rd.i32()?;
                p.leader_id = BrokerId(rd.i32()?);
                if version >= 7 {
                    p.leader_epoch = rd.i32()?;
                }
                p.replica_nodes = rd.i32_array_v(flexible)?;
                p.isr_nodes = rd.i32_array_v(flexible)?;
                if version >= 5 {
                    p.offline_replicas = rd.i32_array_v(flexible)?;
                }
                p.unknown_tagged_fields = rd.tags_v(flexible)?;
                t.partitions.push(p);
            }
            if version >= 8 {
                t.topic_authorized_operations = rd.i32()?;
            }
            t.unknown_tagged_fields = rd.tags_v(flexible)?;
            r.topics.push(t);
        }
        if version >= 8 {
            r.cluster_authorized_operations = rd.i32()?;
        }
        r.unknown_tagged_fields = rd.tags_v(flexible)?;
        rd.end()?;
        Ok(r)
    })();
    checked_response(decoded, body, version, "Metadata")
}

// --- Produce v7 ---

fn produce_request(topic: &str, partitions: &[(i32, Option<Bytes>)]) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(
                partitions
                    .iter()
                    .map(|(i, r)| {
                        PartitionProduceData::default()
                            .with_index(*i)
                            .with_records(r.clone())
                    })
                    .collect(),
            )])
}

fn encode_produce_v7(req: &ProduceRequest) -> Bytes {
    let mut w = Wr::default();
    w.nullable_string(req.transactional_id.as_ref().map(|t| &*t.0))
        .i16(req.acks)
        .i32(req.timeout_ms)
        .i32(req.topic_data.len() as i32);
    for t in &req.topic_data {
        w.string(&t.name.0).i32(t.partition_data.len() as i32);
        for p in &t.partition_data {
            w.i32(p.index).nullable_bytes(p.records.as_deref());
        }
    }
    checked_request(w.into_bytes(), 7, req)
}

fn decode_produce_v7(body: &Bytes) -> ProduceResponse {
    let decoded = (|| -> R<ProduceResponse> {
        let mut rd = Rd(body.clone());
        let mut r = ProduceResponse::default();
        let n = rd.array_len_v(false)?;
        for _ in 0..n {
            let mut t = TopicProduceResponse::default();
            t.name = TopicName(rd.string_v(false)?);
            let np = rd.array_len_v(false)?;
            for _ in 0..np {
                let mut p = PartitionProduceResponse::default();
                p.index = rd.i32()?;
                p.error_code = rd.i16()?;
                p.base_offset = rd.i64()?;
                p.log_append_time_ms = rd.i64()?;
                p.log_start_offset = rd.i64()?;
                t.partition_responses.push(p);
            }
            r.responses.push(t);
        }
        r.throttle_time_ms = rd.i32()?;
        rd.end()?;
        Ok(r)
    })();
    checked_response(decoded, body, 7, "Produce")
}

// --- ListOffsets v5 ---

fn encode_list_offsets_v5(req: &ListOffsetsRequest) -> Bytes {
    let mut w = Wr::default();
    w.i32(req.replica_id.0)
        .i8(req.isolation_level)
        .i32(req.topics.len() as i32);
    for t in &req.topics {
        w.string(&t.name.0).i32(t.partitions.len() as i32);
        for p in &t.partitions {
            w.i32(p.partition_index)
                .i32(p.current_leader_epoch)
                .i64(p.timestamp);
        }
    }
    checked_request(w.into_bytes(), 5, req)
}

fn decode_list_offsets_v5(body: &Bytes) -> ListOffsetsResponse {
    let decoded = (|| -> R<ListOffsetsResponse> {
        let mut rd = Rd(body.clone());
        let mut r = ListOffsetsResponse::default();
        r.throttle_time_ms = rd.i32()?;
        let n = rd.array_len_v(false)?;
        for _ in 0..n {
            let mut t = ListOffsetsTopicResponse::default();
            t.name = TopicName(rd.string_v(false)?);
            let np = rd.array_len_v(false)?;
            for _ in 0..np {
                let mut p = ListOffsetsPartitionResponse::default();
                p.partition_index = rd.i32()?;
                p.error_code = rd.i16()?;
                p.timestamp = rd.i64()?;
                p.offset = rd.i64()?;
                p.leader_epoch = rd.i32()?;
                t.partitions.push(p);
            }
            r.topics.push(t);
        }
        rd.end()?;
        Ok(r)
    })();
    checked_response(decoded, body, 5, "ListOffsets")
}

// ---------------------------------------------------------------------------------------------
// The well-behaved client
// ---------------------------------------------------------------------------------------------

/// ApiVersions v3 then Metadata v9 on a fresh connection, both decoded and checked.
fn well_behaved_round_trip(addr: SocketAddr) {
    let mut s = connect(addr);
    let body = encode_api_versions(&api_versions_request(), 3);
    let resp = round_trip(&mut s, ApiKey::ApiVersions, 3, 0x1234_5678, &body);
    let versions = decode_api_versions(&resp, 3);
    assert_eq!(versions.error_code, 0, "ApiVersions v3: {versions:?}");
    check_api_versions_list(&versions);

    let body = encode_metadata(&metadata_request(None, false), 9);
    let resp = round_trip(&mut s, ApiKey::Metadata, 9, -77, &body);
    let meta = decode_metadata(&resp, 9);
    assert_eq!(meta.brokers.len(), 1, "Metadata v9: {meta:?}");
    assert_eq!(
        meta.brokers[0].port,
        i32::from(addr.port()),
        "Metadata v9 advertises another port: {meta:?}"
    );
    assert_eq!(meta.controller_id, meta.brokers[0].node_id);
    assert!(
        meta.cluster_id.is_some(),
        "Metadata v9 without a cluster id"
    );
}

/// Asks Metadata v9 for `topic` (auto-creating it) until it has `partitions` partitions with a
/// leader; bounded.
fn ensure_topic(addr: SocketAddr, topic: &str, partitions: usize) {
    let mut s = connect(addr);
    let body = encode_metadata(&metadata_request(Some(&[topic]), true), 9);
    let mut last = None;
    for attempt in 0..100 {
        let resp = round_trip(&mut s, ApiKey::Metadata, 9, attempt, &body);
        let meta = decode_metadata(&resp, 9);
        let t = &meta.topics[0];
        if t.error_code == 0
            && t.partitions.len() == partitions
            && t.partitions
                .iter()
                .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
        {
            return;
        }
        last = Some(meta);
        thread::sleep(Duration::from_millis(50));
    }
    panic!("topic {topic} never became ready: {last:?}");
}

/// ListOffsets v5 latest (-1) for each partition of `topic`.
fn latest_offsets(addr: SocketAddr, topic: &str, partitions: &[i32]) -> Vec<i64> {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(*p)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )]);
    let mut s = connect(addr);
    let resp = round_trip(
        &mut s,
        ApiKey::ListOffsets,
        5,
        4242,
        &encode_list_offsets_v5(&req),
    );
    let r = decode_list_offsets_v5(&resp);
    partitions
        .iter()
        .map(|want| {
            let p = r.topics[0]
                .partitions
                .iter()
                .find(|p| p.partition_index == *want)
                .unwrap_or_else(|| panic!("no ListOffsets answer for partition {want}: {r:?}"));
            assert_eq!(p.error_code, 0, "ListOffsets: {r:?}");
            p.offset
        })
        .collect()
}

/// Produce v7 (acks=1) and the per-partition (error code, base offset), in request order.
fn produce(addr: SocketAddr, req: &ProduceRequest) -> Vec<(i16, i64)> {
    let mut s = connect(addr);
    let resp = round_trip(&mut s, ApiKey::Produce, 7, 777, &encode_produce_v7(req));
    let r = decode_produce_v7(&resp);
    assert_eq!(r.responses.len(), 1, "Produce: {r:?}");
    let parts = &r.responses[0].partition_responses;
    assert_eq!(
        parts.len(),
        req.topic_data[0].partition_data.len(),
        "Produce: {r:?}"
    );
    parts
        .iter()
        .map(|p| (p.error_code, p.base_offset))
        .collect()
}

fn batch(records: usize, value_len: usize) -> Bytes {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    for i in 0..records {
        let value = vec![b'a' + (i % 26) as u8; value_len];
        b.push(Some(b"k"), Some(&value), 1_700_000_000_000 + i as i64, &[]);
    }
    b.build()
}

fn recompute_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

// ---------------------------------------------------------------------------------------------
// Bad requests
// ---------------------------------------------------------------------------------------------

/// The APIs whose request layouts this file knows (for huge counts and empty bodies). The
/// broker must serve them; their version ranges are taken from its ApiVersions answer.
const LAYOUTS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
];

/// Every API the broker advertises, with its version range (ApiVersions v3).
fn advertised_apis(addr: SocketAddr) -> Vec<(ApiKey, i16, i16)> {
    let mut s = connect(addr);
    let body = encode_api_versions(&api_versions_request(), 3);
    let resp = round_trip(&mut s, ApiKey::ApiVersions, 3, 3, &body);
    let r = decode_api_versions(&resp, 3);
    let apis: Vec<(ApiKey, i16, i16)> = r
        .api_keys
        .iter()
        .map(|k| {
            let api = ApiKey::try_from(k.api_key)
                .unwrap_or_else(|_| panic!("advertised API key {} is unknown", k.api_key));
            (api, k.min_version, k.max_version)
        })
        .collect();
    for api in LAYOUTS {
        assert!(
            apis.iter().any(|(a, _, _)| a == api),
            "{api:?} is not advertised: {r:?}"
        );
    }
    apis
}

fn flexible(api: ApiKey, version: i16) -> bool {
    api.request_header_version(version) >= 2
}

/// APIs whose request starts with a string (a group id or coordinator key).
const STRING_FIRST: &[ApiKey] = &[
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::OffsetDelete,
    ApiKey::InitProducerId,
];

/// Lengths claimed by [`huge_count_bodies`]: the largest each encoding can express, and a few
/// below (so that element size times count lands on both sides of the broker's 1 GiB
/// lazy-mapping threshold).
const HUGE_COUNTS: [u32; 4] = [u32::MAX, 0x3fff_ffff, 0x0fff_ffff, 0x00ff_ffff];

/// Bodies for `api`/`version` that are well formed up to an array, string or bytes length of
/// `count` (clamped to 0x7fffffff, or 2^32 - 2 for compact encodings) and then end: a decoder
/// that sizes a buffer by the length before reading the elements would ask for gigabytes.
fn huge_count_bodies(api: ApiKey, version: i16, count: u32) -> Vec<(String, Vec<u8>)> {
    let f = flexible(api, version);
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let mut add = |what: &str, w: &Wr| out.push((what.to_string(), w.to_vec()));
    match api {
        ApiKey::Metadata => {
            let mut w = Wr::default();
            w.count_v(f, count);
            add("topics count", &w);
            let mut w = Wr::default();
            w.array_v(f, 1);
            if version >= 10 {
                w.raw(&[0u8; 16]);
            }
            w.count_v(f, count);
            add("topic name length", &w);
        }
        ApiKey::CreateTopics => {
            let mut w = Wr::default();
            w.count_v(f, count);
            add("topics count", &w);
            let mut w = Wr::default();
            w.array_v(f, 1).count_v(f, count);
            add("topic name length", &w);
            let topic = |w: &mut Wr| {
                w.array_v(f, 1).str_v(f, "t").i32(1).i16(1);
            };
            let mut w = Wr::default();
            topic(&mut w);
            w.count_v(f, count);
            add("assignments count", &w);
            let mut w = Wr::default();
            topic(&mut w);
            w.array_v(f, 1).i32(0).count_v(f, count);
            add("assignment broker ids count", &w);
            let mut w = Wr::default();
            topic(&mut w);
            w.array_v(f, 0).count_v(f, count);
            add("configs count", &w);
        }
        ApiKey::Produce if version <= 2 => {
            let prefix = |w: &mut Wr| {
                w.i16(1).i32(1000);
            };
            let mut w = Wr::default();
            prefix(&mut w);
            w.count_v(false, count);
            add("legacy topics count", &w);
            let mut w = Wr::default();
            prefix(&mut w);
            w.i32(1).string("t").count_v(false, count);
            add("legacy partitions count", &w);
            let mut w = Wr::default();
            prefix(&mut w);
            w.i32(1).string("t").i32(1).i32(0).count_v(false, count);
            add("legacy message set size", &w);
            let mut w = Wr::default();
            prefix(&mut w);
            w.i32(1).string("t").i32(1).i32(0).i32(i32::MIN);
            add("legacy negative message set size", &w);
        }
        ApiKey::Produce => {
            let prefix = |w: &mut Wr| {
                if f {
                    w.compact_nullable_string(None);
                } else {
                    w.nullable_string(None);
                }
                w.i16(1).i32(1000);
            };
            let mut w = Wr::default();
            prefix(&mut w);
            w.count_v(f, count);
            add("topics count", &w);
            let mut w = Wr::default();
            prefix(&mut w);
            w.array_v(f, 1).str_v(f, "t").count_v(f, count);
            add("partitions count", &w);
            let mut w = Wr::default();
            prefix(&mut w);
            w.array_v(f, 1)
                .str_v(f, "t")
                .array_v(f, 1)
                .i32(0)
                .count_v(f, count);
            add("records length", &w);
        }
        ApiKey::Fetch => {
            let prefix = |w: &mut Wr| {
                w.i32(-1).i32(0).i32(1).i32(1 << 20).i8(0);
                if version >= 7 {
                    w.i32(0).i32(-1);
                }
            };
            let mut w = Wr::default();
            prefix(&mut w);
            w.count_v(f, count);
            add("topics count", &w);
            let mut w = Wr::default();
            prefix(&mut w);
            w.array_v(f, 1).str_v(f, "t").count_v(f, count);
            add("partitions count", &w);
            if version >= 7 {
                let mut w = Wr::default();
                prefix(&mut w);
                w.array_v(f, 0).count_v(f, count);
                add("forgotten topics count", &w);
            }
            if f {
                let mut w = Wr::default();
                prefix(&mut w);
                w.array_v(f, 0)
                    .array_v(f, 0)
                    .compact_string("")
                    .uvarint(u32::MAX);
                add("tagged fields count", &w);
                let mut w = Wr::default();
                prefix(&mut w);
                w.array_v(f, 0)
                    .array_v(f, 0)
                    .compact_string("")
                    .uvarint(1)
                    .uvarint(0)
                    .uvarint(count);
                add("tagged field size", &w);
            }
        }
        ApiKey::ListOffsets => {
            let prefix = |w: &mut Wr| {
                w.i32(-1);
                if version >= 2 {
                    w.i8(0);
                }
            };
            let mut w = Wr::default();
            prefix(&mut w);
            w.count_v(f, count);
            add("topics count", &w);
            let mut w = Wr::default();
            prefix(&mut w);
            w.array_v(f, 1).str_v(f, "t").count_v(f, count);
            add("partitions count", &w);
        }
        ApiKey::ApiVersions => {}
        // v0-v3 bodies are empty: whatever follows is ignored (as Kafka does), not a length.
        ApiKey::ListGroups if version <= 3 => {}
        _ => {
            let mut w = Wr::default();
            w.count_v(f, count);
            add("first-field length", &w);
            // Only for requests that start with an array: behind a leading string (a group
            // id, a coordinator key) the same bytes can form a valid request.
            if !STRING_FIRST.contains(&api) {
                let mut w = Wr::default();
                w.array_v(f, 1).count_v(f, count);
                add("second-field length", &w);
            }
        }
    }
    out
}

/// A request of `api`/`version` whose body is `body`, as a frame.
fn frame_for(api: ApiKey, version: i16, body: &[u8]) -> Vec<u8> {
    request_frame(api as i16, version, 99, body)
}

/// Sends every huge-count body of every served API and version; each must close the
/// connection without an answer. APIs whose layout this file does not know get the generic
/// bodies (the first field a huge array or string length).
fn send_huge_counts(addr: SocketAddr, apis: &[(ApiKey, i16, i16)]) -> usize {
    let mut sent = 0;
    for &(api, min, max) in apis {
        for version in min..=max {
            for count in HUGE_COUNTS {
                for (what, body) in huge_count_bodies(api, version, count) {
                    expect_closed_without_response(
                        addr,
                        &frame_for(api, version, &body),
                        &format!("{api:?} v{version} with a {what} of {count:#x}"),
                    );
                    sent += 1;
                }
            }
        }
    }
    sent
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

#[test]
fn random_bytes_in_many_connections() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    let apis = advertised_apis(addr);
    let mut rng = Rng::new(0x5eed_0001);
    for i in 0..400u32 {
        let len = 1 + rng.below(3000) as usize;
        let bytes = match i % 4 {
            // Pure noise, size prefix included.
            0 => rng.bytes(len),
            // Noise behind a size prefix that matches: header parse and dispatch see it.
            1 => {
                let body = rng.nasty_bytes(len);
                let mut v = (body.len() as i32).to_be_bytes().to_vec();
                v.extend(body);
                v
            }
            // A served API key and a random (often valid) version, then noise.
            2 => {
                let (api, min, max) = apis[rng.below(apis.len() as u64) as usize];
                let version = if rng.below(4) == 0 {
                    rng.next_u64() as i16
                } else {
                    min + rng.below((max - min + 1) as u64) as i16
                };
                frame_for(api, version, &rng.nasty_bytes(len))
            }
            // Several noise frames back to back.
            _ => {
                let mut v = Vec::new();
                for _ in 0..1 + rng.below(5) {
                    let n = 1 + rng.below(200) as usize;
                    let body = rng.nasty_bytes(n);
                    v.extend((body.len() as i32).to_be_bytes());
                    v.extend(body);
                }
                v
            }
        };
        if rng.below(3) == 0 {
            // Write and vanish.
            let mut s = connect(addr);
            let _ = s.write_all(&bytes);
            if rng.below(2) == 0 {
                reset(s);
            }
        } else {
            send_and_drain(addr, &bytes, &format!("random connection {i}"));
        }
        if i % 100 == 99 {
            broker.check_serves();
        }
    }
    broker.check_serves();
    broker.stop();
}

#[test]
fn truncated_frames_and_half_requests() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    let full = request_frame(
        ApiKey::Metadata as i16,
        9,
        5,
        &encode_metadata(&metadata_request(None, false), 9),
    );
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for n in 1..4 {
        cases.push((format!("{n} bytes of a size prefix"), full[..n].to_vec()));
    }
    for n in [4, 5, 8, 12, full.len() / 2, full.len() - 1] {
        cases.push((format!("{n} of {} bytes", full.len()), full[..n].to_vec()));
    }
    let mut promise = 1000i32.to_be_bytes().to_vec();
    promise.extend([0u8; 100]);
    cases.push(("100 of 1000 promised bytes".to_string(), promise));
    let mut promise = (SOCKET_REQUEST_MAX_BYTES).to_be_bytes().to_vec();
    promise.extend(&full[4..]);
    cases.push((
        "a header of a frame of socket.request.max.bytes".to_string(),
        promise,
    ));
    for (what, bytes) in &cases {
        // Half-close: the broker sees the end of the stream mid-frame and must hang up
        // without answering.
        let mut s = connect(addr);
        s.write_all(bytes).expect("send");
        s.shutdown(Shutdown::Write).expect("half-close");
        let got = read_until_closed(&mut s, what);
        assert!(got.is_empty(), "{what}: got an answer to a truncated frame");
        // Plain close, and an abortive one (RST), with nothing read.
        let mut s = connect(addr);
        s.write_all(bytes).expect("send");
        drop(s);
        let mut s = connect(addr);
        s.write_all(bytes).expect("send");
        reset(s);
    }
    // Many half requests at once, all abandoned together.
    let held: Vec<TcpStream> = (0..200)
        .map(|i| {
            let mut s = connect(addr);
            s.write_all(&full[..1 + i % (full.len() - 1)])
                .expect("send");
            s
        })
        .collect();
    broker.check_serves();
    for (i, s) in held.into_iter().enumerate() {
        if i % 2 == 0 {
            reset(s);
        }
    }
    broker.check_serves();
    broker.stop();
}

#[test]
fn huge_negative_and_zero_length_prefixes_close_the_connection() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    for (what, size) in [
        ("2 GiB", i32::MAX),
        ("socket.request.max.bytes + 1", SOCKET_REQUEST_MAX_BYTES + 1),
        ("-1", -1),
        ("i32::MIN", i32::MIN),
        ("-100", -100),
        ("0", 0),
    ] {
        // The prefix alone, and the prefix followed by a request's worth of bytes.
        expect_closed_without_response(addr, &size.to_be_bytes(), what);
        let mut bytes = size.to_be_bytes().to_vec();
        bytes.extend(request_frame(
            ApiKey::ApiVersions as i16,
            0,
            1,
            &encode_api_versions(&api_versions_request(), 0),
        ));
        expect_closed_without_response(addr, &bytes, what);
    }
    broker.check_serves();
    broker.stop();
}

#[test]
fn unknown_and_unserved_api_keys_close_the_connection() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    // Keys kafka-protocol does not know, and every key it knows that this broker does not
    // advertise.
    let apis = advertised_apis(addr);
    let unserved = (0..=i16::from(u8::MAX))
        .filter(|k| ApiKey::try_from(*k).is_ok() && !apis.iter().any(|(a, _, _)| *a as i16 == *k));
    let unknown = [-1i16, i16::MIN, 999, i16::MAX].into_iter().chain(
        (0..=i16::from(u8::MAX))
            .filter(|k| ApiKey::try_from(*k).is_err())
            .take(3),
    );
    let mut tried = 0;
    for key in unknown.chain(unserved) {
        for version in [0i16, 3, -1] {
            let frame = request_frame(key, version, 31, &[0u8; 16]);
            expect_closed_without_response(addr, &frame, &format!("API key {key} v{version}"));
            tried += 1;
        }
    }
    assert!(tried > 20, "only {tried} unknown or unserved keys tried");
    // A good request before a bad one is answered, then the connection closes.
    let mut s = connect(addr);
    let mut bytes = request_frame(
        ApiKey::ApiVersions as i16,
        3,
        1,
        &encode_api_versions(&api_versions_request(), 3),
    );
    bytes.extend(request_frame(999, 0, 2, &[]));
    s.write_all(&bytes).expect("send");
    let body = expect_response(&mut s, ApiKey::ApiVersions, 3, 1);
    assert_eq!(decode_api_versions(&body, 3).error_code, 0);
    let rest = read_until_closed(&mut s, "after the unknown key");
    assert!(rest.is_empty(), "answered an unknown API key: {rest:02x?}");

    // Malformed headers (each payload gets a matching size prefix).
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for n in 1..8usize {
        let header = [0u8, 3, 0, 9, 0, 0, 0, 1];
        cases.push((format!("a {n}-byte header"), header[..n].to_vec()));
    }
    let mut w = Wr::default();
    w.i16(ApiKey::Metadata as i16).i16(1).i32(1).i16(i16::MAX);
    cases.push(("a client id of 32767 bytes, absent".to_string(), w.to_vec()));
    let mut w = Wr::default();
    w.i16(ApiKey::Metadata as i16)
        .i16(9)
        .i32(1)
        .i16(-1)
        .uvarint(u32::MAX);
    cases.push(("2^32-1 header tagged fields".to_string(), w.to_vec()));
    let mut w = Wr::default();
    w.i16(ApiKey::Metadata as i16)
        .i16(9)
        .i32(1)
        .i16(-1)
        .uvarint(1)
        .uvarint(0)
        .uvarint(u32::MAX);
    cases.push(("a 4 GiB header tagged field".to_string(), w.to_vec()));
    let mut w = Wr::default();
    w.i16(ApiKey::Metadata as i16)
        .i16(9)
        .i32(1)
        .i16(-1)
        .raw(&[0xff; 6]);
    cases.push(("an endless header varint".to_string(), w.to_vec()));
    for (what, payload) in cases {
        let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
        frame.extend(&payload);
        expect_closed_without_response(addr, &frame, &what);
    }
    // A client id that is not UTF-8: Kafka decodes it leniently and serves the request; this
    // broker hangs up. Either way it must survive.
    let mut w = Wr::default();
    w.i16(ApiKey::ApiVersions as i16)
        .i16(0)
        .i32(1)
        .i16(4)
        .raw(&[0xff, 0xfe, 0xc0, 0x80]);
    let payload = w.to_vec();
    let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
    frame.extend(&payload);
    send_and_drain(addr, &frame, "a client id that is not UTF-8");
    broker.check_serves();
    broker.stop();
}

#[test]
fn unsupported_versions_close_the_connection() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    // Just outside each advertised range, and far outside; ApiVersions aside (it answers).
    // Produce v0-v2 are served as legacy message sets, so its range starts at 0.
    for (api, min, max) in advertised_apis(addr) {
        if api == ApiKey::ApiVersions {
            continue;
        }
        let mut versions = vec![max + 1, i16::MAX, -1];
        if min > 0 {
            versions.push(min - 1);
        }
        for version in versions {
            expect_closed_without_response(
                addr,
                &frame_for(api, version, &[0u8; 32]),
                &format!("{api:?} v{version} (advertised {min}..={max})"),
            );
        }
    }
    broker.check_serves();
    broker.stop();
}

/// Checks an UNSUPPORTED_VERSION answer to ApiVersions: a v0 body (header v0), error 35, and
/// the supported ranges; then the connection must still serve ApiVersions v3.
fn check_unsupported_api_versions_answer(mut s: TcpStream, correlation_id: i32, what: &str) {
    let (corr, rest) = read_response(&mut s);
    assert_eq!(corr, correlation_id, "{what}: correlation id");
    // Response header v0: the body follows the correlation id directly.
    let r = decode_api_versions(&rest, 0);
    assert_eq!(r.error_code, UNSUPPORTED_VERSION, "{what}: {r:?}");
    check_api_versions_list(&r);
    assert_eq!(
        advertised(&r, ApiKey::ApiVersions),
        Some((0, 4)),
        "{what}: {r:?}"
    );
    // Kafka keeps the connection so that the client can retry with a version it knows.
    let body = encode_api_versions(&api_versions_request(), 3);
    let resp = round_trip(&mut s, ApiKey::ApiVersions, 3, correlation_id + 1, &body);
    assert_eq!(decode_api_versions(&resp, 3).error_code, 0, "{what}");
}

#[test]
fn unsupported_api_versions_version_gets_a_v0_error_answer() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    // How a newer client asks: header v2 (flexible), a v3-style body.
    for version in [5i16, 77, i16::MAX] {
        let mut s = connect(addr);
        let frame = request_frame_with_header(
            ApiKey::ApiVersions as i16,
            version,
            700 + i32::from(version),
            2,
            Some("future-client"),
            &encode_api_versions(&api_versions_request(), 3),
        );
        s.write_all(&frame).expect("send");
        check_unsupported_api_versions_answer(
            s,
            700 + i32::from(version),
            &format!("ApiVersions v{version}, header v2"),
        );
    }
    // A negative version is below the range: header v1 by kafka-protocol's table.
    let mut s = connect(addr);
    s.write_all(&request_frame_with_header(
        ApiKey::ApiVersions as i16,
        -1,
        50,
        1,
        Some("odd-client"),
        &[],
    ))
    .expect("send");
    check_unsupported_api_versions_answer(s, 50, "ApiVersions v-1, header v1");
    broker.check_serves();
    broker.stop();
}

/// ApiVersions v77 framed the way a v0-v2 client frames it: header v1 (client id, no tagged
/// fields) and an empty body. Kafka (KIP-511) answers any ApiVersions version it does not know
/// with a v0 UNSUPPORTED_VERSION response so the client can fall back.
#[test]
fn unsupported_api_versions_version_with_header_v1_gets_a_v0_error_answer() {
    let mut broker = Broker::start(&[]);
    let mut s = connect(broker.addr);
    s.write_all(&request_frame_with_header(
        ApiKey::ApiVersions as i16,
        77,
        77,
        1,
        Some("old-style-client"),
        &[],
    ))
    .expect("send");
    check_unsupported_api_versions_answer(s, 77, "ApiVersions v77, header v1");
    broker.check_serves();
    broker.stop();
}

#[test]
fn garbage_bodies_for_every_served_api() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    ensure_topic(addr, "garbage", 1);
    let apis = advertised_apis(addr);
    let mut rng = Rng::new(0x5eed_0002);

    // Empty bodies are invalid for every API here but ApiVersions (whose v0-v2 body is empty,
    // and whose v3+ body is not looked at); other APIs may have empty requests.
    for &(api, min, max) in &apis {
        for version in min..=max {
            let frame = frame_for(api, version, &[]);
            if api == ApiKey::ApiVersions || !LAYOUTS.contains(&api) {
                send_and_drain(addr, &frame, &format!("{api:?} v{version} empty body"));
            } else {
                expect_closed_without_response(
                    addr,
                    &frame,
                    &format!("{api:?} v{version} with an empty body"),
                );
            }
        }
    }

    // Array, string and bytes lengths of 0x7fffffff.
    let huge = send_huge_counts(addr, &apis);
    assert!(huge > 100, "only {huge} huge-count requests were built");

    // A legacy message set (inside a well-formed Produce v0) whose one message claims 2 GiB:
    // the request decodes, so Kafka answers it, with an error for the partition.
    let mut w = Wr::default();
    w.i16(1).i32(1000).i32(1).string("garbage").i32(1).i32(0);
    w.i32(12).i64(0).i32(i32::MAX);
    let mut s = connect(addr);
    s.write_all(&frame_for(ApiKey::Produce, 0, &w.to_vec()))
        .expect("send");
    let (corr, body) = read_response(&mut s);
    assert_eq!(corr, 99);
    let mut rd = Rd(body);
    let parse = (|| -> R<i16> {
        assert_eq!(rd.array_len_v(false)?, 1);
        assert_eq!(&*rd.string_v(false)?, "garbage");
        assert_eq!(rd.array_len_v(false)?, 1);
        assert_eq!(rd.i32()?, 0);
        let code = rd.i16()?;
        assert_eq!(rd.i64()?, -1);
        rd.end()?;
        Ok(code)
    })();
    let code = parse.unwrap_or_else(|e| panic!("Produce v0 response: {e}"));
    assert_ne!(code, 0, "a 2 GiB legacy message was accepted");
    drop(s);

    // Random bodies: answered or refused, never fatal.
    for &(api, min, max) in &apis {
        for version in min..=max {
            for _ in 0..6 {
                let len = rng.below(96) as usize;
                let frame = frame_for(api, version, &rng.nasty_bytes(len));
                send_and_drain(addr, &frame, &format!("{api:?} v{version} random body"));
            }
        }
    }

    // Every 4-byte window of valid requests overwritten with 0x7fffffff, and every byte with
    // 0xff: this reaches each length field whatever its position.
    let batch = batch(2, 10);
    let bases: Vec<(ApiKey, i16, Bytes)> = vec![
        (
            ApiKey::ApiVersions,
            3,
            encode_api_versions(&api_versions_request(), 3),
        ),
        (
            ApiKey::Metadata,
            1,
            encode_metadata(&metadata_request(Some(&["garbage"]), false), 1),
        ),
        (
            ApiKey::Metadata,
            9,
            encode_metadata(&metadata_request(Some(&["garbage"]), false), 9),
        ),
        (
            ApiKey::Produce,
            7,
            encode_produce_v7(&produce_request("garbage", &[(0, Some(batch))])),
        ),
        (
            ApiKey::ListOffsets,
            5,
            encode_list_offsets_v5(
                &ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(topic_name("garbage"))
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1)])]),
            ),
        ),
    ];
    for (api, version, body) in &bases {
        for pos in 0..body.len() {
            let mut b = body.to_vec();
            b[pos] = 0xff;
            send_and_drain(
                addr,
                &frame_for(*api, *version, &b),
                &format!("{api:?} v{version} byte {pos} = 0xff"),
            );
            if pos + 4 <= body.len() {
                let mut b = body.to_vec();
                b[pos..pos + 4].copy_from_slice(&i32::MAX.to_be_bytes());
                send_and_drain(
                    addr,
                    &frame_for(*api, *version, &b),
                    &format!("{api:?} v{version} bytes {pos}.. = 0x7fffffff"),
                );
            }
        }
        broker.check_serves();
    }
    broker.check_serves();
    broker.stop();
}

#[test]
fn produce_rejects_corrupt_and_oversized_batches() {
    let mut broker = Broker::start(&["message.max.bytes=1000", "num.partitions=2"]);
    let addr = broker.addr;
    let topic = "bad-batches";
    ensure_topic(addr, topic, 2);
    assert_eq!(latest_offsets(addr, topic, &[0, 1]), vec![0, 0]);

    let good = batch(3, 20);
    let mut bad_crc = good.to_vec();
    bad_crc[CRC_OFFSET] ^= 0x01;
    let mut bad_payload = good.to_vec();
    let last = bad_payload.len() - 1;
    bad_payload[last] ^= 0x40;
    // Kafka answers both with CORRUPT_MESSAGE, on every partition it is sent to.
    for (what, records) in [
        ("a wrong CRC", bad_crc),
        ("a flipped payload byte", bad_payload),
    ] {
        let records = Bytes::from(records);
        let results = produce(
            addr,
            &produce_request(
                topic,
                &[(0, Some(records.clone())), (1, Some(records.clone()))],
            ),
        );
        for (code, base) in &results {
            assert_eq!(*code, CORRUPT_MESSAGE, "{what}: {results:?}");
            assert_eq!(*base, -1, "{what}: {results:?}");
        }
        assert_eq!(
            latest_offsets(addr, topic, &[0, 1]),
            vec![0, 0],
            "{what}: something was written"
        );
    }

    // Larger than message.max.bytes (1000): MESSAGE_TOO_LARGE.
    let big = batch(2, 700);
    assert!(big.len() > 1000);
    let results = produce(addr, &produce_request(topic, &[(0, Some(big.clone()))]));
    assert_eq!(results, vec![(MESSAGE_TOO_LARGE, -1)], "oversized batch");
    // Even when its CRC is wrong too, and even when only the frame says so.
    let mut big_bad = big.to_vec();
    big_bad[CRC_OFFSET] ^= 0xff;
    let results = produce(
        addr,
        &produce_request(topic, &[(1, Some(Bytes::from(big_bad)))]),
    );
    assert!(
        results[0].0 != 0,
        "corrupt oversized batch accepted: {results:?}"
    );
    assert_eq!(latest_offsets(addr, topic, &[0, 1]), vec![0, 0]);

    // Other broken batches: refused (any error), nothing written.
    let mut wrong_magic = good.to_vec();
    wrong_magic[MAGIC_OFFSET] = 1;
    let mut long_length = good.to_vec();
    long_length[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
        .copy_from_slice(&(good.len() as i32 + 100).to_be_bytes());
    let mut huge_length = good.to_vec();
    huge_length[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
        .copy_from_slice(&i32::MAX.to_be_bytes());
    let mut short_length = good.to_vec();
    short_length[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&5i32.to_be_bytes());
    let mut count_mismatch = good.to_vec();
    count_mismatch[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4]
        .copy_from_slice(&1000i32.to_be_bytes());
    recompute_crc(&mut count_mismatch);
    let mut negative_count = good.to_vec();
    negative_count[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4]
        .copy_from_slice(&(-1i32).to_be_bytes());
    recompute_crc(&mut negative_count);
    let truncated = good[..good.len() - 7].to_vec();
    let header_only = good[..30].to_vec();
    let mut good_then_garbage = good.to_vec();
    good_then_garbage.extend([0xffu8; 20]);
    let mut rng = Rng::new(0x5eed_0003);
    let noise = rng.bytes(200);
    for (what, records) in [
        ("magic 1 in a v2 layout", Some(wrong_magic)),
        ("a batch length past the end", Some(long_length)),
        ("a batch length of 2 GiB", Some(huge_length)),
        ("a batch length below the header", Some(short_length)),
        (
            "a record count that disagrees (CRC fixed)",
            Some(count_mismatch),
        ),
        ("a negative record count (CRC fixed)", Some(negative_count)),
        ("a truncated batch", Some(truncated)),
        ("only 30 bytes of header", Some(header_only)),
        ("a valid batch then garbage", Some(good_then_garbage)),
        ("noise", Some(noise)),
        ("empty records", Some(Vec::new())),
        ("null records", None),
    ] {
        let records = records.map(Bytes::from);
        let results = produce(addr, &produce_request(topic, &[(0, records)]));
        assert_ne!(results[0].0, 0, "{what} was accepted: {results:?}");
        assert_eq!(
            latest_offsets(addr, topic, &[0, 1]),
            vec![0, 0],
            "{what}: something was written"
        );
    }

    // The partitions still take good batches, at offset 0.
    let results = produce(
        addr,
        &produce_request(topic, &[(0, Some(good.clone())), (1, Some(good.clone()))]),
    );
    assert_eq!(results, vec![(0, 0), (0, 0)], "good batches");
    assert_eq!(latest_offsets(addr, topic, &[0, 1]), vec![3, 3]);
    // A bad one after good ones still writes nothing.
    let mut bad_crc = good.to_vec();
    bad_crc[CRC_OFFSET + 3] ^= 0x80;
    let results = produce(
        addr,
        &produce_request(topic, &[(1, Some(Bytes::from(bad_crc)))]),
    );
    assert_eq!(results, vec![(CORRUPT_MESSAGE, -1)]);
    assert_eq!(latest_offsets(addr, topic, &[0, 1]), vec![3, 3]);
    broker.check_serves();
    broker.stop();
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    ensure_topic(addr, "pipelined", 1);
    // 50 requests of four kinds in one write, correlation ids crossing i32::MAX into the
    // negatives; nothing read until all are sent.
    let kinds: [(ApiKey, i16, Bytes); 4] = [
        (
            ApiKey::ApiVersions,
            3,
            encode_api_versions(&api_versions_request(), 3),
        ),
        (
            ApiKey::Metadata,
            9,
            encode_metadata(&metadata_request(Some(&["pipelined"]), false), 9),
        ),
        (
            ApiKey::ApiVersions,
            0,
            encode_api_versions(&api_versions_request(), 0),
        ),
        (
            ApiKey::Metadata,
            1,
            encode_metadata(&metadata_request(None, false), 1),
        ),
    ];
    let first = i32::MAX - 20;
    let plan: Vec<(usize, i32)> = (0..50)
        .map(|i| (i % 4, first.wrapping_add(i as i32)))
        .collect();
    let mut bytes = Vec::new();
    for (k, corr) in &plan {
        let (api, version, body) = &kinds[*k];
        bytes.extend(request_frame(*api as i16, *version, *corr, body));
    }
    let mut s = connect(addr);
    s.write_all(&bytes).expect("send 50 requests");
    for (k, corr) in &plan {
        let (api, version, _) = &kinds[*k];
        let body = expect_response(&mut s, *api, *version, *corr);
        match api {
            ApiKey::ApiVersions => {
                assert_eq!(decode_api_versions(&body, *version).error_code, 0)
            }
            _ => {
                let meta = decode_metadata(&body, *version);
                assert!(
                    meta.topics
                        .iter()
                        .any(|t| t.name == Some(topic_name("pipelined"))),
                    "{meta:?}"
                );
            }
        }
    }

    // 1,000 more, beyond the broker's in-flight request limit, written by one thread while
    // this one reads.
    let mut writer = s.try_clone().expect("clone socket");
    let many: Vec<u8> = (0..1000)
        .flat_map(|i| {
            request_frame(
                ApiKey::ApiVersions as i16,
                3,
                i,
                &encode_api_versions(&api_versions_request(), 3),
            )
        })
        .collect();
    let sender = thread::spawn(move || writer.write_all(&many));
    for i in 0..1000 {
        let body = expect_response(&mut s, ApiKey::ApiVersions, 3, i);
        assert_eq!(decode_api_versions(&body, 3).error_code, 0);
    }
    sender
        .join()
        .expect("writer thread")
        .expect("send 1000 requests");
    broker.check_serves();
    broker.stop();
}

/// Fetch v4 of one partition from `offset`, long-polling up to `max_wait_ms`.
fn encode_fetch_v4(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> Bytes {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let mut w = Wr::default();
    w.i32(-1)
        .i32(max_wait_ms)
        .i32(1)
        .i32(1 << 20)
        .i8(0)
        .i32(1)
        .string(topic)
        .i32(1)
        .i32(partition)
        .i64(offset)
        .i32(1 << 20);
    checked_request(w.into_bytes(), 4, &req)
}

/// Requests pipelined behind one that makes the broker hang up must not be executed: Kafka
/// reads one request at a time per connection, closes on the bad one and never gets to what
/// follows. Here a Fetch long-poll holds the response queue, an unknown API key follows (the
/// broker will hang up on it), then a Produce. The client gets the Fetch answer and a closed
/// connection, never an answer to the Produce, so it must be able to assume it did nothing.
#[test]
fn requests_behind_a_fatal_one_are_not_executed() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    ensure_topic(addr, "behind", 1);
    let mut bytes = request_frame(
        ApiKey::Fetch as i16,
        4,
        1,
        &encode_fetch_v4("behind", 0, 0, 2000),
    );
    bytes.extend(request_frame(999, 0, 2, &[]));
    bytes.extend(request_frame(
        ApiKey::Produce as i16,
        7,
        3,
        &encode_produce_v7(&produce_request("behind", &[(0, Some(batch(1, 10)))])),
    ));
    let mut s = connect(addr);
    s.write_all(&bytes).expect("send");
    let (corr, _) = read_response(&mut s);
    assert_eq!(corr, 1, "the Fetch is answered first");
    let got = read_until_closed(&mut s, "unknown key then Produce");
    assert!(got.is_empty(), "answered after the unknown key: {got:02x?}");
    assert_eq!(
        latest_offsets(addr, "behind", &[0]),
        vec![0],
        "the Produce behind the unknown API key was executed, and never answered"
    );
    broker.check_serves();
    broker.stop();
}

#[test]
fn a_thousand_idle_connections() {
    const IDLE: usize = 1000;
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    let limit = fd_limit();
    assert!(
        limit >= (IDLE + 200) as libc::rlim_t,
        "RLIMIT_NOFILE is {limit} and cannot be raised to hold {IDLE} connections"
    );
    let mut idle: Vec<TcpStream> = (0..IDLE).map(|_| connect(addr)).collect();
    // A well-behaved client is served while all of them are open.
    broker.check_serves();
    // Each of them was accepted and is served too.
    let ping = encode_api_versions(&api_versions_request(), 0);
    for (i, s) in idle.iter_mut().enumerate() {
        let body = round_trip(s, ApiKey::ApiVersions, 0, i as i32, &ping);
        assert_eq!(decode_api_versions(&body, 0).error_code, 0);
    }
    broker.check_serves();
    for (i, s) in idle.into_iter().enumerate() {
        if i % 3 == 0 {
            reset(s);
        }
    }
    broker.check_serves();
    broker.stop();
}

#[test]
fn memory_stays_bounded_under_a_barrage() {
    let mut broker = Broker::start(&[]);
    let addr = broker.addr;
    let before = broker.assert_rss_bounded("before the barrage");
    let apis = advertised_apis(addr);

    // 2 GiB, just-too-large and negative length prefixes, many times over.
    for round in 0..32 {
        for size in [i32::MAX, SOCKET_REQUEST_MAX_BYTES + 1, -1, i32::MIN] {
            expect_closed_without_response(
                addr,
                &size.to_be_bytes(),
                &format!("length prefix {size}, round {round}"),
            );
        }
    }
    // The same on connections that stay open meanwhile.
    let held: Vec<TcpStream> = (0..64)
        .map(|_| {
            let mut s = connect(addr);
            s.write_all(&i32::MAX.to_be_bytes()).expect("send");
            s
        })
        .collect();
    // Array counts of 0x7fffffff for every API and version, several rounds.
    for _ in 0..3 {
        send_huge_counts(addr, &apis);
    }
    broker.assert_rss_bounded("after huge array counts");
    // Frames of exactly socket.request.max.bytes (allowed), begun and left hanging: the
    // broker may reserve the buffer, but must not commit 100 MiB each before the bytes come.
    let hanging: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut s = connect(addr);
            let mut head = SOCKET_REQUEST_MAX_BYTES.to_be_bytes().to_vec();
            head.extend(request_frame(
                ApiKey::Produce as i16,
                7,
                1,
                &[0u8; 64 * 1024],
            ));
            s.write_all(&head).expect("send");
            s
        })
        .collect();
    // (A round trip in between; the memory is read after it.)
    broker.check_serves();
    let during = broker.assert_rss_bounded("with 16 maximal frames pending");
    drop(hanging);
    drop(held);
    broker.check_serves();
    let after = broker.assert_rss_bounded("after the barrage");
    eprintln!("broker VmRSS: before {before} KiB, during {during} KiB, after {after} KiB");
    broker.stop();
}
