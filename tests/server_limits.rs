//! Bounded resources against the real broker binary: connection limits (`max.connections`,
//! `max.connections.per.ip` and its overrides), many held connections, a consumer that never reads its socket,
//! and a flood of tiny pipelined requests. Throughout, another client must keep being served
//! and the broker's resident memory must stay under a stated bound. Every loop is bounded in
//! count and every wait in time; no test asserts on elapsed time.

mod broker;

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::{ApiKey, BrokerId, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use ringbroker::protocol::batch_builder::BatchBuilder;

use broker::{topic_name, Broker, WAIT};

/// Connections the many-connections test holds (scaled down to the fd limit if need be).
const HELD_CONNECTIONS: usize = 10_000;
/// Broker resident memory allowed while holding them. Measured: see docs/operations.md,
/// "Bounded resources"; the bound leaves about 2x margin.
const RSS_WITH_HELD_CONNECTIONS_KIB: u64 = 160 * 1024;
/// Broker resident memory allowed under a non-reading consumer or a request flood (measured
/// peaks about 50 MiB; before fetches were taken one at a time per connection, the
/// non-reading consumer grew the broker to over 8 GiB).
const RSS_UNDER_ABUSE_KIB: u64 = 128 * 1024;

fn raise_fd_limit(want: libc::rlim_t) -> libc::rlim_t {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    lim.rlim_cur
}

fn rss_kib(broker: &Broker) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", broker.pid()))
        .expect("read /proc/<broker>/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<broker>/status")
}

/// One request frame (size prefix included).
fn frame<Req: Encodable>(key: ApiKey, version: i16, correlation: i32, request: &Req) -> Vec<u8> {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = correlation;
    header.client_id = Some(StrBytes::from_static_str("server-limits"));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, key.request_header_version(version))
        .expect("encode header");
    request.encode(&mut body, version).expect("encode request");
    let mut out = (body.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn api_versions_frame(correlation: i32) -> Vec<u8> {
    frame(
        ApiKey::ApiVersions,
        0,
        correlation,
        &ApiVersionsRequest::default(),
    )
}

/// Reads one response frame (without its size prefix).
fn read_response(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let size = i32::from_be_bytes(size);
    if !(0..64 << 20).contains(&size) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "bad size"));
    }
    let mut body = vec![0u8; size as usize];
    stream.read_exact(&mut body)?;
    Ok(body)
}

fn connect_from(source: IpAddr, addr: SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .expect("socket");
    socket
        .bind(&SocketAddr::new(source, 0).into())
        .expect("bind the source address");
    socket
        .connect_timeout(&addr.into(), WAIT)
        .expect("connect to the broker");
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    stream.set_write_timeout(Some(WAIT)).expect("write timeout");
    stream
}

/// True if the broker answers an ApiVersions on this connection; false if it closed it.
fn is_served(stream: &mut TcpStream) -> bool {
    if stream.write_all(&api_versions_frame(7)).is_err() {
        return false;
    }
    read_response(stream).is_ok()
}

/// Produce one batch (acks=1) to partition 0 of `topic` and fetch it back.
fn produce_fetch_round_trip(addr: SocketAddr, topic: &str, tag: u64) {
    let mut c = broker::Client::connect(addr);
    let mut b = BatchBuilder::new(1_700_000_000_000);
    let value = format!("round trip {tag}");
    b.push(None, Some(value.as_bytes()), 1_700_000_000_000, &[]);
    let (code, offset) = c.produce_records(9, 1, topic, 0, b.build());
    assert_eq!(code, 0, "produce while the broker is under load");

    let resp = fetch(&mut c, topic, offset, 1 << 20);
    let part = &resp.responses[0].partitions[0];
    assert_eq!(part.error_code, 0, "fetch while the broker is under load");
    let records = part.records.clone().unwrap_or_default();
    assert!(
        !records.is_empty(),
        "fetch at {offset} returned no records while the broker is under load"
    );
}

fn fetch_request(topic: &str, offset: i64, max_bytes: i32) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.fetch_offset = offset;
    p.partition_max_bytes = max_bytes;
    let mut t = FetchTopic::default();
    t.topic = topic_name(topic);
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = max_bytes;
    req.topics = vec![t];
    req
}

