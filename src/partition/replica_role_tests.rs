//! A partition's replica role against a real log in a temporary directory: a follower's
//! appends keep the leader's offsets and epochs, late answers are dropped, a leader's HW
//! follows its followers, divergence truncates, losing leadership answers acks=all at once,
//! a follower out of the leader's range moves to its bounds.

use std::rc::Rc;
use std::time::Duration;

use super::*;
use crate::log::{Log, LogConfig};
use crate::protocol::batch_builder::BatchBuilder;
use crate::protocol::record_batch::{self, BatchHeader};
use crate::replication::leader_state::LeaderConfig;
use crate::replication::replica_fetch::OutOfRangeAction;

const ME: BrokerId = BrokerId(1);
const OTHER: BrokerId = BrokerId(2);

/// `n` records in one batch, stamped as a leader at `epoch` would have them at `base`.
fn leader_batch(base: i64, n: usize, epoch: i32, producer: Option<(i64, i32)>) -> Vec<u8> {
    let mut b = BatchBuilder::new(1_000);
    if let Some((id, seq)) = producer {
        b = b.producer(id, 0, seq);
    }
    for i in 0..n {
        b.push(None, Some(format!("v{i}").as_bytes()), 1_000, &[]);
    }
    let mut bytes = b.build().to_vec();
    record_batch::set_base_offset(&mut bytes, base);
    record_batch::set_partition_leader_epoch(&mut bytes, epoch);
    bytes
}

fn state(leader: BrokerId, epoch: i32, isr: &[i32]) -> PartitionState {
    PartitionState {
        replicas: vec![ME, OTHER],
        isr: isr.iter().copied().map(BrokerId).collect(),
        leader: Some(leader),
        leader_epoch: LeaderEpoch(epoch),
        partition_epoch: PartitionEpoch(epoch),
        slot: 0,
    }
}

fn config(min_insync_replicas: usize) -> LeaderConfig {
    LeaderConfig {
        min_insync_replicas,
        replica_lag_time_max_ms: 30_000,
    }
}

async fn follower(dir: &std::path::Path) -> Rc<Partition> {
    let log = Log::open(dir, LogConfig::default()).await.expect("open");
    let p = Rc::new(Partition::replicated("t".into(), 0, log));
    p.follow(Some(OTHER), LeaderEpoch(3));
    p
}

fn at(offset: i64) -> FetchPosition {
    FetchPosition {
        leader: OTHER,
        leader_epoch: LeaderEpoch(3),
        fetch_offset: offset,
    }
}

/// A leader's answer with HW `high_watermark` and no log start.
fn hw(high_watermark: i64) -> LeaderMarks {
    LeaderMarks {
        high_watermark,
        log_start: -1,
    }
}

fn run<F: std::future::Future<Output = ()>>(test: impl FnOnce(std::path::PathBuf) -> F) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    crate::runtime::block_on(test(path)).expect("executor");
}

#[test]
fn a_follower_keeps_the_leaders_offsets_epochs_and_producers() {
    run(|dir| async move {
        let p = follower(&dir).await;
        let batch = leader_batch(0, 4, 3, Some((77, 0)));
        assert!(p
            .append_replicated(at(0), &batch, hw(2), 5)
            .await
            .expect("append"));
        assert_eq!(p.log.offsets().written_end_offset, 4);
        // HW = min(leader's HW, own end): consumers of a follower see only what is committed.
        assert_eq!(p.high_watermark(), 2);
        let read = p.log.read(0, 1 << 20, None).await.expect("read");
        let h = BatchHeader::parse(&read.records).expect("header");
        assert_eq!((h.base_offset, h.partition_leader_epoch), (0, 3));
        assert_eq!(p.epoch_cache().epoch_start(LeaderEpoch(3)), Some(Offset(0)));
        assert!(
            p.producers.table().entry(77).is_some(),
            "idempotent producer rebuilt"
        );
        // The leader's HW moves on with an empty answer.
        assert!(p.append_replicated(at(4), &[], hw(4), 6).await.expect("hw"));
        assert_eq!(p.high_watermark(), 4);
        // The epoch cache is on disk in Kafka's format.
        let text = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).expect("file");
        assert_eq!(text, "0\n1\n3 0\n");
    });
}

