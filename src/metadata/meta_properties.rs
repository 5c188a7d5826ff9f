//! `meta.properties`, Kafka's file in every data directory that says which cluster and
//! which node the directory belongs to (KRaft's version 1):
//! ```text
//! version=1
//! cluster.id=J8qXRwI-Qyi2G0guFTiuYw
//! node.id=1
//! ```
//! A Java properties file: `#` or `!` comments, `key=value` (or `key: value`). A directory
//! recording another cluster or node is refused rather than mixed into this one.
//! Only parsing and formatting here; the file's I/O belongs to the broker's startup.

use std::collections::BTreeMap;

use crate::model::NodeId;

pub const META_PROPERTIES_FILE: &str = "meta.properties";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: NodeId,
    /// Other keys (Kafka 3.7+ writes `directory.id`), kept so a rewrite does not drop them.
    pub other: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetaPropertiesError {
    #[error("meta.properties line {line}: expected key=value, got {text:?}")]
    Syntax { line: usize, text: String },
    #[error("meta.properties has no `{0}`")]
    Missing(&'static str),
    #[error("meta.properties version {0} is not supported (a ZooKeeper-era directory is version 0; this reads version 1)")]
    Version(String),
    #[error("meta.properties: `{key}` = {value:?} is not valid")]
    BadValue { key: &'static str, value: String },
    #[error("this data directory belongs to cluster {found}, not {expected}")]
    OtherCluster { found: String, expected: String },
    #[error("this data directory belongs to node {found}, not {expected}")]
    OtherNode { found: NodeId, expected: NodeId },
}

impl MetaPropertiesError {
    /// Kafka's code for a mismatching cluster id (INCONSISTENT_CLUSTER_ID); other problems
    /// are local and stop the broker before it talks to anyone.
    pub fn code(&self) -> Option<i16> {
        match self {
            MetaPropertiesError::OtherCluster { .. } => {
                Some(crate::protocol::ResponseError::InconsistentClusterId.code())
            }
            _ => None,
        }
    }
}

impl MetaProperties {
    pub fn parse(text: &str) -> Result<MetaProperties, MetaPropertiesError> {
        let mut keys = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let split = line.find(['=', ':']).ok_or(MetaPropertiesError::Syntax {
                line: i + 1,
                text: raw.to_string(),
            })?;
            let (key, value) = (line[..split].trim(), line[split + 1..].trim());
            keys.insert(key.to_string(), value.to_string());
        }
        let version = keys
            .remove("version")
            .ok_or(MetaPropertiesError::Missing("version"))?;
        if version != "1" {
            return Err(MetaPropertiesError::Version(version));
        }
        let cluster_id = keys
            .remove("cluster.id")
            .ok_or(MetaPropertiesError::Missing("cluster.id"))?;
        if !is_valid_cluster_id(&cluster_id) {
            return Err(MetaPropertiesError::BadValue {
                key: "cluster.id",
                value: cluster_id,
            });
        }
        let node = keys
            .remove("node.id")
            .ok_or(MetaPropertiesError::Missing("node.id"))?;
        let node_id =
            node.parse::<i32>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or(MetaPropertiesError::BadValue {
                    key: "node.id",
                    value: node,
                })?;
        Ok(MetaProperties {
            cluster_id,
            node_id: NodeId::from(node_id),
            other: keys,
        })
    }

    /// The file's text, as Kafka writes it (without its timestamp comment: no clock here).
    pub fn format(&self) -> String {
        let mut out = String::from("#\n#Written by ringbroker\n");
        let mut all: BTreeMap<&str, String> = self
            .other
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        all.insert("version", "1".to_string());
        all.insert("cluster.id", self.cluster_id.clone());
        all.insert("node.id", self.node_id.0.to_string());
        for (k, v) in all {
            out.push_str(&format!("{k}={v}\n"));
        }
        out
    }

    /// Refuses a directory of another cluster or node.
    pub fn check(&self, cluster_id: &str, node_id: NodeId) -> Result<(), MetaPropertiesError> {
        if self.cluster_id != cluster_id {
            return Err(MetaPropertiesError::OtherCluster {
                found: self.cluster_id.clone(),
                expected: cluster_id.to_string(),
            });
        }
        if self.node_id != node_id {
            return Err(MetaPropertiesError::OtherNode {
                found: self.node_id,
                expected: node_id,
            });
        }
        Ok(())
    }
}

/// Kafka's cluster ids are a UUID in URL-safe base64 without padding (22 characters), but
/// it accepts any such token; so do we: 1 to 64 characters of `[A-Za-z0-9_-]`.
pub fn is_valid_cluster_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A new cluster id from random bytes, in Kafka's form.
pub fn cluster_id_from_uuid(uuid: uuid::Uuid) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KAFKA_WRITTEN: &str = "#\n#Tue Dec 01 10:00:00 UTC 2026\nnode.id=1\n\
        directory.id=Ixv5QnIhT6-5pKlcyNsc1Q\nversion=1\ncluster.id=J8qXRwI-Qyi2G0guFTiuYw\n";

    #[test]
    fn reads_the_file_kafka_writes() {
        let m = MetaProperties::parse(KAFKA_WRITTEN).expect("parses");
        assert_eq!(m.cluster_id, "J8qXRwI-Qyi2G0guFTiuYw");
        assert_eq!(m.node_id, NodeId::from(1));
        assert_eq!(
            m.other.get("directory.id").map(String::as_str),
            Some("Ixv5QnIhT6-5pKlcyNsc1Q")
        );
    }

    #[test]
    fn format_then_parse_round_trips() {
        let m = MetaProperties {
            cluster_id: cluster_id_from_uuid(uuid::Uuid::from_u128(0xabc)),
            node_id: NodeId::from(7),
            other: BTreeMap::from([("directory.id".to_string(), "x".to_string())]),
        };
        let text = m.format();
        assert!(text.contains("version=1\n") && text.contains("node.id=7\n"));
        assert_eq!(MetaProperties::parse(&text), Ok(m));
    }

    #[test]
    fn other_separators_and_comments() {
        let m = MetaProperties::parse("! c\nversion : 1\ncluster.id=abc\n  node.id = 3 \n")
            .expect("parses");
        assert_eq!((m.cluster_id.as_str(), m.node_id), ("abc", NodeId::from(3)));
    }

    #[test]
    fn bad_files_are_refused() {
        let cases: &[(&str, MetaPropertiesError)] = &[
            (
                "version=0\nbroker.id=1\ncluster.id=a\n",
                MetaPropertiesError::Version("0".to_string()),
            ),
            (
                "cluster.id=a\nnode.id=1\n",
                MetaPropertiesError::Missing("version"),
            ),
            (
                "version=1\nnode.id=1\n",
                MetaPropertiesError::Missing("cluster.id"),
            ),
            (
                "version=1\ncluster.id=a\n",
                MetaPropertiesError::Missing("node.id"),
            ),
            (
                "version=1\ncluster.id=a\nnode.id=-1\n",
                MetaPropertiesError::BadValue {
                    key: "node.id",
                    value: "-1".to_string(),
                },
            ),
            (
                "version=1\ncluster.id=a b\nnode.id=1\n",
                MetaPropertiesError::BadValue {
                    key: "cluster.id",
                    value: "a b".to_string(),
                },
            ),
            (
                "version=1\njunk\n",
                MetaPropertiesError::Syntax {
                    line: 2,
                    text: "junk".to_string(),
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(MetaProperties::parse(text).as_ref(), Err(want), "{text:?}");
        }
    }

    #[test]
    fn another_cluster_or_node_is_refused() {
        let m = MetaProperties::parse(KAFKA_WRITTEN).expect("parses");
        assert_eq!(m.check("J8qXRwI-Qyi2G0guFTiuYw", NodeId::from(1)), Ok(()));
        let err = m
            .check("other", NodeId::from(1))
            .expect_err("other cluster");
        assert_eq!(err.code(), Some(104));
        assert!(m.check("J8qXRwI-Qyi2G0guFTiuYw", NodeId::from(2)).is_err());
    }

    #[test]
    fn generated_ids_look_like_kafkas() {
        let id = cluster_id_from_uuid(uuid::Uuid::from_u128(u128::MAX));
        assert_eq!(id.len(), 22);
        assert!(is_valid_cluster_id(&id));
    }
}
