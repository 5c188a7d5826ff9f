//! The Kafka wire protocol as ringbroker speaks it. For now: the RecordBatch v2 view used by the
//! log (header parse, CRC32C validation, offset assignment) and a builder for tools and tests.
pub mod batch_builder;
pub mod frame;
pub mod header;
pub mod legacy;
pub mod legacy_produce;
pub mod record_batch;
mod varint;