#[test]
fn a_follower_moves_its_log_start_with_the_leaders_up_to_its_hw() {
    run(|dir| async move {
        let p = follower(&dir).await;
        let batch = leader_batch(0, 6, 3, None);
        let marks = LeaderMarks {
            high_watermark: 4,
            log_start: 2,
        };
        assert!(p
            .append_replicated(at(0), &batch, marks, 5)
            .await
            .expect("append"));
        assert_eq!(p.log.offsets().log_start_offset, 2);
        // A leader's log start past this replica's HW (4) moves it to the HW only.
        let marks = LeaderMarks {
            high_watermark: 4,
            log_start: 6,
        };
        assert!(p.append_replicated(at(6), &[], marks, 6).await.expect("hw"));
        assert_eq!(p.log.offsets().log_start_offset, 4);
        // Durable: a restart keeps it (the log's checkpoint).
        drop(p);
        let log = Log::open(&dir, LogConfig::default()).await.expect("reopen");
        assert_eq!(log.offsets().log_start_offset, 4);
    });
}

#[test]
fn an_answer_the_partition_moved_on_from_is_dropped() {
    run(|dir| async move {
        let p = follower(&dir).await;
        // Asked at another offset than where the log ends now.
        let batch = leader_batch(0, 2, 3, None);
        assert!(!p
            .append_replicated(at(5), &batch, hw(2), 1)
            .await
            .expect("stale offset"));
        // Asked of the previous leader epoch.
        let mut old = at(0);
        old.leader_epoch = LeaderEpoch(2);
        assert!(!p
            .append_replicated(old, &batch, hw(2), 1)
            .await
            .expect("stale epoch"));
        // Became leader meanwhile: a late answer must never land in a leader's log.
        p.lead(ME, &state(ME, 4, &[1]), config(1), 1)
            .await
            .expect("lead");
        assert!(!p
            .append_replicated(at(0), &batch, hw(2), 1)
            .await
            .expect("now leader"));
        assert_eq!(p.log.offsets().written_end_offset, 0);
    });
}

#[test]
fn a_leaders_hw_follows_its_in_sync_follower_and_answers_acks_all() {
    run(|dir| async move {
        let p = follower(&dir).await;
        p.lead(ME, &state(ME, 4, &[1, 2]), config(2), 1)
            .await
            .expect("lead");
        assert_eq!(p.leading_epoch(), Some(LeaderEpoch(4)));
        assert_eq!(p.epoch_cache().epoch_start(LeaderEpoch(4)), Some(Offset(0)));
        let options = p.leader_append_options(false, 1).expect("leader");
        assert_eq!(options.leader_epoch, Some(4));
        p.check_acks_all()
            .expect("ISR of 2 meets min.insync.replicas 2");
        let info = p
            .produce(&leader_batch(0, 3, -1, None), options)
            .await
            .expect("append");
        p.after_leader_append();
        assert_eq!(p.high_watermark(), 0, "the follower has not fetched yet");
        let waiting = {
            let p = Rc::clone(&p);
            crate::runtime::spawn(async move {
                p.wait_acks_all(
                    Some(LeaderEpoch(4)),
                    info.last_offset.0,
                    Duration::from_secs(30),
                )
                .await
            })
        };
        crate::runtime::sleep(Duration::from_millis(5)).await;
        // The follower's fetch at 3 is its log end: everything is replicated.
        let check = p.check_replica_fetch(OTHER, 3, 4, 4, 2).expect("fetch");
        assert_eq!((check.diverging, check.high_watermark), (None, 3));
        assert_eq!(waiting.await.map_err(|e| e.code), Ok(()));
        assert_eq!(p.high_watermark(), 3);
        // A fetch with an older leader epoch is fenced, a newer one unknown.
        let fenced = p
            .check_replica_fetch(OTHER, 3, 3, 4, 3)
            .expect_err("fenced");
        assert_eq!(fenced.code, ResponseError::FencedLeaderEpoch.code());
        let unknown = p
            .check_replica_fetch(OTHER, 3, 5, 4, 3)
            .expect_err("unknown");
        assert_eq!(unknown.code, ResponseError::UnknownLeaderEpoch.code());
    });
}

