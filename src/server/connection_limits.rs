//! Broker-wide connection limits, Kafka's `max.connections`, `max.connections.per.ip` and
//! `max.connections.per.ip.overrides`, enforced by every shard's accept loop.
//!
//! A client can land on any shard (SO_REUSEPORT, steered by source port), so a per-shard
//! share of the limit (limit / shards) would refuse a client whose connections happen to pile
//! up on one shard while the broker as a whole is under its limit. The counts are therefore
//! shared by all shards, as atomics behind an `Arc`: no lock, and they are touched once when
//! a connection opens and once when it closes, never per request.
//!
//! Per-IP counts live in a fixed table of `AtomicU64` words, each holding an address
//! fingerprint (high 32 bits) and its connection count (low 32 bits), so that both change in
//! one compare-and-swap. An address goes to the first free word of a short probe window and
//! the word is freed when its count drops to zero. Admission first looks for the address in
//! the whole window, so a freed word before it does not split its count. The table is sized
//! so that the window only fills up with tens of thousands of distinct addresses connected at
//! once; an address that finds no free word is admitted untracked (and logged) rather than
//! refused.
//!
//! An address in the overrides gets its own limit instead of `max.connections.per.ip` (the
//! overrides are a small map read once per accepted connection); with overrides but no
//! default per-IP limit, only the listed addresses are counted.
//!
//! Unlike Kafka, which stops accepting while `max.connections` is reached, a connection over
//! either limit is accepted and closed at once: nothing waits in the kernel's accept queue.

use crate::util::hash::HashMap;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Words of the per-IP table (512 KiB); only allocated when a per-IP limit is set.
const PER_IP_SLOTS: usize = 1 << 16;
/// Consecutive words an address may occupy.
const PROBE_WINDOW: usize = 16;
const COUNT_MASK: u64 = 0xffff_ffff;

/// Why a connection was closed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("max.connections ({limit}) reached")]
    Total { limit: usize },
    #[error("max.connections.per.ip ({limit}) reached for {ip}")]
    PerIp { limit: u32, ip: IpAddr },
    #[error("max.connections.per.ip.overrides ({limit}) reached for {ip}")]
    PerIpOverride { limit: u32, ip: IpAddr },
}

/// The counts shared by every shard.
pub struct ConnectionLimits {
    max_total: usize,
    max_per_ip: u32,
    /// Per-address limits replacing `max_per_ip`.
    overrides: HashMap<IpAddr, u32>,
    total: AtomicUsize,
    /// Empty when there is no per-IP limit.
    per_ip: Box<[AtomicU64]>,
}

/// One admitted connection; dropping it gives its place back.
pub struct Admitted {
    limits: Arc<ConnectionLimits>,
    slot: Option<usize>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.limits.total.fetch_sub(1, Ordering::AcqRel);
        if let Some(slot) = self.slot {
            self.limits.release_slot(slot);
        }
    }
}

