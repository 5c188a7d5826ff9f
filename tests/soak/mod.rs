//! Pieces of the crash soak (tests/crash_soak.rs): a fallible wire connection, the numbered
//! records, an idempotent pipelined producer, and a consumer that commits group offsets.

pub mod committer;
pub mod producer;
pub mod records;
pub mod wire;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// Where the broker listens now: every restart picks a new port, and the clients follow.
#[derive(Clone)]
pub struct Target {
    addr: Arc<Mutex<SocketAddr>>,
}

impl Target {
    pub fn new(addr: SocketAddr) -> Target {
        Target {
            addr: Arc::new(Mutex::new(addr)),
        }
    }

    pub fn get(&self) -> SocketAddr {
        *self.addr.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set(&self, addr: SocketAddr) {
        *self.addr.lock().unwrap_or_else(|e| e.into_inner()) = addr;
    }
}

/// xorshift64*: a seeded, reproducible choice of batch sizes and kill delays.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }
}
