//! Roles applied from the published metadata (issue 32, finding 7): a partition that could not
//! become leader (its epoch entry could not be made durable) is tried again at the next role
//! poll, not left following until the metadata changes.

use std::rc::Rc;

use crate::model::LeaderEpoch;
use crate::partition::replica_manager::test_support::{manager, Scripted};
use crate::runtime::fault::{FaultRule, FaultScope, FileOp};

#[test]
fn a_leadership_that_failed_to_start_is_tried_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    crate::runtime::block_on(async move {
        let faults = FaultScope::install(&path);
        let (manager, p) = manager(&path, Rc::new(Scripted::default())).await;
        // The new epoch's entry cannot be written once.
        faults.add_rule(
            FaultRule::on(FileOp::Fsync)
                .matching("leader-epoch-checkpoint")
                .times(1)
                .errno(libc::EIO),
        );
        let image = manager.image();
        manager.apply_roles(std::sync::Arc::clone(&image)).await;
        assert_eq!(p.leading_epoch(), None, "the first attempt failed");
        // The next role poll sees the same publication.
        manager.apply_roles(image).await;
        assert_eq!(p.leading_epoch(), Some(LeaderEpoch(0)), "led at the retry");
        let epochs = std::fs::read_to_string(p.log.dir().join("leader-epoch-checkpoint"))
            .expect("the epoch checkpoint");
        assert!(
            epochs.lines().any(|l| l.starts_with("0 ")),
            "the epoch entry is durable: {epochs:?}"
        );
        manager.stop();
    })
    .expect("executor");
}