#[test]
fn a_hw_move_answers_the_acks_all_waiters_it_passed_and_no_others() {
    run(|dir| async move {
        let p = follower(&dir).await;
        p.lead(ME, &state(ME, 4, &[1, 2]), config(2), 1)
            .await
            .expect("lead");
        let mut lasts = Vec::new();
        for base in [0, 3] {
            let options = p.leader_append_options(false, 1).expect("leader");
            let info = p
                .produce(&leader_batch(base, 3, -1, None), options)
                .await
                .expect("append");
            lasts.push(info.last_offset.0);
        }
        p.after_leader_append();
        let wait = |last: i64| {
            let p = Rc::clone(&p);
            crate::runtime::spawn(async move {
                p.wait_acks_all(Some(LeaderEpoch(4)), last, Duration::from_secs(30))
                    .await
            })
        };
        let (first, second) = (wait(lasts[0]), wait(lasts[1]));
        crate::runtime::sleep(Duration::from_millis(5)).await;
        assert_eq!(p.hw_waiters.borrow().len(), 2);
        // The follower has the first batch: the HW passes the first produce only.
        p.check_replica_fetch(OTHER, 3, 4, 4, 2).expect("fetch");
        assert_eq!(first.await.map_err(|e| e.code), Ok(()));
        assert_eq!(
            p.hw_waiters
                .borrow()
                .iter()
                .map(|(o, _)| *o)
                .collect::<Vec<_>>(),
            vec![lasts[1]],
            "the second produce is still waiting, not woken to wait again"
        );
        p.check_replica_fetch(OTHER, 6, 4, 4, 3).expect("fetch");
        assert_eq!(second.await.map_err(|e| e.code), Ok(()));
        assert!(p.hw_waiters.borrow().is_empty());
    });
}

#[test]
fn a_diverging_follower_is_told_where_its_epoch_ended_and_truncates() {
    run(|dir| async move {
        // The follower wrote epoch 3 up to offset 8, in two batches (truncation removes
        // whole batches).
        let p = follower(&dir).await;
        let mut batches = leader_batch(0, 5, 3, None);
        batches.extend(leader_batch(5, 3, 3, None));
        assert!(p
            .append_replicated(at(0), &batches, hw(0), 1)
            .await
            .expect("append"));
        // The new leader (here, another partition) has epoch 3 up to 5, then epoch 4.
        let leader_dir = dir.join("leader");
        std::fs::create_dir_all(&leader_dir).expect("dir");
        let leader = follower(&leader_dir).await;
        let first = leader_batch(0, 5, 3, None);
        assert!(leader
            .append_replicated(at(0), &first, hw(0), 1)
            .await
            .expect("leader log"));
        leader
            .lead(OTHER, &state(OTHER, 4, &[2]), config(1), 1)
            .await
            .expect("lead");
        let check = leader.check_replica_fetch(ME, 8, 4, 3, 2).expect("fetch");
        assert_eq!(check.diverging, Some((3, 5)));
        // The follower cuts its log to 5 and forgets the epochs past it.
        let mut asked = at(8);
        asked.leader_epoch = LeaderEpoch(3);
        assert_eq!(
            p.truncate_to_diverging_epoch(asked, 3, 5)
                .await
                .expect("truncate"),
            5
        );
        assert_eq!(p.log.offsets().written_end_offset, 5);
        assert_eq!(p.epoch_cache().latest_epoch(), Some(LeaderEpoch(3)));
        // Now the fetch matches the leader's log.
        let check = leader.check_replica_fetch(ME, 5, 4, 3, 3).expect("fetch");
        assert_eq!(check.diverging, None);
    });
}

#[test]
fn losing_leadership_answers_acks_all_at_once() {
    run(|dir| async move {
        let p = follower(&dir).await;
        p.lead(ME, &state(ME, 4, &[1, 2]), config(1), 1)
            .await
            .expect("lead");
        let options = p.leader_append_options(false, 1).expect("leader");
        let info = p
            .produce(&leader_batch(0, 1, -1, None), options)
            .await
            .expect("append");
        let waiting = {
            let p = Rc::clone(&p);
            crate::runtime::spawn(async move {
                p.wait_acks_all(
                    Some(LeaderEpoch(4)),
                    info.last_offset.0,
                    Duration::from_secs(30),
                )
                .await
            })
        };
        crate::runtime::sleep(Duration::from_millis(5)).await;
        p.follow(Some(OTHER), LeaderEpoch(5));
        let code = waiting.await.map_err(|e| e.code);
        assert_eq!(code, Err(ResponseError::NotLeaderOrFollower.code()));
        let refused = p.leader_append_options(false, 2).expect_err("follower");
        assert_eq!(refused.code, ResponseError::NotLeaderOrFollower.code());
    });
}

#[test]
fn acks_all_is_refused_before_appending_when_the_isr_is_too_small() {
    run(|dir| async move {
        let p = follower(&dir).await;
        p.log.set_config(LogConfig {
            min_insync_replicas: 2,
            ..LogConfig::default()
        });
        p.lead(ME, &state(ME, 4, &[1]), config(2), 1)
            .await
            .expect("lead");
        let refused = p.check_acks_all().expect_err("ISR 1 < min 2");
        assert_eq!(refused.code, ResponseError::NotEnoughReplicas.code());
    });
}

