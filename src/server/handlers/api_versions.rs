//! ApiVersions (key 18): the versions of every API in the handler table.

use crate::protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use crate::protocol::messages::ApiKey;
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{encode, HandlerError, Request, APIS};

fn response(error_code: i16) -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    r.error_code = error_code;
    r.api_keys = APIS
        .iter()
        .map(|s| {
            let mut v = ApiVersion::default();
            v.api_key = s.key as i16;
            // Produce v0–v2 (legacy message sets) are served beside v3+.
            v.min_version =
                if s.key == ApiKey::Produce && crate::server::handlers::produce::LEGACY_SUPPORTED {
                    0
                } else {
                    s.min_version
                };
            v.max_version = s.max_version;
            v
        })
        .collect();
    r
}

pub fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    // The request body carries only the client's name and version; nothing to check.
    req.encode(&response(0))
}

/// The v0 body sent when the client asked for an ApiVersions version we do not know.
pub fn unsupported_version_body() -> Result<Bytes, HandlerError> {
    encode(
        ApiKey::ApiVersions,
        0,
        &response(ResponseError::UnsupportedVersion.code()),
    )
}
