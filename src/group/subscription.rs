//! The topics a consumer subscribes to, read from its ConsumerProtocolSubscription (the member
//! metadata of the "consumer" protocol type). Only OffsetDelete and offset retention need it, so
//! it is read leniently: anything that does not parse counts as "subscribed to nothing known".

use std::collections::BTreeSet;

/// The protocol type of Kafka's consumer groups (the only one whose metadata we interpret).
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// Topics in a ConsumerProtocolSubscription (any version: the topic list always comes first,
/// right after the i16 version), or `None` when the bytes are not one.
pub fn subscribed_topics(metadata: &[u8]) -> Option<BTreeSet<String>> {
    let mut at = 2; // version
    let count = i32::from_be_bytes(metadata.get(at..at + 4)?.try_into().ok()?);
    at += 4;
    let count = usize::try_from(count).ok()?;
    let mut topics = BTreeSet::new();
    for _ in 0..count {
        let len = i16::from_be_bytes(metadata.get(at..at + 2)?.try_into().ok()?);
        at += 2;
        let len = usize::try_from(len).ok()?;
        let name = std::str::from_utf8(metadata.get(at..at + len)?).ok()?;
        at += len;
        topics.insert(name.to_string());
    }
    Some(topics)
}

#[cfg(test)]
pub(crate) fn encode_subscription(topics: &[&str]) -> bytes::Bytes {
    use bytes::BufMut;
    let mut buf = bytes::BytesMut::new();
    buf.put_i16(1);
    buf.put_i32(topics.len() as i32);
    for t in topics {
        buf.put_i16(t.len() as i16);
        buf.put_slice(t.as_bytes());
    }
    buf.put_i32(-1); // user data: null
    buf.put_i32(0); // owned partitions (v1)
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_topics() {
        let topics = subscribed_topics(&encode_subscription(&["a", "b"])).unwrap();
        assert_eq!(topics.into_iter().collect::<Vec<_>>(), vec!["a", "b"]);
    }

    #[test]
    fn garbage_is_none() {
        assert_eq!(subscribed_topics(b""), None);
        assert_eq!(subscribed_topics(&[0, 0, 0, 0, 0, 5, 0, 1]), None);
        assert_eq!(subscribed_topics(&[0, 0, 0xff, 0xff, 0xff, 0xff]), None);
    }
}