impl ConnectionLimits {
    /// `max_per_ip` of 2147483647 (Kafka's default) or more means no per-IP limit.
    pub fn new(
        max_total: usize,
        max_per_ip: u64,
        overrides: &BTreeMap<IpAddr, u32>,
    ) -> Arc<ConnectionLimits> {
        // Kafka's default used to count here as a real limit: the table was always allocated
        // and every accept paid for compare-and-swaps on it.
        let max_per_ip = match u32::try_from(max_per_ip) {
            Ok(n) if n < i32::MAX as u32 => n,
            _ => u32::MAX,
        };
        let slots = if max_per_ip == u32::MAX && overrides.is_empty() {
            0
        } else {
            PER_IP_SLOTS
        };
        Arc::new(ConnectionLimits {
            max_total,
            max_per_ip,
            overrides: overrides
                .iter()
                .map(|(ip, n)| (ip.to_canonical(), *n))
                .collect(),
            total: AtomicUsize::new(0),
            per_ip: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn tracks_ips(&self) -> bool {
        !self.per_ip.is_empty()
    }

    /// Connections open now, on every shard.
    pub fn open_connections(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    /// Counts a new connection from `ip`, or says which limit it is over.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refusal> {
        if self.total.fetch_add(1, Ordering::AcqRel) >= self.max_total {
            self.total.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Total {
                limit: self.max_total,
            });
        }
        // An IPv4 client of a dual-stack listener shows up as ::ffff:a.b.c.d.
        let ip = ip.to_canonical();
        let (limit, overridden) = match self.overrides.get(&ip) {
            Some(n) => (*n, true),
            None => (self.max_per_ip, false),
        };
        let slot = if self.tracks_ips() && limit != u32::MAX {
            match self.take_slot(ip, limit) {
                SlotOutcome::Taken(slot) => Some(slot),
                SlotOutcome::Full => {
                    self.total.fetch_sub(1, Ordering::AcqRel);
                    return Err(if overridden {
                        Refusal::PerIpOverride { limit, ip }
                    } else {
                        Refusal::PerIp { limit, ip }
                    });
                }
                SlotOutcome::NoRoom => {
                    tracing::warn!(%ip, "per-IP connection table crowded: connection admitted without a per-IP count");
                    None
                }
            }
        } else {
            None
        };
        Ok(Admitted {
            limits: Arc::clone(self),
            slot,
        })
    }

    fn take_slot(&self, ip: IpAddr, limit: u32) -> SlotOutcome {
        if limit == 0 {
            return SlotOutcome::Full;
        }
        let (start, fingerprint) = self.place(ip);
        let mask = self.per_ip.len() - 1;
        'again: loop {
            for k in 0..PROBE_WINDOW {
                let slot = (start + k) & mask;
                let word = self.per_ip[slot].load(Ordering::Acquire);
                if word >> 32 != fingerprint {
                    continue;
                }
                if word & COUNT_MASK >= u64::from(limit) {
                    return SlotOutcome::Full;
                }
                if self.per_ip[slot]
                    .compare_exchange(word, word + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return SlotOutcome::Taken(slot);
                }
                continue 'again;
            }
            for k in 0..PROBE_WINDOW {
                let slot = (start + k) & mask;
                if self.per_ip[slot].load(Ordering::Acquire) != 0 {
                    continue;
                }
                let claimed = (fingerprint << 32) | 1;
                if self.per_ip[slot]
                    .compare_exchange(0, claimed, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return SlotOutcome::Taken(slot);
                }
                // Another shard took it (perhaps for this very address): look again.
                continue 'again;
            }
            return SlotOutcome::NoRoom;
        }
    }

    fn release_slot(&self, slot: usize) {
        let word = &self.per_ip[slot];
        let mut current = word.load(Ordering::Acquire);
        loop {
            let next = if current & COUNT_MASK <= 1 {
                0
            } else {
                current - 1
            };
            match word.compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(seen) => current = seen,
            }
        }
    }

    /// The first word of the address's window and its fingerprint (never 0: 0 is a free word).
    fn place(&self, ip: IpAddr) -> (usize, u64) {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        ip.hash(&mut hasher);
        let hash = hasher.finish();
        let start = (hash as usize) & (self.per_ip.len() - 1);
        let fingerprint = (hash >> 32) | 1;
        (start, fingerprint)
    }
}

enum SlotOutcome {
    Taken(usize),
    /// The address is at its limit.
    Full,
    /// Every word of the window belongs to other addresses.
    NoRoom,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn total_limit_counts_every_address() {
        let limits = ConnectionLimits::new(3, i32::MAX as u64, &BTreeMap::new());
        assert!(!limits.tracks_ips(), "Kafka's default is no per-IP limit");
        let held: Vec<_> = (1..=3)
            .map(|i| limits.admit(ip(i)).expect("under"))
            .collect();
        assert_eq!(limits.admit(ip(9)).err(), Some(Refusal::Total { limit: 3 }));
        drop(held);
        assert_eq!(limits.open_connections(), 0);
        assert!(limits.admit(ip(9)).is_ok());
    }