fn fetch(c: &mut broker::Client, topic: &str, offset: i64, max_bytes: i32) -> FetchResponse {
    c.call(ApiKey::Fetch, 11, &fetch_request(topic, offset, max_bytes))
}

/// Opens connections to `addr` until `count` are held; returns them.
fn open_connections(addr: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(count);
    for i in 0..count {
        let s = TcpStream::connect_timeout(&addr, WAIT)
            .unwrap_or_else(|e| panic!("connection {i} of {count}: {e}"));
        s.set_read_timeout(Some(WAIT)).expect("read timeout");
        s.set_write_timeout(Some(WAIT)).expect("write timeout");
        held.push(s);
    }
    held
}

#[test]
fn ten_thousand_held_connections_while_another_client_is_served() {
    // Each end of a connection costs one descriptor in its own process (test, broker); the
    // broker inherits this limit.
    let limit = raise_fd_limit(HELD_CONNECTIONS as libc::rlim_t + 1_000);
    let count = HELD_CONNECTIONS.min((limit as usize).saturating_sub(1_000));
    if count < HELD_CONNECTIONS {
        eprintln!("RLIMIT_NOFILE is {limit}: holding {count} connections, not {HELD_CONNECTIONS}");
    }
    let broker = Broker::start(&[]);
    broker.client().create_topic("held", 1, &[]);
    produce_fetch_round_trip(broker.addr, "held", 0);
    let before = rss_kib(&broker);

    let mut held = open_connections(broker.addr, count);
    // One request on each, all written before any answer is read, proves that the broker
    // accepted and serves every one of them.
    for (i, s) in held.iter_mut().enumerate() {
        s.write_all(&api_versions_frame(i as i32))
            .unwrap_or_else(|e| panic!("request on connection {i}: {e}"));
    }
    for (i, s) in held.iter_mut().enumerate() {
        read_response(s).unwrap_or_else(|e| panic!("answer on connection {i}: {e}"));
    }
    for round in 1..=20 {
        produce_fetch_round_trip(broker.addr, "held", round);
    }
    let during = rss_kib(&broker);
    drop(held);
    produce_fetch_round_trip(broker.addr, "held", 99);
    eprintln!(
        "broker VmRSS with {count} connections: before {before} KiB, holding {during} KiB ({} bytes per connection)",
        (during.saturating_sub(before)) * 1024 / count as u64
    );
    assert!(
        during < RSS_WITH_HELD_CONNECTIONS_KIB,
        "broker resident memory {during} KiB holding {count} connections exceeds {RSS_WITH_HELD_CONNECTIONS_KIB} KiB"
    );
    broker.stop_cleanly();
}

