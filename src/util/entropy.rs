//! The thread's source of randomness for hash-table keys and generated ids: the operating
//! system's in a running broker, a seed's in a simulation (`runtime::sim` seeds the thread it
//! runs on), so that one seed replays one run exactly. A std `RandomState` or `crate::util::entropy::uuid_v4`
//! would draw fresh OS randomness behind the simulator's back, and a run would depend on the
//! order of hash-table iteration and of the bytes of every id it made.
//!
//! Not for secrets: a seeded thread's values are as predictable as its seed.

use std::cell::RefCell;
use std::hash::BuildHasher;

use super::rng::SeededRng;

thread_local! {
    static SEEDED: RefCell<Option<SeededRng>> = const { RefCell::new(None) };
    /// For hash keys off a simulation: drawn from the OS once per thread, then a cheap
    /// generator (a table is made per request in places; keys need not be secret from the
    /// broker's own threads, only unknown to clients, as std's per-thread keys are).
    static UNSEEDED: RefCell<SeededRng> = RefCell::new(SeededRng::new(
        std::collections::hash_map::RandomState::new().hash_one(0u64),
    ));
}

/// From now on this thread's values come from `seed` (None: from the OS again).
pub fn seed_thread(seed: Option<u64>) {
    SEEDED.with(|s| *s.borrow_mut() = seed.map(SeededRng::new));
}

/// True while this thread's values come from a seed.
pub fn seeded() -> bool {
    SEEDED.with(|s| s.borrow().is_some())
}

/// A random u64 for hash keys: the seed's next value on a seeded thread, else the thread's
/// generator's (seeded from the OS).
pub fn random_u64() -> u64 {
    SEEDED.with(|s| match s.borrow_mut().as_mut() {
        Some(rng) => rng.next_u64(),
        None => UNSEEDED.with(|u| u.borrow_mut().next_u64()),
    })
}

/// A random (version 4) UUID: from the seed on a seeded thread, else from the OS.
pub fn uuid_v4() -> uuid::Uuid {
    if !seeded() {
        #[allow(clippy::disallowed_methods)]
        return uuid::Uuid::new_v4();
    }
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&random_u64().to_le_bytes());
    bytes[8..].copy_from_slice(&random_u64().to_le_bytes());
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_thread_repeats_its_values_and_an_unseeded_one_does_not() {
        seed_thread(Some(7));
        let a = (random_u64(), uuid_v4());
        seed_thread(Some(7));
        let b = (random_u64(), uuid_v4());
        seed_thread(None);
        assert_eq!(a, b);
        assert_eq!(b.1.get_version_num(), 4);
        assert!(!seeded());
        assert_ne!(uuid_v4(), uuid_v4());
        assert_ne!(random_u64(), random_u64());
    }
}
