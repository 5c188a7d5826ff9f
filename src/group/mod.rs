//! Consumer groups (classic protocol): the coordinator state machine, its inputs and outputs,
//! and the `__consumer_offsets` record formats.

pub mod api;
pub mod coordinator;
pub use coordinator::GroupCoordinator;
