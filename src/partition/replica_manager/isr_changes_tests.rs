//! The real replica manager and partition, with the controller replaced by a scripted
//! [`IsrChannel`]: what a leader does when an ISR change's answer is lost, refused on a stale
//! view, or definite (issue 32, findings 1 and 6).

use std::rc::Rc;

use super::*;
use crate::controller::quorum::controller_link::CommittedPartition;
use crate::controller::topic_changes::ChangeRefused;
use crate::model::{BrokerId, LeaderEpoch, PartitionEpoch};
use crate::partition::replica_manager::test_support::{manager, Scripted, LAG_MS, ME, NEW};
use crate::partition::replica_manager::ReplicaManager;
use crate::protocol::batch_builder::BatchBuilder;

/// The replica manager of broker 1 leading `t-0` (one record written), with `channel` as
/// its controller.
async fn leading(
    dir: &std::path::Path,
    channel: Rc<Scripted>,
) -> (Rc<ReplicaManager>, Rc<Partition>) {
    let (manager, p) = manager(dir, channel).await;
    let state = manager
        .image()
        .partition_by_name("t", 0)
        .expect("partition")
        .clone();
    p.lead(ME, &state, manager.leader_config(&p), 0)
        .await
        .expect("lead");
    append_one(&p, 0).await;
    (manager, p)
}

async fn append_one(p: &Partition, now_ms: i64) {
    let mut b = BatchBuilder::new(now_ms);
    b.push(None, Some(b"v"), now_ms, &[]);
    let options = p.leader_append_options(false, now_ms).expect("leads");
    p.produce(&b.build(), options).await.expect("append");
    p.after_leader_append();
}

/// Broker 2 fetches at the leader's end: caught up, so the leader proposes adding it.
fn caught_up_fetch(p: &Partition, now_ms: i64) -> IsrProposal {
    let end = p.log.offsets().written_end_offset;
    let check = p
        .check_replica_fetch(NEW, end, 0, 0, now_ms)
        .expect("fetch accepted");
    check.propose.expect("an expansion is proposed")
}

fn committed(isr: &[BrokerId], partition_epoch: i32) -> Result<CommittedPartition, ForwardError> {
    Ok(CommittedPartition {
        isr: isr.to_vec(),
        leader: Some(ME),
        leader_epoch: LeaderEpoch(0),
        partition_epoch: PartitionEpoch(partition_epoch),
    })
}

fn refused(code: ResponseError) -> Result<CommittedPartition, ForwardError> {
    Err(ForwardError::Refused(ChangeRefused {
        code: code.code(),
        message: format!("{code:?}"),
    }))
}

fn run<F: Future<Output = ()>>(test: impl FnOnce(std::path::PathBuf) -> F) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    crate::runtime::block_on(test(path)).expect("executor");
}

/// Long enough for an answer, its backoff and a retry.
async fn settle() {
    runtime::sleep(Duration::from_millis(400)).await;
}

/// Waits (bounded) until no ISR change is pending at `epoch` any more.
async fn settled(p: &Partition, epoch: LeaderEpoch) {
    for _ in 0..20 {
        if p.pending_isr_proposal(epoch).is_none() {
            return;
        }
        settle().await;
    }
}

#[test]
fn an_expansion_whose_answer_was_lost_keeps_holding_the_high_watermark() {
    run(|dir| async move {
        let channel = Rc::new(Scripted::default());
        // The AlterPartition times out (the controller may still commit it), then a retry
        // finds it committed.
        channel
            .answers
            .borrow_mut()
            .extend([Err(ForwardError::NoController(Duration::from_secs(10)))]);
        let (manager, p) = leading(&dir, Rc::clone(&channel)).await;
        let proposal = caught_up_fetch(&p, 1);
        let epoch = proposal.leader_epoch;
        let follower_end = p.log.offsets().written_end_offset;
        manager.submit_isr_change(&p, proposal.clone());
        settle().await;
        assert_eq!(
            p.pending_isr_proposal(epoch),
            Some(proposal),
            "the expansion stays pending while its outcome is unknown"
        );
        // Broker 2 falls silent past the lag while the leader takes more records: it holds
        // the HW back all the same, since the controller may have made it a member.
        append_one(&p, 2).await;
        p.advance_hw_on_timer(2 + 3 * LAG_MS);
        assert_eq!(
            p.high_watermark(),
            follower_end,
            "the HW must not pass what the possibly-added member has"
        );
        assert!(
            channel.asked.borrow().len() >= 2,
            "the change is sent again"
        );
        manager.stop();
    });
}

#[test]
fn a_retried_expansion_applies_once_committed() {
    run(|dir| async move {
        let channel = Rc::new(Scripted::default());
        channel.answers.borrow_mut().extend([
            Err(ForwardError::NoController(Duration::from_secs(10))),
            refused(ResponseError::RequestTimedOut),
            committed(&[ME, NEW], 1),
        ]);
        let (manager, p) = leading(&dir, Rc::clone(&channel)).await;
        let proposal = caught_up_fetch(&p, 1);
        manager.submit_isr_change(&p, proposal.clone());
        settled(&p, proposal.leader_epoch).await;
        assert_eq!(p.pending_isr_proposal(proposal.leader_epoch), None);
        let stats = p.replication_stats(3).expect("replicated");
        assert_eq!(stats.isr_size, 2, "the committed ISR is applied");
        assert_eq!(channel.asked.borrow().len(), 3);
        manager.stop();
    });
}

/// A controller that took over before catching up refuses on its stale view; the leader's
/// view is right and no metadata will ever bring a newer state. Sent again, it commits.
#[test]
fn a_change_refused_on_a_stale_controller_view_is_sent_again() {
    run(|dir| async move {
        let channel = Rc::new(Scripted::default());
        channel.answers.borrow_mut().extend([
            refused(ResponseError::InvalidUpdateVersion),
            committed(&[ME, NEW], 1),
        ]);
        let (manager, p) = leading(&dir, Rc::clone(&channel)).await;
        let proposal = caught_up_fetch(&p, 1);
        manager.submit_isr_change(&p, proposal.clone());
        settled(&p, proposal.leader_epoch).await;
        assert_eq!(p.pending_isr_proposal(proposal.leader_epoch), None);
        assert_eq!(p.replication_stats(3).expect("replicated").isr_size, 2);
        manager.stop();
    });
}

#[test]
fn a_definite_refusal_reverts_to_the_committed_isr() {
    run(|dir| async move {
        let channel = Rc::new(Scripted::default());
        channel
            .answers
            .borrow_mut()
            .extend([refused(ResponseError::IneligibleReplica)]);
        let (manager, p) = leading(&dir, Rc::clone(&channel)).await;
        let proposal = caught_up_fetch(&p, 1);
        manager.submit_isr_change(&p, proposal.clone());
        settle().await;
        assert_eq!(p.pending_isr_proposal(proposal.leader_epoch), None);
        assert_eq!(p.replication_stats(3).expect("replicated").isr_size, 1);
        assert_eq!(channel.asked.borrow().len(), 1, "not sent again");
        manager.stop();
    });
}
