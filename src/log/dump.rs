//! `ringbroker log dump`: a read-only listing of a partition directory, for operators.
//!
//! Uses plain blocking std I/O: it runs outside any shard, on a stopped broker's data.

use std::io::{self, Write};
use std::path::Path;

use super::scan::{BatchScanner, Scanned};
use super::segment::parse_log_file_name;

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DumpSummary {
    pub segments: usize,
    pub batches: u64,
    pub records: u64,
    pub bytes: u64,
    pub invalid_batches: u64,
}

/// Lists every segment of `dir` (and every batch with `batches`), checking CRCs.
pub fn dump_dir(dir: &Path, batches: bool, out: &mut dyn Write) -> io::Result<DumpSummary> {
    let mut bases: Vec<(i64, std::path::PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            parse_log_file_name(&name).map(|b| (b, e.path()))
        })
        .collect();
    bases.sort();
    let mut summary = DumpSummary::default();
    for (base, path) in bases {
        let data = std::fs::read(&path)?;
        let mut scanner = BatchScanner::new(&data, true);
        let (mut n, mut records, mut first, mut last) = (0u64, 0u64, None, None);
        let problem = loop {
            match scanner.next_batch() {
                Scanned::Batch { position, header } => {
                    n += 1;
                    records += header.record_count.max(0) as u64;
                    first.get_or_insert(header.base_offset);
                    last = Some(header.last_offset());
                    if batches {
                        writeln!(
                            out,
                            "  position {position} base_offset {} last_offset {} count {} size {} max_timestamp {} compression {:?} producer_id {} crc {}",
                            header.base_offset,
                            header.last_offset(),
                            header.record_count,
                            header.total_len(),
                            header.max_timestamp,
                            header.compression().ok(),
                            header.producer_id,
                            header.crc
                        )?;
                    }
                }
                Scanned::End => break None,
                Scanned::Incomplete { position, needed } => {
                    break Some(format!(
                        "torn batch at position {position} (needs {needed} bytes)"
                    ))
                }
                Scanned::Invalid { position, error } => {
                    break Some(format!("invalid data at position {position}: {error}"))
                }
            }
        };
        writeln!(
            out,
            "segment {base:020} bytes {} batches {n} records {records} offsets {}..{}{}",
            data.len(),
            first.map_or("-".to_string(), |f| f.to_string()),
            last.map_or("-".to_string(), |l| l.to_string()),
            problem
                .as_deref()
                .map(|p| format!(" ERROR {p}"))
                .unwrap_or_default()
        )?;
        summary.segments += 1;
        summary.batches += n;
        summary.records += records;
        summary.bytes += data.len() as u64;
        if problem.is_some() {
            summary.invalid_batches += 1;
        }
    }
    writeln!(
        out,
        "total: {} segments, {} batches, {} records, {} bytes, {} problems",
        summary.segments, summary.batches, summary.records, summary.bytes, summary.invalid_batches
    )?;
    Ok(summary)
}
