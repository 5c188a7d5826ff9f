//! What a leader does with the controller's answer to one of its ISR changes (Kafka's
//! AlterPartitionManager, which retries, and `Partition.handleAlterPartitionError`).
//!
//! The rule that keeps acknowledged writes: a change whose outcome is not known stays pending.
//! A pending expansion counts in the leader's maximal ISR, so the new member keeps holding the
//! HW back; if the leader forgot it while the controller committed it later, the HW would run
//! ahead of a member the controller may elect. Only a definite refusal (the controller decided
//! on its state and wrote nothing) reverts to the committed ISR; a committed answer, or a
//! newer partition state from the metadata, settles it. Anything else is sent again, with the
//! state as it is then: a controller that took over before catching up refuses on a stale
//! view, and a later attempt reaches it caught up.

use crate::model::{BrokerId, LeaderEpoch, PartitionEpoch};
use crate::protocol::ResponseError;

/// The controller's answer, as the leader got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsrAnswer {
    /// The partition as the controller has it after the change (or unchanged, when the ISR
    /// asked for was already the committed one).
    Committed {
        leader: Option<BrokerId>,
        leader_epoch: LeaderEpoch,
        isr: Vec<BrokerId>,
        partition_epoch: PartitionEpoch,
    },
    /// Refused with this Kafka error code.
    Refused(i16),
    /// No controller answered in time (the request may have been proposed and commit later).
    NoAnswer,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsrAction {
    /// The change committed: the leader takes this ISR and partition epoch.
    Apply {
        isr: Vec<BrokerId>,
        partition_epoch: PartitionEpoch,
    },
    /// Definitely not applied: back to the committed ISR (the next fetch or check may
    /// propose again).
    Revert,
    /// Unknown, or refused on a view that differs from the leader's: the change stays pending
    /// and is sent again later, unless the metadata settles it first.
    Retry,
}

/// The leader `me`, leading at `leader_epoch`, proposed a change; `answer` came back.
pub fn isr_action(answer: &IsrAnswer, me: BrokerId, leader_epoch: LeaderEpoch) -> IsrAction {
    match answer {
        IsrAnswer::Committed {
            leader,
            leader_epoch: epoch,
            isr,
            partition_epoch,
        } if *leader == Some(me) && *epoch == leader_epoch => IsrAction::Apply {
            isr: isr.clone(),
            partition_epoch: *partition_epoch,
        },
        // The partition moved on (another leader or epoch): the metadata brings it.
        IsrAnswer::Committed { .. } => IsrAction::Retry,
        // Kafka reverts on these two: the controller checked the request against its state
        // and proposed nothing. INVALID_REQUEST is ours for a malformed ISR (no leader in it).
        IsrAnswer::Refused(code)
            if *code == ResponseError::IneligibleReplica.code()
                || *code == ResponseError::OperationNotAttempted.code()
                || *code == ResponseError::InvalidRequest.code() =>
        {
            IsrAction::Revert
        }
        // FENCED_LEADER_EPOCH and INVALID_UPDATE_VERSION (a stale view, ours or the
        // controller's), REQUEST_TIMED_OUT (proposed, not committed yet), a stale broker
        // epoch, anything unexpected: not known to be final.
        IsrAnswer::Refused(_) | IsrAnswer::NoAnswer => IsrAction::Retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: BrokerId = BrokerId(1);
    const EPOCH: LeaderEpoch = LeaderEpoch(4);

    #[test]
    fn a_committed_answer_for_this_leadership_applies() {
        let answer = IsrAnswer::Committed {
            leader: Some(ME),
            leader_epoch: LeaderEpoch(4),
            isr: vec![BrokerId(1), BrokerId(2)],
            partition_epoch: PartitionEpoch(8),
        };
        assert_eq!(
            isr_action(&answer, ME, EPOCH),
            IsrAction::Apply {
                isr: vec![BrokerId(1), BrokerId(2)],
                partition_epoch: PartitionEpoch(8),
            }
        );
        let moved_on = IsrAnswer::Committed {
            leader: Some(BrokerId(2)),
            leader_epoch: LeaderEpoch(5),
            isr: vec![BrokerId(2)],
            partition_epoch: PartitionEpoch(9),
        };
        assert_eq!(isr_action(&moved_on, ME, EPOCH), IsrAction::Retry);
    }

    #[test]
    fn only_a_definite_refusal_reverts() {
        for code in [
            ResponseError::IneligibleReplica,
            ResponseError::OperationNotAttempted,
            ResponseError::InvalidRequest,
        ] {
            let answer = IsrAnswer::Refused(code.code());
            assert_eq!(isr_action(&answer, ME, EPOCH), IsrAction::Revert);
        }
    }

    #[test]
    fn an_unknown_outcome_or_a_stale_view_keeps_the_change_and_retries() {
        for answer in [
            IsrAnswer::NoAnswer,
            IsrAnswer::Refused(ResponseError::RequestTimedOut.code()),
            IsrAnswer::Refused(ResponseError::FencedLeaderEpoch.code()),
            IsrAnswer::Refused(ResponseError::InvalidUpdateVersion.code()),
            IsrAnswer::Refused(ResponseError::StaleBrokerEpoch.code()),
            IsrAnswer::Refused(ResponseError::NotController.code()),
            IsrAnswer::Refused(-1),
        ] {
            assert_eq!(
                isr_action(&answer, ME, EPOCH),
                IsrAction::Retry,
                "{answer:?}"
            );
        }
    }
}
