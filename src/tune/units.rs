//! Human-readable sizes for the findings table.

/// `8388608` → `8 MiB`, `1536` → `1.5 KiB`, `100` → `100 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// An rlimit value: bytes or a count, or `unlimited`.
pub fn limit(value: Option<u64>, as_bytes: bool) -> String {
    match value {
        None => "unlimited".to_string(),
        Some(v) if as_bytes => bytes(v),
        Some(v) => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(bytes(100), "100 B");
        assert_eq!(bytes(8 << 20), "8 MiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(512 * 1024), "512 KiB");
        assert_eq!(limit(None, true), "unlimited");
        assert_eq!(limit(Some(20000), false), "20000");
    }
}
