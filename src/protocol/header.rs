//! Request and response headers, parsed by hand so that any API key (known or not) yields its
//! correlation id without panicking, and the body is left as bytes for the handler.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ApiKey;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HeaderError {
    #[error("request header truncated")]
    Truncated,
    #[error("client id is not valid UTF-8")]
    BadClientId,
    #[error("malformed tagged fields in request header")]
    BadTaggedFields,
}

/// The newest ApiVersions version whose header layout we know.
const MAX_KNOWN_API_VERSIONS_VERSION: i16 = 4;

/// A request with its header parsed and its body still encoded.
#[derive(Debug, Clone)]
pub struct RequestFrame {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    /// The known API, if the key is one.
    pub api: Option<ApiKey>,
    pub body: Bytes,
}

impl RequestFrame {
    /// Parses the header. Header v0 has no client id, v1 adds it, v2 adds tagged fields; which
    /// one applies depends on the API and version (flexible versions use v2).
    pub fn parse(mut frame: Bytes) -> Result<RequestFrame, HeaderError> {
        if frame.remaining() < 8 {
            return Err(HeaderError::Truncated);
        }
        let api_key = frame.get_i16();
        let api_version = frame.get_i16();
        let correlation_id = frame.get_i32();
        let api = ApiKey::try_from(api_key).ok();
        // Unknown APIs: assume header v1 (client id) as every client sends it; the body is
        // not looked at.
        let header_version = api.map_or(1, |k| k.request_header_version(api_version));
        let mut client_id = None;
        if header_version >= 1 {
            if frame.remaining() < 2 {
                return Err(HeaderError::Truncated);
            }
            let len = frame.get_i16();
            if len >= 0 {
                let len = len as usize;
                if frame.remaining() < len {
                    return Err(HeaderError::Truncated);
                }
                let raw = frame.split_to(len);
                client_id =
                    Some(String::from_utf8(raw.to_vec()).map_err(|_| HeaderError::BadClientId)?);
            }
        }
        // An ApiVersions request of a version we do not know is answered with the versions we
        // do (as Kafka does); its header may come without tagged fields and its body is never
        // read, so do not insist on them.
        let unknown_api_versions =
            api == Some(ApiKey::ApiVersions) && api_version > MAX_KNOWN_API_VERSIONS_VERSION;
        if header_version >= 2 && !unknown_api_versions {
            skip_tagged_fields(&mut frame)?;
        }
        Ok(RequestFrame {
            api_key,
            api_version,
            correlation_id,
            client_id,
            api,
            body: frame,
        })
    }
}

/// Reads an unsigned varint (as used by flexible versions).
pub fn get_unsigned_varint(buf: &mut Bytes) -> Option<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            return None;
        }
        let b = buf.get_u8();
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn skip_tagged_fields(buf: &mut Bytes) -> Result<(), HeaderError> {
    let count = get_unsigned_varint(buf).ok_or(HeaderError::BadTaggedFields)?;
    for _ in 0..count {
        get_unsigned_varint(buf).ok_or(HeaderError::BadTaggedFields)?;
        let size = get_unsigned_varint(buf).ok_or(HeaderError::BadTaggedFields)? as usize;
        if buf.remaining() < size {
            return Err(HeaderError::BadTaggedFields);
        }
        buf.advance(size);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};

    #[test]
    fn parses_v1_and_v2_headers() {
        // Metadata v1: header v1 (client id "ab").
        let mut f = BytesMut::new();
        f.put_i16(3);
        f.put_i16(1);
        f.put_i32(42);
        f.put_i16(2);
        f.put_slice(b"ab");
        f.put_slice(b"BODY");
        let r = RequestFrame::parse(f.freeze()).unwrap();
        assert_eq!((r.api_key, r.api_version, r.correlation_id), (3, 1, 42));
        assert_eq!(r.client_id.as_deref(), Some("ab"));
        assert_eq!(&r.body[..], b"BODY");

        // ApiVersions v3: header v2 with one tagged field.
        let mut f = BytesMut::new();
        f.put_i16(18);
        f.put_i16(3);
        f.put_i32(7);
        f.put_i16(-1);
        f.put_slice(&[1, 5, 2, 0xaa, 0xbb]);
        f.put_slice(b"X");
        let r = RequestFrame::parse(f.freeze()).unwrap();
        assert_eq!(r.client_id, None);
        assert_eq!(&r.body[..], b"X");
    }

    #[test]
    fn garbage_never_panics() {
        for len in 0..40 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = RequestFrame::parse(Bytes::from(bytes));
        }
        let mut f = BytesMut::new();
        f.put_i16(999);
        f.put_i16(0);
        f.put_i32(1);
        f.put_i16(100);
        assert_eq!(
            RequestFrame::parse(f.freeze()).unwrap_err(),
            HeaderError::Truncated
        );
    }
}
