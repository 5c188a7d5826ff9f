//! The log's append role: waiting until the log takes appends, staging a producer's batches
//! (offsets assigned, the leader epoch stamped) or a follower's (the leader's offsets kept),
//! and starting the group-commit task that writes them.

use std::rc::Rc;

use super::commit;
use super::error::LogError;
use super::log_state::AppendWaiter;
use super::partition_log::{AppendInfo, AppendOptions, Log, StagedAppend};
use super::stage::{check_continues, stage, validate_all, Offsets};
use crate::protocol::record_batch::BatchHeader;
use crate::runtime;
use crate::util::local_oneshot;

impl Log {
    /// Appends the record batches in `records` (one or more, as a producer sent them).
    ///
    /// Every batch is validated (magic 2, lengths, CRC32C, record count) before anything is
    /// staged; one bad batch rejects them all. Offsets are assigned by rewriting each batch's
    /// base offset; LogAppendTime logs also get the broker's time. Returns once the batches
    /// are in the files (and fsynced, when `durable` or the flush policy asks).
    pub async fn append(
        &self,
        records: &[u8],
        options: AppendOptions,
    ) -> Result<AppendInfo, LogError> {
        self.wait_appendable().await?;
        self.stage_append(records, options)?.written().await
    }

    /// Waits until appends may be staged (no truncation or close holds the log). A caller
    /// that must decide synchronously whether to append (idempotent producers) awaits this,
    /// then decides and calls [`Log::stage_append`] with no `.await` in between.
    pub async fn wait_appendable(&self) -> Result<(), LogError> {
        loop {
            let wait_idle = {
                let mut st = self.inner.state.borrow_mut();
                if st.closed {
                    return Err(LogError::Closed(self.inner.dir.clone()));
                }
                st.check_online(&self.inner.dir)?;
                if st.exclusive {
                    let (tx, rx) = local_oneshot::channel();
                    st.idle_waiters.push(tx);
                    Some(rx)
                } else {
                    None
                }
            };
            match wait_idle {
                Some(rx) => {
                    rx.await;
                }
                None => return Ok(()),
            }
        }
    }

    /// Validates and stages `records` now, without awaiting: offsets are assigned on return.
    /// The write completes (or fails and is rolled back) when the returned [`StagedAppend`]
    /// says so; appends staged meanwhile are group-committed with it. Fails with `Busy` if
    /// called while truncation or close holds the log (see [`Log::wait_appendable`]).
    pub fn stage_append(
        &self,
        records: &[u8],
        options: AppendOptions,
    ) -> Result<StagedAppend, LogError> {
        self.stage_with(records, options, Offsets::Assign)
    }

    /// A follower's append: the leader's batches as they are (offsets, leader epochs,
    /// timestamps), which must start at this log's end. Staged now, like
    /// [`Log::stage_append`]; returns the batch headers too (for the producer table and the
    /// epoch cache).
    pub fn stage_replica(
        &self,
        records: &[u8],
        options: AppendOptions,
    ) -> Result<(StagedAppend, Vec<BatchHeader>), LogError> {
        let headers = {
            let st = self.inner.state.borrow();
            let headers = validate_all(records, &st.config, Offsets::Keep)?;
            check_continues(&headers, st.next_offset())?;
            headers
        };
        let staged = self.stage_with(records, options, Offsets::Keep)?;
        Ok((staged, headers))
    }

    fn stage_with(
        &self,
        records: &[u8],
        options: AppendOptions,
        offsets: Offsets,
    ) -> Result<StagedAppend, LogError> {
        {
            let st = self.inner.state.borrow();
            if st.closed {
                return Err(LogError::Closed(self.inner.dir.clone()));
            }
            st.check_online(&self.inner.dir)?;
            if st.exclusive {
                return Err(LogError::Busy(self.inner.dir.clone()));
            }
        }
        let headers = validate_all(records, &self.inner.state.borrow().config, offsets)?;
        let (rx, info, start_committer) = {
            let mut st = self.inner.state.borrow_mut();
            let info = stage(&mut st, records, &headers, options, offsets);
            let (tx, rx) = local_oneshot::channel();
            st.waiters.push(AppendWaiter {
                durable: options.durable,
                done: tx,
                staged_at: Some(std::time::Instant::now()),
            });
            let start = !st.committing;
            st.committing = true;
            (rx, info, start)
        };
        if start_committer {
            runtime::spawn_detached(commit::run(Rc::clone(&self.inner)));
        }
        Ok(StagedAppend {
            log: self.clone(),
            info,
            done: rx,
        })
    }
}
