//! Partition replication as Kafka does it (../shared/CLUSTER.md, Replication): pure state
//! machines, no I/O and no clock (time comes in as `now_ms`).
//!
//! - [`leader_state`]: a partition leader's view of its followers (fetch positions, caught-up
//!   time), the ISR changes it asks the controller for, the high watermark and acks=all.

pub mod leader_state;
