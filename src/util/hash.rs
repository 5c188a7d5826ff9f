//! The broker's hash tables: std's `HashMap`/`HashSet` with keys from [`super::entropy`], so
//! a simulation's tables iterate in the same order in every run of a seed (std's
//! `RandomState` keys each table from the OS, and iteration order decides which partition,
//! group or connection is served first). In a running broker the keys are random per table,
//! as std's are, so client-chosen names (topics, group ids) cannot be picked to collide.
//!
//! Use `HashMap::default()` and `with_capacity_and_hasher(n, Default::default())`; clippy's
//! `disallowed-types` (clippy.toml) keeps std's own out of `src/`.

#![allow(clippy::disallowed_types)]

use std::hash::BuildHasher;

use super::entropy::random_u64;

pub type HashMap<K, V> = std::collections::HashMap<K, V, Keys>;
pub type HashSet<T> = std::collections::HashSet<T, Keys>;

/// A table's hash keys (aHash, seeded).
#[derive(Clone, Debug)]
pub struct Keys(ahash::RandomState);

impl Default for Keys {
    fn default() -> Keys {
        Keys(ahash::RandomState::with_seeds(
            random_u64(),
            random_u64(),
            random_u64(),
            random_u64(),
        ))
    }
}

impl BuildHasher for Keys {
    type Hasher = ahash::AHasher;

    fn build_hasher(&self) -> ahash::AHasher {
        self.0.build_hasher()
    }
}

#[cfg(test)]
mod tests {
    use super::super::entropy::seed_thread;
    use super::*;

    fn order(seed: u64) -> Vec<u32> {
        seed_thread(Some(seed));
        let set: HashSet<u32> = (0..64).collect();
        seed_thread(None);
        set.into_iter().collect()
    }

    #[test]
    fn a_seed_fixes_the_iteration_order() {
        assert_eq!(order(3), order(3));
        // Another seed, another order (these two differ; most pairs do).
        assert_ne!(order(3), order(4));
    }
}