// A follower's out-of-range handling (`replica_manager/out_of_range.rs`): starting over at the leader's log
// start, cutting to a shorter leader's end, answers the partition has moved on from.

/// A follower of `OTHER` at epoch 3 holding offsets 0..5 of producer 77.
async fn follower_with_five(dir: &std::path::Path) -> Rc<Partition> {
    let p = follower(dir).await;
    let batch = leader_batch(0, 5, 3, Some((77, 0)));
    assert!(p
        .append_replicated(at(0), &batch, hw(5), 1)
        .await
        .expect("append"));
    p
}

#[test]
fn behind_the_leaders_log_start_the_follower_starts_over_there() {
    run(|dir| async move {
        let p = follower_with_five(&dir).await;
        p.producers.snapshot(&p.log).await.expect("snapshot");
        let action = p
            .follow_leader_log_bounds(at(5), 25, 30)
            .await
            .expect("start over");
        assert_eq!(action, OutOfRangeAction::StartOver(25));
        let o = p.log.offsets();
        assert_eq!((o.log_start_offset, o.log_end_offset), (25, 25));
        assert_eq!(p.high_watermark(), 25);
        assert_eq!(
            p.latest_epoch(),
            None,
            "no epoch of the old records is left"
        );
        assert!(
            p.producers.table().entry(77).is_none(),
            "no producer either"
        );
        // It fetches on from there: the leader's next batch lands at its own offset.
        let next = leader_batch(25, 5, 4, None);
        assert!(p
            .append_replicated(at(25), &next, hw(30), 2)
            .await
            .expect("append after starting over"));
        assert_eq!(p.log.offsets().log_end_offset, 30);
        p.log.close().await.expect("close");
        // Durable: reopened, the log, its epochs and its producers agree.
        let log = Log::open(&dir, LogConfig::default()).await.expect("reopen");
        let o = log.offsets();
        assert_eq!((o.log_start_offset, o.log_end_offset), (25, 30));
        let text = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).expect("epochs");
        assert_eq!(text, "0\n1\n4 25\n");
        let producers = crate::idempotence::append::ProducerStates::new();
        producers.load(&log, 3).await.expect("load producers");
        assert!(
            producers.table().entry(77).is_none(),
            "a stale snapshot came back"
        );
    });
}

#[test]
fn past_a_shorter_leaders_end_the_follower_cuts_to_it() {
    run(|dir| async move {
        let p = follower_with_five(&dir).await;
        let next = leader_batch(5, 3, 3, None);
        assert!(p
            .append_replicated(at(5), &next, hw(5), 2)
            .await
            .expect("append"));
        let action = p
            .follow_leader_log_bounds(at(8), 0, 5)
            .await
            .expect("truncate");
        assert_eq!(action, OutOfRangeAction::TruncateTo(5));
        assert_eq!(p.log.offsets().log_end_offset, 5);
        assert_eq!(p.high_watermark(), 5);
    });
}

#[test]
fn an_answer_the_partition_moved_on_from_changes_nothing() {
    run(|dir| async move {
        let p = follower_with_five(&dir).await;
        // Asked at 3, but the log ends at 5 now.
        let action = p
            .follow_leader_log_bounds(at(3), 25, 30)
            .await
            .expect("stale");
        assert_eq!(action, OutOfRangeAction::Refetch);
        // Within the leader's bounds: fetch again.
        let action = p
            .follow_leader_log_bounds(at(5), 2, 30)
            .await
            .expect("within");
        assert_eq!(action, OutOfRangeAction::Refetch);
        let o = p.log.offsets();
        assert_eq!((o.log_start_offset, o.log_end_offset), (0, 5));
        assert_eq!(p.latest_epoch(), Some(LeaderEpoch(3)));
    });
}

#[test]
fn a_restarted_replica_knows_its_log_start_was_committed() {
    run(|dir| async move {
        let p = follower_with_five(&dir).await;
        p.log
            .delete_records_before(3)
            .await
            .expect("delete records");
        p.log.close().await.expect("close");
        // Restarted: no HW is known yet, but it is never below the log start.
        let log = Log::open(&dir, LogConfig::default()).await.expect("reopen");
        let p = Rc::new(Partition::replicated("t".into(), 0, log));
        assert_eq!(p.high_watermark(), 3);
        // Leading with a follower still to fetch, the HW starts there, not at 0.
        p.lead(ME, &state(ME, 4, &[1, 2]), config(1), 1)
            .await
            .expect("lead");
        assert_eq!(p.high_watermark(), 3);
    });
}

