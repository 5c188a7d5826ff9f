//! CreateTopics v0/v1, DescribeConfigs v0 and DeleteTopics v0 over the wire (kafka-go 0.2
//! and Sarama 1.22 send them).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;

mod broker;
use broker::{Broker, Client};

fn put_str(b: &mut BytesMut, v: &str) {
    b.put_i16(v.len() as i16);
    b.put_slice(v.as_bytes());
}

fn get_str(r: &mut Bytes) -> Option<String> {
    let n = r.get_i16();
    if n < 0 {
        return None;
    }
    Some(String::from_utf8(r.split_to(n as usize).to_vec()).unwrap())
}

/// CreateTopics v0 or v1 of one topic with retention.ms=1234: (error code, error message).
fn create(c: &mut Client, version: i16, name: &str) -> (i16, Option<String>) {
    let mut b = BytesMut::new();
    b.put_i32(1);
    put_str(&mut b, name);
    b.put_i32(2);
    b.put_i16(1);
    b.put_i32(0);
    b.put_i32(1);
    put_str(&mut b, "retention.ms");
    put_str(&mut b, "1234");
    b.put_i32(5000);
    if version == 1 {
        b.put_u8(0);
    }
    let mut r = c.call_raw(ApiKey::CreateTopics, version, &b);
    assert_eq!(r.get_i32(), 1);
    assert_eq!(get_str(&mut r).as_deref(), Some(name));
    let e = r.get_i16();
    let message = if version == 1 { get_str(&mut r) } else { None };
    assert!(r.is_empty());
    (e, message)
}

#[test]
fn old_admin_versions_create_describe_and_delete_topics() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    assert_eq!(create(&mut c, 0, "adm0"), (0, None));
    assert_eq!(create(&mut c, 1, "adm1"), (0, None));
    assert_eq!(c.topic_metadata("adm0").1, 2);
    let (e, message) = create(&mut c, 1, "adm0");
    assert_eq!(e, ResponseError::TopicAlreadyExists.code());
    assert!(message.is_some());
    assert_eq!(create(&mut c, 0, "adm0").0, e);

    // DescribeConfigs v0 of topic adm0, all keys.
    let mut b = BytesMut::new();
    b.put_i32(1);
    b.put_i8(2);
    put_str(&mut b, "adm0");
    b.put_i32(-1);
    let mut r = c.call_raw(ApiKey::DescribeConfigs, 0, &b);
    r.get_i32();
    assert_eq!(r.get_i32(), 1);
    assert_eq!(r.get_i16(), 0);
    get_str(&mut r);
    assert_eq!(r.get_i8(), 2);
    assert_eq!(get_str(&mut r).as_deref(), Some("adm0"));
    let mut configs = Vec::new();
    for _ in 0..r.get_i32() {
        let name = get_str(&mut r).unwrap();
        let value = get_str(&mut r);
        let (_read_only, is_default, _sensitive) = (r.get_i8(), r.get_i8(), r.get_i8());
        configs.push((name, value, is_default));
    }
    assert!(r.is_empty());
    assert!(
        configs.contains(&("retention.ms".into(), Some("1234".into()), 0)),
        "{configs:?}"
    );
    assert!(
        configs.iter().any(|(_, _, is_default)| *is_default == 1),
        "{configs:?}"
    );

    // DeleteTopics v0: no throttle time in the answer.
    let mut b = BytesMut::new();
    b.put_i32(1);
    put_str(&mut b, "adm1");
    b.put_i32(5000);
    let mut r = c.call_raw(ApiKey::DeleteTopics, 0, &b);
    assert_eq!(r.get_i32(), 1);
    assert_eq!(get_str(&mut r).as_deref(), Some("adm1"));
    assert_eq!(r.get_i16(), 0);
    assert!(r.is_empty());
    assert_eq!(
        c.topic_metadata("adm1").0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    broker.stop_cleanly();
}
