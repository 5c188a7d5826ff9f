//! Wakeups under CPU contention: every start prints `listening on`, every SIGTERM stops the
//! broker, and no long poll or timer overshoots its deadline by more than [`OVERSHOOT`].
//!
//! Lost wakeups showed only while other processes kept both cores busy (brokers asleep in
//! `io_cqring_wait` for minutes), so the test runs its own bounded CPU load for its whole
//! length. Each cycle: start → produce → an idle long poll (the timer must fire) → a long poll
//! woken by a produce on another connection (the wakeup must arrive) → a JoinGroup held by the
//! initial rebalance delay (the coordinator's timer) → SIGTERM.
//!
//! CI runs [`CI_CYCLES`]; `RUNTIME_SOAK_CYCLES=500 cargo test --release --test runtime_wakeups
//! -- --nocapture` is the long variant (docs/internals/runtime.md).

mod broker;

use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::FetchRequest;
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::ApiKey;
use ringbroker::protocol::batch_builder::BatchBuilder;

use broker::cpu_load::CpuLoad;
use broker::{Broker, Client};

const TOPIC: &str = "wakeups";
const PARTITIONS: i32 = 4;
const CI_CYCLES: usize = 6;
/// How late a timer or a wakeup may be, whatever the load.
const OVERSHOOT: Duration = Duration::from_secs(1);
/// The idle long poll's `max_wait_ms`.
const IDLE_WAIT_MS: i32 = 400;
/// The woken long poll's `max_wait_ms`: far longer than the wakeup may take.
const WOKEN_WAIT_MS: i32 = 20_000;
/// The coordinator holds a new group's first join this long.
const REBALANCE_DELAY_MS: u64 = 300;
/// The longest a SIGTERM may take to stop an idle broker (no connections to drain).
const STOP_WAIT: Duration = Duration::from_secs(5);

