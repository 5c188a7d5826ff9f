//! Warnings about the machine under the broker: slow fsyncs and a filling data disk. Each
//! decision is a pure function of what was observed and the time (tested without a disk);
//! the callers do the measuring and the logging.
//!
//! - [`rate_limit`]: at most one line per interval, counting what was held back
//! - [`slow_fsync`]: fdatasyncs slower than `ringbroker.log.slow.fsync.warn.ms`
//! - [`disk_space`]: free space of the data dir against `ringbroker.disk.free.warn.*`
pub mod disk_space;
pub mod rate_limit;
pub mod slow_fsync;
