//! The bytes of a [`MetadataSnapshot`]: JSON in a versioned envelope
//! (`{"version":1,"snapshot":{...}}`), like the metadata records. The same bytes are a Raft
//! snapshot (`controller::snapshot`, which also checks the invariants) and the broker's stored
//! copy (`store.rs`).

use serde::{Deserialize, Serialize};

use super::cluster_state::MetadataSnapshot;

/// The envelope version written by [`encode`]; [`decode`] refuses others.
pub const SNAPSHOT_FORMAT_VERSION: u16 = 1;

#[derive(Serialize)]
struct EnvelopeRef<'a> {
    version: u16,
    snapshot: &'a MetadataSnapshot,
}

#[derive(Deserialize)]
struct Envelope {
    version: u16,
    snapshot: serde_json::Value,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotCodecError {
    #[error("metadata snapshot is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("metadata snapshot format version {0} is not supported (this build reads {SNAPSHOT_FORMAT_VERSION})")]
    Version(u16),
}

/// (Plain data with string map keys: an error here would be a bug in a serde derive, but it is
/// passed on rather than hidden.)
pub fn encode(snapshot: &MetadataSnapshot) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&EnvelopeRef {
        version: SNAPSHOT_FORMAT_VERSION,
        snapshot,
    })
}

pub fn decode(bytes: &[u8]) -> Result<MetadataSnapshot, SnapshotCodecError> {
    let envelope: Envelope = serde_json::from_slice(bytes)?;
    if envelope.version != SNAPSHOT_FORMAT_VERSION {
        return Err(SnapshotCodecError::Version(envelope.version));
    }
    Ok(serde_json::from_value(envelope.snapshot)?)
}