fn cycles() -> usize {
    std::env::var("RUNTIME_SOAK_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_CYCLES)
}

fn produce_one(c: &mut Client, partition: i32, value: &[u8]) -> i64 {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    b.push(None, Some(value), 1_700_000_000_000, &[]);
    let (code, base) = c.produce_records(9, 1, TOPIC, partition, b.build());
    assert_eq!(code, 0, "produce to partition {partition}");
    base
}

/// A long poll of one partition: `min_bytes` 1, so it waits for data or for `max_wait_ms`.
fn fetch_request(partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    let mut req = broker::fetch_request(TOPIC, &[(partition, offset)], 1 << 20, 1 << 20);
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = 1;
    req
}

/// Records in a fetch response's only partition (0 for none).
fn records_len(resp: &FetchResponse) -> usize {
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch error");
    p.records.as_ref().map_or(0, |r| r.len())
}

/// The member-id round of a join, retried while the coordinator loads its partitions.
fn first_join(c: &mut Client, group: &str) -> JoinGroupResponse {
    const LOAD_IN_PROGRESS: i16 = 14;
    let deadline = Instant::now() + broker::WAIT;
    loop {
        let resp: JoinGroupResponse =
            c.call(ApiKey::JoinGroup, 5, &broker::join_group_request(group, ""));
        if resp.error_code != LOAD_IN_PROGRESS || Instant::now() > deadline {
            return resp;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What one cycle measured, for the report.
#[derive(Default)]
struct Worst {
    idle_overshoot: Duration,
    wake_latency: Duration,
    join_overshoot: Duration,
    stop: Duration,
}

#[test]
fn timers_and_wakeups_fire_under_cpu_load() {
    let cycles = cycles();
    // Generous: a cycle takes about two seconds on a loaded machine.
    let _load = CpuLoad::start(2, Duration::from_secs(120 + 10 * cycles as u64));
    let delay = format!("group.initial.rebalance.delay.ms={REBALANCE_DELAY_MS}");
    let mut broker = Broker::start(&[&delay]);
    broker.client().create_topic(TOPIC, PARTITIONS, &[]);
    let mut worst = Worst::default();
    let started = Instant::now();
    for cycle in 0..cycles {
        if cycle > 0 {
            broker.spawn();
        }
        let partition = (cycle % PARTITIONS as usize) as i32;
        let mut consumer = broker.client();
        let mut producer = broker.client();
        let end = produce_one(&mut producer, partition, b"first") + 1;

        // Nothing arrives: the long poll ends on its timer.
        let asked = Instant::now();
        let resp: FetchResponse = consumer.call(
            ApiKey::Fetch,
            11,
            &fetch_request(partition, end, IDLE_WAIT_MS),
        );
        let took = asked.elapsed();
        assert_eq!(records_len(&resp), 0, "cycle {cycle}: nothing was produced");
        let overshoot = took.saturating_sub(Duration::from_millis(IDLE_WAIT_MS as u64));
        assert!(
            overshoot <= OVERSHOOT,
            "cycle {cycle}: a {IDLE_WAIT_MS} ms long poll took {took:?}:\n{}",
            broker.log()
        );
        worst.idle_overshoot = worst.idle_overshoot.max(overshoot);

        // A produce on another connection (maybe another shard) wakes the waiting fetch.
        let correlation = consumer.send(
            ApiKey::Fetch,
            11,
            &fetch_request(partition, end, WOKEN_WAIT_MS),
        );
        std::thread::sleep(Duration::from_millis(50));
        let produced = Instant::now();
        produce_one(&mut producer, partition, b"second");
        let resp: FetchResponse = consumer.receive(ApiKey::Fetch, 11, correlation);
        let woke = produced.elapsed();
        assert!(
            records_len(&resp) > 0,
            "cycle {cycle}: the fetch got no records"
        );
        assert!(
            woke <= OVERSHOOT,
            "cycle {cycle}: the long poll was woken {woke:?} after the produce:\n{}",
            broker.log()
        );
        worst.wake_latency = worst.wake_latency.max(woke);

        // A new group's first join is answered when the rebalance delay's timer fires (v5
        // first asks for a member id: MEMBER_ID_REQUIRED, then the real join).
        let group = format!("wakeups-{cycle}");
        let resp = first_join(&mut consumer, &group);
        assert_eq!(
            resp.error_code, 79,
            "cycle {cycle}: MEMBER_ID_REQUIRED first"
        );
        let asked = Instant::now();
        let resp: JoinGroupResponse = consumer.call(
            ApiKey::JoinGroup,
            5,
            &broker::join_group_request(&group, resp.member_id.as_str()),
        );
        let took = asked.elapsed();
        assert_eq!(resp.error_code, 0, "cycle {cycle}: join");
        let overshoot = took.saturating_sub(Duration::from_millis(REBALANCE_DELAY_MS));
        assert!(
            overshoot <= OVERSHOOT,
            "cycle {cycle}: a join held {REBALANCE_DELAY_MS} ms took {took:?}:\n{}",
            broker.log()
        );
        worst.join_overshoot = worst.join_overshoot.max(overshoot);

        drop(consumer);
        drop(producer);
        let asked = Instant::now();
        let status = broker.terminate();
        let took = asked.elapsed();
        let Some(status) = status else {
            panic!(
                "cycle {cycle}: SIGTERM did not stop the broker:\n{}",
                broker.log()
            );
        };
        assert!(
            status.success(),
            "cycle {cycle}: exit {status}:\n{}",
            broker.log()
        );
        assert!(
            took <= STOP_WAIT,
            "cycle {cycle}: SIGTERM took {took:?} to stop an idle broker:\n{}",
            broker.log()
        );
        worst.stop = worst.stop.max(took);
    }
    eprintln!(
        "{cycles} cycles in {:?} under load: worst idle long-poll overshoot {:?}, \
         wake latency {:?}, join overshoot {:?}, stop {:?}",
        started.elapsed(),
        worst.idle_overshoot,
        worst.wake_latency,
        worst.join_overshoot,
        worst.stop
    );
}
