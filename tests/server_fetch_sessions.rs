//! Fetch sessions (KIP-227) over the wire: a full fetch creates a session, incremental fetches
//! answer only the partitions with news, wrong epochs and unknown ids are refused with Kafka's
//! codes, forgotten partitions are no longer answered, epoch -1 closes the session.

use kafka_protocol::messages::fetch_request::{FetchRequest, ForgottenTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::ApiKey;
use ringbroker::protocol::batch_builder::BatchBuilder;

mod broker;
use broker::{fetch_request, topic_name, Broker, Client};

const VERSION: i16 = 12;
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

fn session_fetch(
    c: &mut Client,
    topic: &str,
    partitions: &[(i32, i64)],
    session: (i32, i32),
    forget: &[i32],
) -> FetchResponse {
    let mut req: FetchRequest = fetch_request(topic, partitions, 1 << 20, 1 << 20);
    if partitions.is_empty() {
        req.topics.clear();
    }
    req.session_id = session.0;
    req.session_epoch = session.1;
    if !forget.is_empty() {
        let mut f = ForgottenTopic::default();
        f.topic = topic_name(topic);
        f.partitions = forget.to_vec();
        req.forgotten_topics_data = vec![f];
    }
    c.call(ApiKey::Fetch, VERSION, &req)
}

/// (partition, high watermark, record bytes) of every partition answered.
fn answered(resp: &FetchResponse) -> Vec<(i32, i64, usize)> {
    resp.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            let len = p.records.as_ref().map_or(0, |r| r.len());
            (p.partition_index, p.high_watermark, len)
        })
        .collect()
}

fn produce_one(c: &mut Client, topic: &str, partition: i32) {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    b.push(None, Some(b"value"), 1_700_000_000_000, &[]);
    assert_eq!(c.produce_records(7, 1, topic, partition, b.build()).0, 0);
}

#[test]
fn incremental_fetches_answer_only_what_changed() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("sessions", 3, &[]);
    produce_one(&mut c, "sessions", 0);

    // Full fetch (id 0, epoch 0): every partition, and a new session id.
    let all = [(0, 0), (1, 0), (2, 0)];
    let full = session_fetch(&mut c, "sessions", &all, (0, 0), &[]);
    assert_eq!(full.error_code, 0);
    let id = full.session_id;
    assert_ne!(id, 0, "a full fetch at epoch 0 creates a session");
    let parts = answered(&full);
    assert_eq!(parts.len(), 3);
    assert!(parts[0].2 > 0, "partition 0's record: {parts:?}");

    // The client moved on past partition 0's record; nothing new anywhere: no partitions.
    let resp = session_fetch(&mut c, "sessions", &[(0, 1)], (id, 1), &[]);
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.session_id, id);
    assert_eq!(answered(&resp), vec![]);

    // A produce to partition 2: only partition 2 is answered.
    produce_one(&mut c, "sessions", 2);
    let resp = session_fetch(&mut c, "sessions", &[], (id, 2), &[]);
    let parts = answered(&resp);
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert_eq!((parts[0].0, parts[0].1), (2, 1));
    assert!(parts[0].2 > 0);

    // A wrong epoch (3 is next) and an unknown id are refused as Kafka does.
    let resp = session_fetch(&mut c, "sessions", &[], (id, 7), &[]);
    assert_eq!(resp.error_code, INVALID_FETCH_SESSION_EPOCH);
    assert_eq!(answered(&resp), vec![]);
    let resp = session_fetch(&mut c, "sessions", &[], (id.wrapping_add(1).max(1), 1), &[]);
    assert_eq!(resp.error_code, FETCH_SESSION_ID_NOT_FOUND);
    // The refusals did not advance the session.
    let resp = session_fetch(&mut c, "sessions", &[(2, 1)], (id, 3), &[]);
    assert_eq!(resp.error_code, 0);
    assert_eq!(answered(&resp), vec![]);

    // Forgotten partitions are not answered any more, even with new data.
    let resp = session_fetch(&mut c, "sessions", &[], (id, 4), &[1]);
    assert_eq!(resp.error_code, 0);
    produce_one(&mut c, "sessions", 1);
    produce_one(&mut c, "sessions", 0);
    let resp = session_fetch(&mut c, "sessions", &[], (id, 5), &[]);
    let parts: Vec<i32> = answered(&resp).iter().map(|p| p.0).collect();
    assert_eq!(parts, vec![0]);

    // Epoch -1 closes the session: a full, sessionless answer, then the id is unknown.
    let resp = session_fetch(&mut c, "sessions", &all, (id, -1), &[]);
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.session_id, 0);
    assert_eq!(answered(&resp).len(), 3);
    let resp = session_fetch(&mut c, "sessions", &[], (id, 6), &[]);
    assert_eq!(resp.error_code, FETCH_SESSION_ID_NOT_FOUND);
}

#[test]
fn no_sessions_without_cache_slots() {
    let broker = Broker::start(&["max.incremental.fetch.session.cache.slots=0"]);
    let mut c = broker.client();
    c.create_topic("nosessions", 1, &[]);
    let full = session_fetch(&mut c, "nosessions", &[(0, 0)], (0, 0), &[]);
    assert_eq!(full.error_code, 0);
    assert_eq!(full.session_id, 0);
    assert_eq!(answered(&full).len(), 1);
}
