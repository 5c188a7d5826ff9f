//! Leader election and ISR changes of one partition, as Kafka's PartitionChangeBuilder does
//! them: keep a leader that is still valid; else the first replica in assignment order that
//! is in the ISR and acceptable (unfenced); else, only if unclean election is allowed, the
//! first acceptable replica, with the ISR reset to it; else no leader.
//!
//! A leader change bumps the leader epoch; any change bumps the partition epoch. The ISR is
//! never shrunk to nothing: the last member stays, leaderless, so that it can lead cleanly
//! again when it comes back (with unclean election off, a replica outside the ISR may lack
//! acknowledged records).

use uuid::Uuid;

use super::cluster_metadata::PartitionState;
use super::records::PartitionChange;
use crate::model::BrokerId;

/// How the leader was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// The current leader is still valid.
    Kept(BrokerId),
    /// A member of the ISR.
    Clean(BrokerId),
    /// A replica outside the ISR (`unclean.leader.election.enable`).
    Unclean(BrokerId),
    /// No acceptable replica.
    None,
}

impl Election {
    pub fn leader(self) -> Option<BrokerId> {
        match self {
            Election::Kept(b) | Election::Clean(b) | Election::Unclean(b) => Some(b),
            Election::None => None,
        }
    }
}

/// Chooses the leader given the ISR the change would leave.
pub fn elect(
    current: &PartitionState,
    target_isr: &[BrokerId],
    acceptable: impl Fn(BrokerId) -> bool,
    unclean_allowed: bool,
) -> Election {
    if let Some(l) = current.leader {
        if target_isr.contains(&l) && acceptable(l) {
            return Election::Kept(l);
        }
    }
    let in_order = current.replicas.iter().copied();
    if let Some(b) = in_order
        .clone()
        .find(|r| target_isr.contains(r) && acceptable(*r))
    {
        return Election::Clean(b);
    }
    if unclean_allowed {
        if let Some(b) = in_order.clone().find(|r| acceptable(*r)) {
            return Election::Unclean(b);
        }
    }
    Election::None
}

/// The change that moves `current` to `target_isr` with the leader [`elect`] chooses, or
/// `None` if nothing would change. `target_isr` is kept in the replicas' order and within them.
pub fn partition_change(
    topic_id: Uuid,
    partition: u32,
    current: &PartitionState,
    target_isr: &[BrokerId],
    acceptable: impl Fn(BrokerId) -> bool,
    unclean_allowed: bool,
) -> Option<PartitionChange> {
    let target: Vec<BrokerId> = current
        .replicas
        .iter()
        .copied()
        .filter(|r| target_isr.contains(r))
        .collect();
    let election = elect(current, &target, acceptable, unclean_allowed);
    let leader = election.leader();
    let isr = match election {
        Election::Unclean(b) => vec![b],
        _ if target.is_empty() => current.isr.clone(),
        _ => target,
    };
    if leader == current.leader && isr == current.isr {
        return None;
    }
    let leader_epoch = if leader == current.leader {
        current.leader_epoch
    } else {
        current.leader_epoch.next()
    };
    Some(PartitionChange {
        topic_id,
        partition,
        from_partition_epoch: current.partition_epoch,
        leader,
        isr,
        leader_epoch,
        partition_epoch: current.partition_epoch.next(),
    })
}

#[cfg(test)]
#[path = "election_tests.rs"]
mod tests;