/// `count` connections, each answering an ApiVersions. The broker may not yet have counted
/// out the connections the harness opened to see it listening: until it has, retry.
fn hold_served(count: usize, connect: impl Fn() -> TcpStream) -> Vec<TcpStream> {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut held: Vec<TcpStream> = (0..count).map(|_| connect()).collect();
        for s in &held {
            s.set_read_timeout(Some(WAIT)).expect("read timeout");
        }
        let served = held.iter_mut().map(is_served).filter(|ok| *ok).count();
        if served == count {
            return held;
        }
        assert!(
            Instant::now() < deadline,
            "only {served} of {count} connections served"
        );
        drop(held);
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The connection the broker closes: an ApiVersions on it gets no answer.
fn assert_closed_by_broker(stream: &mut TcpStream, what: &str) {
    assert!(!is_served(stream), "{what}: the broker kept the connection");
}

#[test]
fn max_connections_per_ip_closes_the_extra_connection_only() {
    let broker = Broker::start(&[
        "max.connections.per.ip=50",
        "max.connections.per.ip.overrides=127.0.0.2:5,127.0.0.3:80",
    ]);
    let local: IpAddr = [127, 0, 0, 1].into();
    let other: IpAddr = [127, 0, 0, 4].into();
    let mut first = hold_served(50, || connect_from(local, broker.addr));
    let mut extra = connect_from(local, broker.addr);
    assert_closed_by_broker(&mut extra, "the 51st connection from 127.0.0.1");
    // Another address is not affected, and the held connections still work.
    let mut others: Vec<TcpStream> = (0..10).map(|_| connect_from(other, broker.addr)).collect();
    for (i, s) in others.iter_mut().enumerate() {
        assert!(is_served(s), "connection {i} from {other}");
    }
    assert!(is_served(&mut first[0]), "a held connection from {local}");
    // Closing one gives its place back (the broker notices the close asynchronously).
    drop(first.pop());
    let deadline = Instant::now() + WAIT;
    loop {
        let mut again = connect_from(local, broker.addr);
        if is_served(&mut again) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no place freed for {local} after a close"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = broker.log();
    assert!(
        log.contains("max.connections.per.ip (50) reached for 127.0.0.1"),
        "no warning naming the limit:\n{log}"
    );

    // max.connections.per.ip.overrides: a lower and a higher limit for two addresses (the
    // refusal warnings are rate-limited per shard, so only behaviour is checked here).
    let reduced: IpAddr = [127, 0, 0, 2].into();
    let raised: IpAddr = [127, 0, 0, 3].into();
    let _reduced_held = hold_served(5, || connect_from(reduced, broker.addr));
    let mut extra = connect_from(reduced, broker.addr);
    assert_closed_by_broker(&mut extra, "the 6th connection from 127.0.0.2 (override 5)");
    let mut raised_held = hold_served(80, || connect_from(raised, broker.addr));
    let mut extra = connect_from(raised, broker.addr);
    assert_closed_by_broker(
        &mut extra,
        "the 81st connection from 127.0.0.3 (override 80)",
    );
    assert!(is_served(&mut raised_held[79]), "the 80th from {raised}");
    assert!(
        is_served(&mut first[0]),
        "the default still applies to {local}"
    );
    broker.stop_cleanly();
}

#[test]
fn max_connections_counts_across_shards() {
    let broker = Broker::start(&["max.connections=20"]);
    // Twenty connections spread over both shards by the kernel; each is served.
    let held = hold_served(20, || {
        TcpStream::connect_timeout(&broker.addr, WAIT).expect("connect")
    });
    let mut extra = TcpStream::connect_timeout(&broker.addr, WAIT).expect("connect");
    extra.set_read_timeout(Some(WAIT)).expect("read timeout");
    assert_closed_by_broker(&mut extra, "the 21st connection");
    drop(held);
    let deadline = Instant::now() + WAIT;
    while !is_served(&mut TcpStream::connect_timeout(&broker.addr, WAIT).expect("connect")) {
        assert!(
            Instant::now() < deadline,
            "no place freed after closing all"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(broker.log().contains("max.connections (20) reached"));
    broker.stop_cleanly();
}

/// Fills partition 0 of `topic` with `batches` batches of about `batch_bytes` each.
fn fill_partition(broker: &Broker, topic: &str, batches: usize, batch_bytes: usize) {
    let mut c = broker.client();
    let value = vec![b'x'; batch_bytes / 8];
    for i in 0..batches {
        let mut b = BatchBuilder::new(1_700_000_000_000);
        for _ in 0..8 {
            b.push(None, Some(&value), 1_700_000_000_000 + i as i64, &[]);
        }
        assert_eq!(c.produce_records(9, 1, topic, 0, b.build()).0, 0);
    }
}

#[test]
fn a_consumer_that_never_reads_does_not_grow_the_broker() {
    let broker = Broker::start(&[]);
    broker.client().create_topic("unread", 1, &[]);
    // 16 MiB of data; each fetch below may return all of it.
    fill_partition(&broker, "unread", 64, 256 << 10);
    let before = rss_kib(&broker);

    // Pipelined fetches of everything, never read: responses pile up in the broker unless it
    // stops reading requests it cannot answer.
    let mut greedy = TcpStream::connect_timeout(&broker.addr, WAIT).expect("connect");
    greedy
        .set_write_timeout(Some(Duration::from_secs(2)))
        .expect("write timeout");
    let request = frame(ApiKey::Fetch, 11, 1, &fetch_request("unread", 0, 64 << 20));
    let mut written = 0;
    for _ in 0..1_000 {
        // A blocked write (the broker stopped reading) ends the flood.
        if greedy.write_all(&request).is_err() {
            break;
        }
        written += 1;
    }
    let mut peak = before;
    for round in 0..20 {
        produce_fetch_round_trip(broker.addr, "unread", round);
        peak = peak.max(rss_kib(&broker));
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "broker VmRSS with an unread consumer ({written} fetches of 16 MiB sent): before {before} KiB, peak {peak} KiB"
    );
    assert!(
        peak < RSS_UNDER_ABUSE_KIB,
        "broker resident memory {peak} KiB under a non-reading consumer exceeds {RSS_UNDER_ABUSE_KIB} KiB"
    );
    drop(greedy);
    produce_fetch_round_trip(broker.addr, "unread", 99);
    broker.stop_cleanly();
}

#[test]
fn a_flood_of_tiny_requests_is_served_in_bounded_memory() {
    const CONNECTIONS: usize = 4;
    const REQUESTS_PER_CONNECTION: usize = 50_000;
    let broker = Broker::start(&[]);
    broker.client().create_topic("flood", 1, &[]);
    let before = rss_kib(&broker);
    let addr = broker.addr;
    let floods: Vec<_> = (0..CONNECTIONS)
        .map(|c| {
            std::thread::spawn(move || {
                let stream = TcpStream::connect_timeout(&addr, WAIT).expect("connect");
                stream.set_read_timeout(Some(WAIT)).expect("read timeout");
                stream.set_write_timeout(Some(WAIT)).expect("write timeout");
                let mut reader = stream.try_clone().expect("clone");
                let answers = std::thread::spawn(move || {
                    let mut n = 0usize;
                    while n < REQUESTS_PER_CONNECTION {
                        if read_response(&mut reader).is_err() {
                            break;
                        }
                        n += 1;
                    }
                    n
                });
                let mut writer = std::io::BufWriter::with_capacity(64 << 10, stream);
                let api_versions = api_versions_frame(1);
                let metadata = frame(ApiKey::Metadata, 9, 2, &MetadataRequest::default());
                for i in 0..REQUESTS_PER_CONNECTION {
                    let f = if (i + c) % 4 == 0 {
                        &metadata
                    } else {
                        &api_versions
                    };
                    if writer.write_all(f).is_err() {
                        break;
                    }
                }
                let _ = writer.flush();
                answers.join().expect("reader thread")
            })
        })
        .collect();
    // And one connection that floods without ever reading: the broker must stop reading it.
    let mut mute = TcpStream::connect_timeout(&addr, WAIT).expect("connect");
    mute.set_write_timeout(Some(Duration::from_secs(2)))
        .expect("write timeout");
    let api_versions = api_versions_frame(3);
    let mut mute_written = 0;
    while mute_written < CONNECTIONS * REQUESTS_PER_CONNECTION
        && mute.write_all(&api_versions).is_ok()
    {
        mute_written += 1;
    }
    let mut peak = before;
    for round in 0..20 {
        produce_fetch_round_trip(addr, "flood", round);
        peak = peak.max(rss_kib(&broker));
        std::thread::sleep(Duration::from_millis(50));
    }
    let answered: usize = floods
        .into_iter()
        .map(|h| h.join().expect("flood thread"))
        .sum();
    peak = peak.max(rss_kib(&broker));
    eprintln!(
        "broker VmRSS under {answered} pipelined tiny requests and {mute_written} never read: before {before} KiB, peak {peak} KiB"
    );
    drop(mute);
    assert_eq!(
        answered,
        CONNECTIONS * REQUESTS_PER_CONNECTION,
        "every request answered"
    );
    assert!(
        peak < RSS_UNDER_ABUSE_KIB,
        "broker resident memory {peak} KiB under a request flood exceeds {RSS_UNDER_ABUSE_KIB} KiB"
    );
    produce_fetch_round_trip(addr, "flood", 99);
    broker.stop_cleanly();
}
