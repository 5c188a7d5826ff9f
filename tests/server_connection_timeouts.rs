//! Connections the broker closes for want of traffic (issue 12): Kafka's
//! `connections.max.idle.ms` for a connection with no request, and the bound on reading one
//! request for a client that stops halfway through sending it. A connection kept busy, by
//! requests or by a long-polling Fetch, stays open.
//!
//! The idle time is 1 s, ten times the gap between the busy client's requests, so a slow
//! machine does not close a busy connection. Closing is waited for at most `broker::WAIT`
//! (20 s); no assertion depends on how fast it happens.

mod broker;

use std::time::{Duration, Instant};

use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::ApiKey;

use broker::{fetch_request, Broker, Client, WAIT};

const IDLE_MS: u64 = 1000;

fn start() -> Broker {
    let idle = format!("connections.max.idle.ms={IDLE_MS}");
    Broker::start_with_args(
        &[],
        &[("RUST_LOG", "info,ringbroker::server::connection=debug")],
        &[&idle],
    )
}

fn api_versions(c: &mut Client) {
    let resp: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(resp.error_code, 0);
}

/// Polls the broker's log, at most [`WAIT`], for a line containing `needle`.
fn logged(broker: &Broker, needle: &str) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        if broker.full_log().contains(needle) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn half_a_request_does_not_hold_a_connection() {
    let broker = start();
    // Half of the size prefix, and a whole prefix with half of its body.
    let mut prefix_only = broker.client();
    prefix_only.send_raw(&[0, 0]);
    let mut half_body = broker.client();
    half_body.send_raw(&[0, 0, 0, 100, 0, 18, 0, 3]);
    assert!(prefix_only.closed_by_broker(), "half a size prefix");
    assert!(half_body.closed_by_broker(), "half a request body");
    assert!(logged(&broker, "request stalled"), "{}", broker.log());
    // The broker serves new connections as before.
    api_versions(&mut broker.client());
    broker.stop_cleanly();
}

#[test]
fn idle_connections_are_closed_and_busy_ones_are_not() {
    let broker = start();
    let mut never_spoke = broker.client();
    let mut spoke_once = broker.client();
    api_versions(&mut spoke_once);
    let mut busy = broker.client();
    // 2.5 s of requests every 100 ms: over twice the idle time, never idle for it.
    for _ in 0..25 {
        api_versions(&mut busy);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        never_spoke.closed_by_broker(),
        "a connection that sent nothing"
    );
    assert!(
        spoke_once.closed_by_broker(),
        "a connection idle after a request"
    );
    assert!(
        logged(&broker, "closing idle connection"),
        "{}",
        broker.log()
    );
    api_versions(&mut busy);
    broker.stop_cleanly();
}

/// A Fetch that waits longer than the idle time for data is in flight, not idle: it is
/// answered, and its connection stays usable.
#[test]
fn a_long_poll_is_not_idle() {
    let broker = start();
    let mut c = broker.client();
    c.create_topic("quiet", 1, &[]);
    let mut req = fetch_request("quiet", &[(0, 0)], 1 << 20, 1 << 20);
    req.max_wait_ms = 3 * IDLE_MS as i32;
    req.min_bytes = 1;
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &req);
    assert_eq!(resp.error_code, 0);
    let partition = &resp.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    api_versions(&mut c);
    broker.stop_cleanly();
}
