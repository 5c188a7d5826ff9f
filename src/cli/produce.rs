//! `ringbroker produce TOPIC`: one record per input line (stdin or `--file`), like
//! `kcat -P` or `rpk topic produce`. Input is streamed: the producer's buffer bounds memory.
//! Every delivery is awaited; failures are counted by Kafka error name, and any failure
//! makes the exit code 1.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::bench::args::parse_duration;
use crate::client::compression::parse_compression;
use crate::client::{
    ClientError, Compression, DeliveryResult, Producer, ProducerConfig, ProducerRecord,
};

use super::connect::ConnectArgs;
use super::explain::{explain, CliError};
use super::topic_exists::{check_partition, partition_count};

#[derive(clap::Args, Debug, Clone)]
pub struct ProduceArgs {
    /// The topic to produce to (it must exist).
    pub topic: String,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Read lines from this file instead of stdin.
    #[arg(long, short = 'f')]
    pub file: Option<PathBuf>,
    /// Split each line at the first SEP into key and value (a line without SEP has no key).
    #[arg(long, short = 'K', value_name = "SEP")]
    pub key_separator: Option<String>,
    /// A header for every record, repeatable: -H source=cli -H trace=1
    #[arg(long = "header", short = 'H', value_name = "KEY=VALUE")]
    pub headers: Vec<String>,
    /// Produce to this partition (default: by key as Kafka does, murmur2; without a key round robin).
    #[arg(long, short = 'p')]
    pub partition: Option<i32>,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, short = 'z', default_value = "none", value_parser = parse_compression)]
    pub compression: Compression,
    /// 0 (no acknowledgement), 1 (the leader wrote it) or all (every in-sync replica).
    #[arg(long, default_value = "all", value_parser = parse_acks)]
    pub acks: i16,
    /// Turn off the idempotent producer (on by default with acks=all, as in Kafka 3; with
    /// it, retries never duplicate a record).
    #[arg(long)]
    pub no_idempotence: bool,
    /// How long a partition's batch waits for more lines before it is sent.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    pub linger: Duration,
    /// No summary on stderr (failures are still reported).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

fn parse_acks(s: &str) -> Result<i16, String> {
    match s {
        "all" | "-1" => Ok(-1),
        "1" => Ok(1),
        "0" => Ok(0),
        other => Err(format!("acks {other:?}: 0, 1 or all")),
    }
}

/// `KEY=VALUE` → the header (a value may contain `=`; `KEY=` is an empty value).
pub fn parse_header(s: &str) -> Result<(String, Vec<u8>), CliError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.as_bytes().to_vec())),
        _ => Err(CliError::Usage(format!(
            "header {s:?}: expected KEY=VALUE (-H source=cli)"
        ))),
    }
}

/// A line without its `\n` (only the delimiter is removed: a `\r` before it stays, as kcat does).
pub fn strip_newline(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\n").unwrap_or(line)
}

/// Key and value of a line: split at the first `sep`; without `sep` in it, no key.
pub fn split_key<'a>(line: &'a [u8], sep: Option<&[u8]>) -> (Option<&'a [u8]>, &'a [u8]) {
    let Some(sep) = sep.filter(|s| !s.is_empty()) else {
        return (None, line);
    };
    match line.windows(sep.len()).position(|w| w == sep) {
        Some(i) => (Some(&line[..i]), &line[i + sep.len()..]),
        None => (None, line),
    }
}

/// What happened to the records, filled in by delivery callbacks.
#[derive(Debug, Default)]
pub struct Deliveries {
    pub delivered: u64,
    /// Error name → (records, the first message).
    pub failed: BTreeMap<String, (u64, String)>,
}

impl Deliveries {
    fn record(&mut self, result: DeliveryResult) {
        match result {
            Ok(_) => self.delivered += 1,
            Err(e) => {
                let entry = self
                    .failed
                    .entry(e.kind_name())
                    .or_insert_with(|| (0, describe(&e)));
                entry.0 += 1;
            }
        }
    }

    pub fn failed_count(&self) -> u64 {
        self.failed.values().map(|(n, _)| n).sum()
    }
}

fn describe(e: &ClientError) -> String {
    match e {
        ClientError::Kafka { code, .. } => format!("{e} ({})", explain(*code)),
        _ => e.to_string(),
    }
}

/// The result of a run: exit code 1 when any record failed.
#[derive(Debug)]
pub struct ProduceOutcome {
    pub records: u64,
    pub bytes: u64,
    pub failed: u64,
}

impl ProduceOutcome {
    pub fn exit_code(&self) -> ExitCode {
        if self.failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }
}