#[test]
fn a_restarted_replica_starts_from_the_hw_it_checkpointed() {
    run(|dir| async move {
        let p = follower_with_five(&dir).await;
        assert_eq!(p.high_watermark(), 5);
        p.close().await.expect("close");
        let log = Log::open(&dir, LogConfig::default()).await.expect("reopen");
        let p = Rc::new(Partition::replicated("t".into(), 0, log));
        assert_eq!(p.high_watermark(), 5, "the HW of the clean close");
        p.follow(Some(OTHER), LeaderEpoch(3));
        assert_eq!(p.high_watermark(), 5, "following keeps it");
        // Housekeeping's checkpoint carries it too (a kill -9 skips the close).
        let next = leader_batch(5, 3, 3, None);
        assert!(p
            .append_replicated(at(5), &next, hw(7), 3)
            .await
            .expect("append"));
        p.note_high_watermark();
        p.log.checkpoint().await.expect("checkpoint");
        let cp = std::fs::read_to_string(dir.join("recovery-point-offset-checkpoint"))
            .expect("checkpoint file");
        assert!(cp.contains("high-watermark 7\n"), "{cp}");
    });
}

// A leader demoted while a produce waits between its leadership check and its staging (the
// records check, recompression on the blocking pool, an idempotent producer's in-flight
// batch) must not stage it: the log is a follower's now, and the batch would sit among the
// new leader's records with the old epoch (Kafka appends under the leader-ISR lock).
#[test]
fn a_produce_that_waited_past_a_demotion_is_refused_not_appended() {
    run(|dir| async move {
        let p = follower(&dir).await;
        // Records are inspected (recompressed), so a produce waits its turn to be checked.
        p.log.set_config(LogConfig {
            compression: crate::log::config::TopicCompression::Codec(
                record_batch::Compression::None,
            ),
            ..LogConfig::default()
        });
        p.lead(ME, &state(ME, 4, &[1, 2]), config(1), 1)
            .await
            .expect("lead");
        let options = p.leader_append_options(false, 1).expect("leader");
        // Another produce is being checked: this one waits behind it.
        let turn = p.checking.enter().await;
        let producing = {
            let p = Rc::clone(&p);
            crate::runtime::spawn(
                async move { p.produce(&leader_batch(0, 1, -1, None), options).await },
            )
        };
        crate::runtime::sleep(Duration::from_millis(5)).await;
        p.follow(Some(OTHER), LeaderEpoch(5));
        drop(turn);
        let result = producing.await;
        assert!(
            matches!(
                result,
                Err(crate::idempotence::append::ProduceError::LeadershipChanged)
            ),
            "{result:?}"
        );
        assert_eq!(p.log.offsets().log_end_offset, 0, "nothing was appended");
    });
}

// `min.insync.replicas` changed at runtime applies to the next acks=all produce, as Kafka reads
// the topic config on every one; it was fixed at the leadership's start.
#[test]
fn a_changed_min_insync_replicas_applies_without_a_new_leadership() {
    run(|dir| async move {
        let p = follower(&dir).await;
        p.log.set_config(LogConfig {
            min_insync_replicas: 2,
            ..LogConfig::default()
        });
        p.lead(ME, &state(ME, 4, &[1]), config(2), 1)
            .await
            .expect("lead");
        let refused = p.check_acks_all().expect_err("ISR 1 < min 2");
        assert_eq!(refused.code, ResponseError::NotEnoughReplicas.code());
        p.log.set_config(LogConfig {
            min_insync_replicas: 1,
            ..LogConfig::default()
        });
        p.check_acks_all().expect("ISR 1 >= min 1 now");
        p.log.set_config(LogConfig {
            min_insync_replicas: 2,
            ..LogConfig::default()
        });
        let refused = p.check_acks_all().expect_err("min 2 again");
        assert_eq!(refused.code, ResponseError::NotEnoughReplicas.code());
    });
}

// A fetch naming a replica id that is not a replica of the partition reads nothing: it would
// read past the HW (a follower's fetch reads to the log end). Kafka answers
// NOT_LEADER_OR_FOLLOWER ("Received fetch request from non-replica").
#[test]
fn a_fetch_from_a_broker_that_is_not_a_replica_is_refused() {
    run(|dir| async move {
        let p = follower(&dir).await;
        p.lead(ME, &state(ME, 4, &[1, 2]), config(1), 1)
            .await
            .expect("lead");
        let refused = p
            .check_replica_fetch(BrokerId(9), 0, 4, -1, 1)
            .expect_err("broker 9 is not a replica");
        assert_eq!(refused.code, ResponseError::NotLeaderOrFollower.code());
        p.check_replica_fetch(OTHER, 0, 4, -1, 1)
            .expect("the follower fetches");
    });
}
