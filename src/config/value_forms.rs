//! The forms of broker property values that are more than a number: per-address connection
//! limits, timestamp types, the segment I/O mode, and narrowing an integer into its field.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::protocol::record_batch::TimestampType;
use crate::runtime::FileIo;

/// Kafka's `max.connections.per.ip.overrides`: `host:count` pairs separated by commas. Only
/// IP addresses are accepted (Kafka also resolves host names; a name here is an error rather
/// than a lookup at startup). IPv6 addresses may be bracketed: `[::1]:10` or `::1:10`.
pub fn parse_ip_overrides(v: &str) -> Result<BTreeMap<IpAddr, u32>, String> {
    let mut out = BTreeMap::new();
    for pair in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, count) = pair
            .rsplit_once(':')
            .ok_or_else(|| format!("expected IP:count, got {pair:?}"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = host
            .parse()
            .map_err(|_| format!("{host:?} is not an IP address (host names are not supported)"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| format!("bad connection count in {pair:?}"))?;
        out.insert(ip.to_canonical(), count);
    }
    Ok(out)
}

/// `n` in a narrower integer type; a cast would wrap a large value into a wrong (even
/// negative) one.
pub fn narrow<T: TryFrom<i64>>(n: i64) -> Result<T, String> {
    T::try_from(n).map_err(|_| format!("out of range: {n}"))
}

pub fn parse_timestamp_type(v: &str) -> Result<TimestampType, String> {
    match v.trim() {
        "CreateTime" => Ok(TimestampType::CreateTime),
        "LogAppendTime" => Ok(TimestampType::LogAppendTime),
        other => Err(format!(
            "expected CreateTime or LogAppendTime, got {other:?}"
        )),
    }
}

pub fn timestamp_type_name(t: TimestampType) -> &'static str {
    match t {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

pub fn parse_log_io(v: &str) -> Result<FileIo, String> {
    match v {
        "direct" => Ok(FileIo::Direct),
        "buffered" => Ok(FileIo::Buffered),
        other => Err(format!(
            "must be `direct` (O_DIRECT segment writes) or `buffered` (page cache), got `{other}`"
        )),
    }
}

/// The value of `ringbroker.log.io` as written in a config file.
pub fn log_io_name(io: FileIo) -> &'static str {
    match io {
        FileIo::Direct => "direct",
        FileIo::Buffered => "buffered",
    }
}

/// A host as it goes before `:port`: an IPv6 address in brackets.
pub fn bracket_ipv6(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}