pub fn run(args: ProduceArgs) -> Result<ProduceOutcome, CliError> {
    let headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    let input: Box<dyn BufRead> = match &args.file {
        Some(path) => {
            Box::new(BufReader::new(File::open(path).map_err(|e| {
                CliError::io(format!("open {}", path.display()), e)
            })?))
        }
        None => Box::new(std::io::stdin().lock()),
    };
    let cluster = args.connect.connect()?;
    let partitions = partition_count(&cluster, &args.topic)?;
    if let Some(p) = args.partition {
        check_partition(&args.topic, partitions, p)?;
    }
    let config = ProducerConfig {
        acks: args.acks,
        compression: args.compression,
        linger: args.linger,
        idempotence: args.acks == -1 && !args.no_idempotence,
        ..ProducerConfig::default()
    };
    let producer = Producer::new(cluster, config)?;
    let deliveries = Arc::new(Mutex::new(Deliveries::default()));
    let sent = send_lines(&args, &producer, input, &headers, &deliveries);
    // Wait for every delivery (also after a read error: what was sent is reported).
    let bound = args.connect.timeout * 6 + Duration::from_secs(10);
    let unfinished = producer.flush(bound);
    drop(producer);
    let (records, bytes) = sent?;
    let deliveries = deliveries.lock().unwrap_or_else(|p| p.into_inner());
    let failed = deliveries.failed_count() + unfinished as u64;
    for (name, (n, first)) in &deliveries.failed {
        eprintln!("produce: {n} records failed with {name}: {first}");
    }
    if unfinished > 0 {
        eprintln!("produce: {unfinished} records had no outcome after {bound:?}");
    }
    if !args.quiet {
        eprintln!(
            "produce: {records} records ({bytes} bytes of keys and values) to {}, {} delivered, {failed} failed",
            args.topic, deliveries.delivered
        );
    }
    Ok(ProduceOutcome {
        records,
        bytes,
        failed,
    })
}

/// Sends every line; returns the records and key+value bytes sent.
fn send_lines(
    args: &ProduceArgs,
    producer: &Producer,
    mut input: Box<dyn BufRead>,
    headers: &[(String, Vec<u8>)],
    deliveries: &Arc<Mutex<Deliveries>>,
) -> Result<(u64, u64), CliError> {
    let header_refs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    let sep = args.key_separator.as_deref().map(str::as_bytes);
    let mut line = Vec::new();
    let (mut records, mut bytes) = (0u64, 0u64);
    loop {
        line.clear();
        let n = input
            .read_until(b'\n', &mut line)
            .map_err(|e| CliError::io("read the input", e))?;
        if n == 0 {
            return Ok((records, bytes));
        }
        let (key, value) = split_key(strip_newline(&line), sep);
        let record = ProducerRecord {
            topic: &args.topic,
            partition: args.partition,
            key,
            value: Some(value),
            headers: &header_refs,
            timestamp_ms: None,
        };
        let tally = deliveries.clone();
        producer.send(
            record,
            Box::new(move |result| {
                tally
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .record(result)
            }),
        )?;
        records += 1;
        bytes += (key.map_or(0, <[u8]>::len) + value.len()) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_lose_only_their_newline() {
        assert_eq!(strip_newline(b"a b\n"), b"a b");
        assert_eq!(strip_newline(b"last"), b"last");
        assert_eq!(strip_newline(b"\n"), b"");
        assert_eq!(strip_newline(b"crlf\r\n"), b"crlf\r");
    }

    #[test]
    fn keys_split_at_the_first_separator() {
        assert_eq!(
            split_key(b"k:v:w", Some(b":")),
            (Some(&b"k"[..]), &b"v:w"[..])
        );
        assert_eq!(
            split_key(b"key::value", Some(b"::")),
            (Some(&b"key"[..]), &b"value"[..])
        );
        assert_eq!(split_key(b":v", Some(b":")), (Some(&b""[..]), &b"v"[..]));
        assert_eq!(split_key(b"k:", Some(b":")), (Some(&b"k"[..]), &b""[..]));
        assert_eq!(split_key(b"novalue", Some(b":")), (None, &b"novalue"[..]));
        assert_eq!(split_key(b"a:b", None), (None, &b"a:b"[..]));
        assert_eq!(split_key(b"a:b", Some(b"")), (None, &b"a:b"[..]));
    }

    #[test]
    fn headers_are_key_equals_value() {
        assert_eq!(
            parse_header("a=b=c").unwrap(),
            ("a".into(), b"b=c".to_vec())
        );
        assert_eq!(parse_header("a=").unwrap(), ("a".into(), Vec::new()));
        assert!(parse_header("novalue").is_err());
        assert!(parse_header("=v").is_err());
    }

    #[test]
    fn failures_are_counted_by_kafka_name() {
        let mut d = Deliveries::default();
        let e = Arc::new(ClientError::Kafka {
            api: "Produce",
            code: crate::client::KafkaCode(10),
            message: None,
        });
        d.record(Err(e.clone()));
        d.record(Err(e));
        d.record(Ok(crate::client::RecordMetadata {
            partition: 0,
            offset: 1,
        }));
        assert_eq!(d.delivered, 1);
        assert_eq!(d.failed_count(), 2);
        let (n, first) = &d.failed["MESSAGE_TOO_LARGE"];
        assert_eq!(*n, 2);
        assert!(first.contains("max.message.bytes"), "{first}");
    }
}
