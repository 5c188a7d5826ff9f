//! DeleteTopics (key 20): by name (v1–v5) or by name or topic id (v6). Shard 0 removes the
//! topic from the metadata; every shard then closes the logs it owned and deletes their
//! directories before the change is acknowledged, so the response comes after the data is gone.

use crate::util::hash::HashSet;

use crate::protocol::legacy_admin::delete_topics_response_v0;
use crate::protocol::messages::delete_topics_request::DeleteTopicsRequest;
use crate::protocol::messages::delete_topics_response::{
    DeletableTopicResult, DeleteTopicsResponse,
};
use crate::protocol::ResponseError;
use bytes::Bytes;
use uuid::Uuid;

use super::{str_bytes, topic_name, HandlerError, Request};
use crate::shard::messages::AdminOp;

/// One entry of the request, normalised over versions.
struct Target {
    name: Option<String>,
    id: Uuid,
}

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    // v0 is v1 without the throttle time in the response.
    let request: DeleteTopicsRequest = req.decode_as(req.version().max(1))?;
    let version = req.version();
    let targets: Vec<Target> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| Target {
                name: t.name.as_ref().map(|n| n.0.to_string()),
                id: t.topic_id,
            })
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| Target {
                name: Some(n.0.to_string()),
                id: Uuid::nil(),
            })
            .collect()
    };
    // Kafka refuses every occurrence of a topic named (or identified) twice.
    let mut seen_names = HashSet::default();
    let mut dup_names = HashSet::default();
    let mut seen_ids = HashSet::default();
    let mut dup_ids = HashSet::default();
    for t in &targets {
        if let Some(n) = &t.name {
            if !seen_names.insert(n.clone()) {
                dup_names.insert(n.clone());
            }
        } else if !t.id.is_nil() && !seen_ids.insert(t.id) {
            dup_ids.insert(t.id);
        }
    }

    let mut response = DeleteTopicsResponse::default();
    for t in &targets {
        let mut result = DeletableTopicResult::default();
        let outcome = resolve(req, t, &dup_names, &dup_ids);
        let outcome = match outcome {
            Ok((name, id)) => {
                result.name = Some(topic_name(&name));
                if version >= 6 {
                    result.topic_id = id;
                }
                req.admin(AdminOp::DeleteTopic { name: name.clone() })
                    .await
                    .map(|_| tracing::info!(topic = %name, "deleted topic"))
                    .map_err(|e| (e.code, e.message))
            }
            Err(e) => {
                // v1–v5 names are not nullable; v6 reports what the client sent.
                result.name = t
                    .name
                    .as_deref()
                    .map(topic_name)
                    .or_else(|| (version < 6).then(|| topic_name("")));
                if version >= 6 {
                    result.topic_id = t.id;
                }
                Err(e)
            }
        };
        if let Err((code, message)) = outcome {
            result.error_code = code;
            if version >= 5 {
                result.error_message = Some(str_bytes(message));
            }
        }
        response.responses.push(result);
    }
    let body = req.encode_as(version.max(1), &response)?;
    Ok(if version == 0 {
        delete_topics_response_v0(body)
    } else {
        body
    })
}

/// The topic a request entry names, with its id, or the error to report for it.
fn resolve(
    req: &Request<'_>,
    t: &Target,
    dup_names: &HashSet<String>,
    dup_ids: &HashSet<Uuid>,
) -> Result<(String, Uuid), (i16, String)> {
    let meta = req.image();
    let invalid = |m: String| (ResponseError::InvalidRequest.code(), m);
    match (&t.name, t.id.is_nil()) {
        (Some(_), false) => Err(invalid(
            "a topic must be given by name or by id, not both".to_string(),
        )),
        (None, true) => Err(invalid("neither a topic name nor a topic id".to_string())),
        (Some(name), true) => {
            if dup_names.contains(name) {
                return Err(invalid(format!("duplicate topic name {name}")));
            }
            meta.topic_by_name(name)
                .map(|m| (m.name.clone(), m.id))
                .ok_or_else(|| {
                    (
                        ResponseError::UnknownTopicOrPartition.code(),
                        format!("topic '{name}' does not exist"),
                    )
                })
        }
        (None, false) => {
            if dup_ids.contains(&t.id) {
                return Err(invalid(format!("duplicate topic id {}", t.id)));
            }
            meta.topic(t.id)
                .map(|m| (m.name.clone(), m.id))
                .ok_or_else(|| {
                    (
                        ResponseError::UnknownTopicId.code(),
                        format!("no topic has id {}", t.id),
                    )
                })
        }
    }
}
