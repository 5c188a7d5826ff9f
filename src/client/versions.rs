//! ApiVersions negotiation: for each API, the highest version both this client and the broker
//! speak.

use crate::util::hash::HashMap;
use std::ops::RangeInclusive;

use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::ApiKey;

use super::error::{ClientError, ClientResult};

/// The versions this client encodes and decodes, per API. The lower bounds are where the
/// fields the client relies on appeared (RecordBatch v2 in Produce v3 / Fetch v4, ...); the
/// upper bounds stop before versions that need topic ids instead of names (Fetch v13).
pub const CLIENT_VERSIONS: &[(ApiKey, RangeInclusive<i16>)] = &[
    (ApiKey::Produce, 3..=9),
    (ApiKey::Fetch, 4..=12),
    (ApiKey::Metadata, 1..=12),
    (ApiKey::ListOffsets, 1..=7),
    (ApiKey::CreateTopics, 2..=7),
    (ApiKey::InitProducerId, 0..=4),
    // Admin and consumer-group APIs (src/client/group_coordinator.rs, the CLI). OffsetFetch
    // stops before v8, which batches groups.
    (ApiKey::DeleteTopics, 1..=6),
    (ApiKey::CreatePartitions, 0..=3),
    (ApiKey::DescribeConfigs, 1..=4),
    (ApiKey::DescribeLogDirs, 1..=4),
    (ApiKey::AlterConfigs, 0..=2),
    (ApiKey::IncrementalAlterConfigs, 0..=1),
    (ApiKey::FindCoordinator, 1..=4),
    (ApiKey::OffsetFetch, 1..=7),
    (ApiKey::OffsetCommit, 2..=8),
    (ApiKey::OffsetDelete, 0..=0),
    (ApiKey::ListGroups, 0..=4),
    (ApiKey::DescribeGroups, 0..=5),
    (ApiKey::DeleteGroups, 0..=2),
    (ApiKey::JoinGroup, 0..=9),
    (ApiKey::SyncGroup, 0..=5),
    (ApiKey::Heartbeat, 0..=4),
    (ApiKey::LeaveGroup, 0..=5),
];

/// The version chosen for each API the client uses.
#[derive(Debug, Clone, Default)]
pub struct ApiVersionTable {
    chosen: HashMap<i16, i16>,
    broker: HashMap<i16, RangeInclusive<i16>>,
}

impl ApiVersionTable {
    /// Intersects the broker's ranges with [`CLIENT_VERSIONS`]. APIs the broker lacks are left
    /// out; [`ApiVersionTable::version`] reports them when used.
    pub fn negotiate(response: &ApiVersionsResponse) -> ApiVersionTable {
        let broker: HashMap<i16, RangeInclusive<i16>> = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version..=k.max_version))
            .collect();
        let mut chosen = HashMap::default();
        for (key, ours) in CLIENT_VERSIONS {
            if let Some(theirs) = broker.get(&(*key as i16)) {
                let hi = (*ours.end()).min(*theirs.end());
                let lo = (*ours.start()).max(*theirs.start());
                if lo <= hi {
                    chosen.insert(*key as i16, hi);
                }
            }
        }
        ApiVersionTable { chosen, broker }
    }

    /// The version to use for `key`.
    pub fn version(&self, key: ApiKey) -> ClientResult<i16> {
        self.chosen.get(&(key as i16)).copied().ok_or_else(|| {
            let ours = CLIENT_VERSIONS
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, r)| format!("v{}-v{}", r.start(), r.end()))
                .unwrap_or_else(|| "none".into());
            let theirs = self
                .broker
                .get(&(key as i16))
                .map(|r| format!("; the broker: v{}-v{}", r.start(), r.end()))
                .unwrap_or_else(|| "; the broker: none".into());
            ClientError::UnsupportedApi {
                api: format!("{key:?}"),
                ours: format!("{ours}{theirs}"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    fn range(key: ApiKey, min: i16, max: i16) -> ApiVersion {
        let mut v = ApiVersion::default();
        v.api_key = key as i16;
        v.min_version = min;
        v.max_version = max;
        v
    }

    #[test]
    fn picks_the_highest_common_version() {
        let mut resp = ApiVersionsResponse::default();
        resp.api_keys = vec![
            range(ApiKey::Produce, 0, 11),
            range(ApiKey::Fetch, 4, 8),
            range(ApiKey::Metadata, 13, 13),
        ];
        let t = ApiVersionTable::negotiate(&resp);
        assert_eq!(t.version(ApiKey::Produce).unwrap(), 9);
        assert_eq!(t.version(ApiKey::Fetch).unwrap(), 8);
        assert!(matches!(
            t.version(ApiKey::Metadata),
            Err(ClientError::UnsupportedApi { .. })
        ));
        assert!(t.version(ApiKey::ListOffsets).is_err());
    }
}