    #[test]
    fn per_ip_limit_is_per_address_and_released_on_drop() {
        let limits = ConnectionLimits::new(1000, 2, &BTreeMap::new());
        let a1 = limits.admit(ip(1)).expect("first");
        let _a2 = limits.admit(ip(1)).expect("second");
        assert!(matches!(
            limits.admit(ip(1)),
            Err(Refusal::PerIp { limit: 2, .. })
        ));
        let _b = limits.admit(ip(2)).expect("another address");
        assert_eq!(
            limits.open_connections(),
            3,
            "a refusal gives the total back"
        );
        drop(a1);
        let _a3 = limits.admit(ip(1)).expect("a place was freed");
    }

    #[test]
    fn overrides_replace_the_per_ip_limit_for_their_addresses() {
        let overrides: BTreeMap<IpAddr, u32> =
            [(ip(2), 4), (ip(3), 0), (IpAddr::from([10, 0, 0, 1]), 1)].into();
        let limits = ConnectionLimits::new(1000, 2, &overrides);
        let admit_all = |a: IpAddr| {
            let mut held = Vec::new();
            while let Ok(h) = limits.admit(a) {
                held.push(h);
                assert!(held.len() <= 10, "no limit for {a}");
            }
            (held, limits.admit(a).err())
        };
        let (one, refusal) = admit_all(ip(1));
        assert_eq!(
            (one.len(), refusal),
            (
                2,
                Some(Refusal::PerIp {
                    limit: 2,
                    ip: ip(1)
                })
            )
        );
        let (two, refusal) = admit_all(ip(2));
        assert_eq!(
            (two.len(), refusal),
            (
                4,
                Some(Refusal::PerIpOverride {
                    limit: 4,
                    ip: ip(2)
                })
            )
        );
        assert_eq!(admit_all(ip(3)).0.len(), 0, "0 refuses the address");
        // The IPv4-mapped form of an overridden address is the same address.
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().expect("ip");
        let (mapped_held, refusal) = admit_all(mapped);
        assert_eq!(mapped_held.len(), 1);
        assert!(refusal
            .expect("refused")
            .to_string()
            .contains("max.connections.per.ip.overrides (1) reached for 10.0.0.1"));
        assert_eq!(limits.open_connections(), 7);

        // Overrides alone: only the listed addresses are limited.
        let limits = ConnectionLimits::new(1000, u64::MAX, &overrides);
        let _held: Vec<_> = (0..20)
            .map(|_| limits.admit(ip(1)).expect("no default limit"))
            .collect();
        let _two: Vec<_> = (0..4)
            .map(|_| limits.admit(ip(2)).expect("under"))
            .collect();
        assert!(limits.admit(ip(2)).is_err());
    }

    #[test]
    fn a_crowded_window_neither_splits_nor_loses_counts() {
        // Many addresses so that windows overlap; free some in between and check that
        // every address still stops at exactly its limit.
        let limits = ConnectionLimits::new(usize::MAX, 3, &BTreeMap::new());
        let addresses: Vec<IpAddr> = (0..20_000u32)
            .map(|i| IpAddr::from((0x0a00_0000u32 + i).to_be_bytes()))
            .collect();
        let mut held = Vec::new();
        for a in &addresses {
            held.push(limits.admit(*a).expect("first connection"));
        }
        // Free every other address's connection, then fill each address to its limit.
        let mut kept = Vec::new();
        for (i, h) in held.into_iter().enumerate() {
            if i % 2 == 0 {
                kept.push(h);
            }
        }
        for (i, a) in addresses.iter().enumerate() {
            let already = usize::from(i % 2 == 0);
            for _ in already..3 {
                kept.push(limits.admit(*a).expect("under the limit"));
            }
            assert!(limits.admit(*a).is_err(), "address {i} over its limit");
        }
        drop(kept);
        assert!(limits.per_ip.iter().all(|w| w.load(Ordering::Acquire) == 0));
    }
}
