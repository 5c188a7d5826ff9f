//! Old admin versions the `kafka-protocol` crate no longer knows: CreateTopics v0/v1,
//! DescribeConfigs v0 and DeleteTopics v0 (Sarama and kafka-go send them). Each request is
//! the body of a later version minus fields at its end, so it is decoded by the crate after
//! those fields are appended with the value Kafka assumes; responses are written by hand.
//!
//! ```text
//! CreateTopics v0 = v1 without validate_only (false);    v1 request = v2 request
//!   response v0: topics [name, error_code];  v1: + error_message;  (v2 adds throttle first)
//! DescribeConfigs v0 = v1 without include_synonyms (false)
//!   response v0: throttle, results [error_code, error_message, resource_type, resource_name,
//!                configs [name, value, read_only, is_default, is_sensitive]]
//! DeleteTopics v0 request = v1;  response v0 = v1 without the leading throttle_time_ms
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use super::messages::create_topics_request::CreateTopicsRequest;
use super::messages::create_topics_response::CreateTopicsResponse;
use super::messages::describe_configs_request::DescribeConfigsRequest;
use super::messages::describe_configs_response::DescribeConfigsResponse;
use super::wire::{put_count, put_nullable_string, put_string, WireError};
use super::Decodable;

/// DescribeConfigs `config_source` of a value nobody set (v0's `is_default`).
const DEFAULT_CONFIG_SOURCE: i8 = 5;

/// Decodes `body` plus `suffix` as `version` of `T`.
fn decode_extended<T: Decodable>(body: Bytes, suffix: &[u8], version: i16) -> Result<T, WireError> {
    let mut full = BytesMut::with_capacity(body.len() + suffix.len());
    full.put_slice(&body);
    full.put_slice(suffix);
    let mut full = full.freeze();
    let decoded = T::decode(&mut full, version).map_err(|e| WireError::Crate(e.to_string()))?;
    if !full.is_empty() {
        return Err(WireError::TrailingBytes(full.len()));
    }
    Ok(decoded)
}

pub fn decode_create_topics_v0_1(
    body: Bytes,
    version: i16,
) -> Result<CreateTopicsRequest, WireError> {
    match version {
        0 => decode_extended(body, &[0], 2),
        1 => decode_extended(body, &[], 2),
        v => Err(WireError::Version(v)),
    }
}

pub fn encode_create_topics_response_v0_1(response: &CreateTopicsResponse, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    put_count(&mut out, response.topics.len());
    for t in &response.topics {
        put_string(&mut out, &t.name.0);
        out.put_i16(t.error_code);
        if version >= 1 {
            // Kafka sends null on success (the crate's default is an empty string).
            let message = t.error_message.as_deref().filter(|_| t.error_code != 0);
            put_nullable_string(&mut out, message);
        }
    }
    out.freeze()
}

pub fn decode_describe_configs_v0(body: Bytes) -> Result<DescribeConfigsRequest, WireError> {
    decode_extended(body, &[0], 1)
}

pub fn encode_describe_configs_response_v0(response: &DescribeConfigsResponse) -> Bytes {
    let mut out = BytesMut::new();
    out.put_i32(response.throttle_time_ms);
    put_count(&mut out, response.results.len());
    for r in &response.results {
        out.put_i16(r.error_code);
        put_nullable_string(&mut out, r.error_message.as_deref());
        out.put_i8(r.resource_type);
        put_string(&mut out, &r.resource_name);
        put_count(&mut out, r.configs.len());
        for c in &r.configs {
            put_string(&mut out, &c.name);
            put_nullable_string(&mut out, c.value.as_deref());
            out.put_i8(i8::from(c.read_only));
            out.put_i8(i8::from(c.config_source == DEFAULT_CONFIG_SOURCE));
            out.put_i8(i8::from(c.is_sensitive));
        }
    }
    out.freeze()
}

/// DeleteTopics v0: the v1 response body without its leading throttle time.
pub fn delete_topics_response_v0(v1_body: Bytes) -> Bytes {
    v1_body.slice(4.min(v1_body.len())..)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::create_topics_response::CreatableTopicResult;
    use crate::protocol::messages::describe_configs_response::{
        DescribeConfigsResourceResult, DescribeConfigsResult,
    };
    use crate::protocol::messages::TopicName;
    use crate::protocol::StrBytes;
    use bytes::Buf;

    fn create_v0_body() -> Bytes {
        let mut b = BytesMut::new();
        put_count(&mut b, 1);
        put_string(&mut b, "t");
        b.put_i32(3);
        b.put_i16(1);
        put_count(&mut b, 0);
        put_count(&mut b, 1);
        put_string(&mut b, "retention.ms");
        put_nullable_string(&mut b, Some("1000"));
        b.put_i32(5000);
        b.freeze()
    }

    #[test]
    fn create_topics_v0_decodes_without_validate_only() {
        let r = decode_create_topics_v0_1(create_v0_body(), 0).unwrap();
        assert_eq!(&*r.topics[0].name.0, "t");
        assert_eq!(r.topics[0].num_partitions, 3);
        assert_eq!(r.topics[0].configs[0].value.as_deref(), Some("1000"));
        assert_eq!(r.timeout_ms, 5000);
        assert!(!r.validate_only);
        // v1 needs the flag: the v0 body is one byte short.
        assert!(decode_create_topics_v0_1(create_v0_body(), 1).is_err());
    }

    #[test]
    fn create_topics_responses_v0_and_v1() {
        let mut response = CreateTopicsResponse::default();
        let mut t = CreatableTopicResult::default();
        t.name = TopicName(StrBytes::from_static_str("t"));
        t.error_code = 36;
        t.error_message = Some(StrBytes::from_static_str("exists"));
        response.topics.push(t);
        let v0 = encode_create_topics_response_v0_1(&response, 0);
        assert_eq!(&v0[..], &[0, 0, 0, 1, 0, 1, b't', 0, 36]);
        let v1 = encode_create_topics_response_v0_1(&response, 1);
        assert_eq!(&v1[9..], &[0, 6, b'e', b'x', b'i', b's', b't', b's']);
    }

    #[test]
    fn describe_configs_v0_has_is_default_instead_of_a_source() {
        let mut b = BytesMut::new();
        put_count(&mut b, 1);
        b.put_i8(2);
        put_string(&mut b, "t");
        b.put_i32(-1);
        let r = decode_describe_configs_v0(b.freeze()).unwrap();
        assert_eq!(r.resources[0].resource_type, 2);
        assert!(r.resources[0].configuration_keys.is_none());

        let mut response = DescribeConfigsResponse::default();
        let mut result = DescribeConfigsResult::default();
        result.resource_type = 2;
        result.resource_name = StrBytes::from_static_str("t");
        for (name, source) in [("a", 5), ("b", 1)] {
            let mut c = DescribeConfigsResourceResult::default();
            c.name = StrBytes::from_static_str(name);
            c.value = Some(StrBytes::from_static_str("v"));
            c.config_source = source;
            result.configs.push(c);
        }
        response.results.push(result);
        let mut out = encode_describe_configs_response_v0(&response);
        out.advance(4 + 4 + 2 + 2 + 1 + 3 + 4);
        // name "a", value "v", read_only, is_default, is_sensitive.
        assert_eq!(&out[..9], &[0, 1, b'a', 0, 1, b'v', 0, 1, 0]);
        assert_eq!(&out[9..18], &[0, 1, b'b', 0, 1, b'v', 0, 0, 0]);
    }
}
