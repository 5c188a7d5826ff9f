//! Consumer groups (classic protocol): the coordinator state machine, its inputs and outputs,
//! and the `__consumer_offsets` record formats.

mod admin;
pub mod api;
pub mod coordinator;
mod group_state;
mod member;
mod membership;
mod offsets;
pub mod records;
mod subscription;
mod sync_phase;

#[cfg(test)]
mod sim_tests;

pub use coordinator::GroupCoordinator;
pub use group_state::GroupState;
