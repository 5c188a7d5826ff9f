//! xorshift64*: a tiny seeded generator for simulations, fault injection and benches, so runs
//! are reproducible from a seed (not for anything that needs unpredictability).

pub struct SeededRng(u64);

impl SeededRng {
    /// Any seed; zero (which would stick at zero) is nudged.
    pub fn new(seed: u64) -> SeededRng {
        SeededRng(seed | 1)
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
