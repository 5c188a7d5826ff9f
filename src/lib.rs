//! ringbroker: a Kafka-compatible streaming broker, thread-per-core on io_uring.
//! (docs/architecture.md walks through how these fit together.)
//!
//! # Layers
//!
//! The modules form layers. A module may import only modules of the layers listed below its
//! own, never one of its own layer or above: the bottom knows nothing of the top, so no two
//! modules import each other. `tests/layering.rs` reads every `crate::` path in `src/` and
//! fails on an import this list forbids, and on an import circle between the files of one
//! module. A new module gets a line here.
//!
//! 1. `cli`: the admin and client commands (`main.rs` is the binary's entry only)
//! 2. `bench`, `tune`: the load generator; the Linux settings check
//! 3. `server`: listeners, connections, one handler per API key, start and stop, the metrics
//!    HTTP endpoint
//! 4. `shard`: a core's partitions and services, and the routing of work between shards
//! 5. `group`: the consumer group coordinator (pure), its records, and its service (the I/O on a
//!    shard's `__consumer_offsets` partitions)
//! 6. `partition`: a hosted partition (log, producers, replica role, waiters), the shard's
//!    partition manager and replica manager, and the values of partition operations
//! 7. `replication`: leader state (follower LEOs, ISR, high watermark), the follower fetcher
//! 8. `controller`: the cluster controller's pure state machine, placement, election, Raft, and
//!    a single node's own controller
//! 9. `config`: the broker and topic property tables, their defaults, listing and dynamic changes
//! 10. `metadata`: the metadata image every shard reads (both modes), its per-shard cache, the
//!     plain values and snapshot of the cluster metadata, and shard 0's snapshot file
//! 11. `client`: the project's own Kafka client (commands, bench)
//! 12. `idempotence`: producer-state tables, their snapshots, the producer-id allocator
//! 13. `log`: the partition log (segments, indexes, group commit, recovery, retention)
//! 14. `health`: slow-fsync and low-disk warnings
//! 15. `metrics`: per-shard registries and their renderings (a leaf: nothing stateful)
//! 16. `protocol`: the Kafka wire formats (frames, record batches, legacy message sets)
//! 17. `runtime`: the only module that touches glommio (executors, mesh, timers, net, files)
//! 18. `util`: small single-threaded tools (exclusive sections, notify, budgets, shutdown)
//! 19. `model`, `logging`, `alloc_guard`: shared newtypes and values; the log subscriber; the
//!     allocation guard. They import nothing of the crate.

pub mod alloc_guard;
pub mod bench;
pub mod cli;
pub mod client;
pub mod config;
pub mod controller;
pub mod group;
pub mod health;
pub mod idempotence;
pub mod log;
pub mod logging;
pub mod metadata;
pub mod metrics;
pub mod model;
pub mod partition;
pub mod protocol;
pub mod replication;
pub mod runtime;
pub mod server;
pub mod shard;
pub mod tune;
pub mod util;
