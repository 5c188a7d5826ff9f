//! xorshift64*: a tiny seeded generator for simulations, fault injection and benches, so runs
//! are reproducible from a seed (not for anything that needs unpredictability).

pub struct SeededRng(u64);

impl SeededRng {
    /// Any seed. The state is the seed scrambled (splitmix64's finalizer), so that nearby
    /// seeds start far apart: `seed | 1` made seeds 2k and 2k+1 one run, half of every seed
    /// range a repeat. Zero (which would stick at zero) is nudged.
    pub fn new(seed: u64) -> SeededRng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        SeededRng((z ^ (z >> 31)).max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// True with probability `per_thousand` / 1000.
    pub fn chance(&mut self, per_thousand: u64) -> bool {
        self.next_u64() % 1000 < per_thousand
    }
}

#[cfg(test)]
mod tests {
    use super::SeededRng;

    #[test]
    fn neighbouring_seeds_are_different_runs() {
        let first: Vec<u64> = (0..16)
            .map(|seed| SeededRng::new(seed).next_u64())
            .collect();
        let mut distinct = first.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), first.len(), "{first:?}");
        assert_eq!(SeededRng::new(5).next_u64(), SeededRng::new(5).next_u64());
    }
}
