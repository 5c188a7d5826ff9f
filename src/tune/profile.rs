//! What the system is tuned for: `--profile throughput|latency`.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Most bytes per second: absorb bursts in the page cache, large socket buffers.
    #[default]
    Throughput,
    /// Lowest and steadiest produce/fetch latency: no stalls from THP compaction or big
    /// write-back bursts, CPUs at full clock.
    Latency,
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Profile::Throughput => "throughput",
            Profile::Latency => "latency",
        })
    }
}
