//! A partition that could not be opened, as every shard knows it (Metadata answers it with
//! KAFKA_STORAGE_ERROR wherever it lives).

use uuid::Uuid;

/// What every shard knows of an offline partition, wherever it lives (sent over the mesh).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfflineNotice {
    pub topic: String,
    pub index: i32,
    /// The incarnation of the topic it belongs to: a new topic of the same name is not offline.
    pub topic_id: Uuid,
    pub reason: String,
}

/// The error message for partitions of `topic` that were just created but could not be
/// opened, naming them and the first one's cause; `None` if there are none.
pub fn could_not_open_message(topic: &str, offline: &[OfflineNotice]) -> Option<String> {
    let first = offline.first()?;
    let list: Vec<String> = offline.iter().map(|n| n.index.to_string()).collect();
    Some(format!(
        "topic '{topic}': partition(s) {} could not be opened and are offline (KAFKA_STORAGE_ERROR); partition {}: {}",
        list.join(", "),
        first.index,
        first.reason
    ))
}
