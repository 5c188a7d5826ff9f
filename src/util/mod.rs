//! Small building blocks that are not about Kafka.
pub mod entropy;
pub mod exclusive;
pub mod hash;
pub mod local_oneshot;
pub mod memory_budget;
pub mod notify;
pub mod rng;
pub mod shutdown;
