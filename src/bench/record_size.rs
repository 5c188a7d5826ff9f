//! `--record-size`: a fixed size (`1024`) or a distribution (`uniform:100-2000`).

use std::fmt;
use std::str::FromStr;

use super::rng::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordSize {
    Fixed(usize),
    /// Uniform in `min..=max` bytes.
    Uniform {
        min: usize,
        max: usize,
    },
}

impl RecordSize {
    pub fn sample(&self, rng: &mut Rng) -> usize {
        match *self {
            RecordSize::Fixed(n) => n,
            RecordSize::Uniform { min, max } => rng.range(min as u64, max as u64) as usize,
        }
    }

    pub fn min(&self) -> usize {
        match *self {
            RecordSize::Fixed(n) => n,
            RecordSize::Uniform { min, .. } => min,
        }
    }

    pub fn max(&self) -> usize {
        match *self {
            RecordSize::Fixed(n) => n,
            RecordSize::Uniform { max, .. } => max,
        }
    }
}

impl FromStr for RecordSize {
    type Err = String;

    fn from_str(s: &str) -> Result<RecordSize, String> {
        let size = |v: &str| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| format!("{v:?} is not a size in bytes"))
        };
        if let Some(range) = s.strip_prefix("uniform:") {
            let (lo, hi) = range
                .split_once('-')
                .ok_or_else(|| format!("{s:?}: expected uniform:MIN-MAX"))?;
            let (min, max) = (size(lo)?, size(hi)?);
            if min > max {
                return Err(format!("{s:?}: MIN is above MAX"));
            }
            return Ok(RecordSize::Uniform { min, max });
        }
        size(s).map(RecordSize::Fixed)
    }
}

impl fmt::Display for RecordSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordSize::Fixed(n) => write!(f, "{n}"),
            RecordSize::Uniform { min, max } => write!(f, "uniform:{min}-{max}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_samples() {
        assert_eq!("512".parse(), Ok(RecordSize::Fixed(512)));
        let u: RecordSize = "uniform:100-2000".parse().unwrap();
        assert_eq!(
            u,
            RecordSize::Uniform {
                min: 100,
                max: 2000
            }
        );
        assert_eq!(u.to_string(), "uniform:100-2000");
        let mut rng = Rng::new(3);
        assert!((0..1000)
            .map(|_| u.sample(&mut rng))
            .all(|n| (100..=2000).contains(&n)));
        assert!("uniform:9-1".parse::<RecordSize>().is_err());
        assert!("big".parse::<RecordSize>().is_err());
        assert!("normal:1-2".parse::<RecordSize>().is_err());
    }
}
