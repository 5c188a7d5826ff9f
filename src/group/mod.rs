//! Consumer groups (classic protocol): the coordinator state machine, its inputs and outputs,
//! the `__consumer_offsets` record formats, and the group service ([`service`]): the
//! coordinator's I/O on a shard's `__consumer_offsets` partitions.

mod admin;
pub mod api;
pub mod coordinator;
mod group_state;
mod member;
mod membership;
mod offsets;
pub mod records;
pub mod service;
mod subscription;
mod sync_phase;

#[cfg(test)]
mod sim_tests;

pub use coordinator::GroupCoordinator;
pub use group_state::GroupState;
