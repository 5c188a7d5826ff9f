//! Where the replicas of new partitions go: replica j of partition i on broker
//! `order[(i + j) mod n]`, where `order` is the live brokers sorted by id, or, when brokers
//! have a `broker.rack`, interleaved rack by rack (one broker of each rack in turn), so that
//! consecutive brokers, and hence a partition's replicas, sit on different racks.

use std::collections::BTreeMap;

use super::error::ControllerError;
use crate::model::BrokerId;

/// The brokers in placement order (see the module comment). Brokers without a rack count
/// as one rack of their own when others have one.
pub fn placement_order(brokers: &[(BrokerId, Option<&str>)]) -> Vec<BrokerId> {
    let mut sorted: Vec<(BrokerId, Option<&str>)> = brokers.to_vec();
    sorted.sort();
    sorted.dedup_by_key(|(id, _)| *id);
    if sorted.iter().all(|(_, rack)| rack.is_none()) {
        return sorted.into_iter().map(|(id, _)| id).collect();
    }
    let mut by_rack: BTreeMap<Option<&str>, Vec<BrokerId>> = BTreeMap::new();
    for (id, rack) in &sorted {
        by_rack.entry(*rack).or_default().push(*id);
    }
    let deepest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    let mut order = Vec::with_capacity(sorted.len());
    for round in 0..deepest {
        order.extend(by_rack.values().filter_map(|ids| ids.get(round)));
    }
    order
}

/// Replicas of partitions `first..first + count` with `replication_factor` replicas each.
pub fn assign_replicas(
    order: &[BrokerId],
    first: usize,
    count: usize,
    replication_factor: i32,
) -> Result<Vec<Vec<BrokerId>>, ControllerError> {
    let n = order.len();
    let rf = usize::try_from(replication_factor)
        .ok()
        .filter(|rf| (1..=n).contains(rf))
        .ok_or(ControllerError::InvalidReplicationFactor {
            requested: replication_factor,
            live: n,
        })?;
    Ok((first..first.saturating_add(count))
        .map(|i| (0..rf).map(|j| order[(i + j) % n]).collect())
        .collect())
}

/// Checks replicas a client chose (CreateTopics/CreatePartitions with assignments): every
/// partition names `replication_factor` distinct registered brokers.
pub fn check_manual_assignment(
    assignment: &[Vec<BrokerId>],
    registered: impl Fn(BrokerId) -> bool,
) -> Result<(), ControllerError> {
    let bad = |why: String| Err(ControllerError::InvalidReplicaAssignment(why));
    let Some(first) = assignment.first() else {
        return bad("no partitions".to_string());
    };
    for (i, replicas) in assignment.iter().enumerate() {
        if replicas.is_empty() || replicas.len() != first.len() {
            return bad(format!(
                "partition {i} has {} replicas, partition 0 has {}",
                replicas.len(),
                first.len()
            ));
        }
        if let Some(dup) = replicas
            .iter()
            .enumerate()
            .find(|(k, r)| replicas[..*k].contains(r))
        {
            return bad(format!("partition {i} names broker {} twice", dup.1));
        }
        if let Some(unknown) = replicas.iter().find(|r| !registered(**r)) {
            return bad(format!("partition {i}: broker {unknown} is not registered"));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
