//! `ringbroker tune`: checks (and with `--apply`, adjusts) the Linux settings a broker
//! depends on, for a throughput or a latency profile. See `tuning/README.md` for the
//! reasoning and measurements behind each recommendation.
//!
//! The pipeline keeps I/O at the edges:
//! [`read::read_snapshot`] (I/O) → [`SystemSnapshot`] → [`evaluate::evaluate`] (pure) →
//! [`Finding`]s → [`render`] (text or JSON) / [`apply::apply`] (writes).
//!
//! - [`args`]: the command line; [`profile`]: throughput | latency
//! - [`snapshot`]: the values read; [`read`]: reading them; [`parse`]: kernel text formats
//! - [`evaluate`]: the rules; [`finding`]: their outcome; [`units`]: sizes for people
//! - [`apply`]: runtime writes; [`sysroot`]: where `/proc` and `/sys` are (tests fake them)
//! - [`render`]: table, JSON, apply report; [`error`]: what makes the command fail
pub mod apply;
pub mod args;
pub mod error;
pub mod evaluate;
pub mod finding;
pub mod parse;
pub mod profile;
pub mod read;
pub mod render;
pub mod snapshot;
pub mod sysroot;
pub mod units;

use std::path::PathBuf;

pub use args::TuneArgs;
pub use error::TuneError;
pub use finding::Finding;
pub use profile::Profile;
pub use snapshot::SystemSnapshot;

use sysroot::SysRoot;

/// Runs `tune --check` or `tune --apply`, printing to `out`. `Ok(true)`: everything is
/// fine (exit 0); `Ok(false)`: something is off (exit 1); `Err`: exit 2.
pub fn main(args: &TuneArgs, out: &mut dyn std::io::Write) -> Result<bool, TuneError> {
    let root = SysRoot::new(&args.sys_root);
    if !args.sys_root.is_dir() {
        return Err(TuneError::SysRoot(args.sys_root.clone()));
    }
    let (data_dir, shards) = target(args)?;
    if args.apply && !args.dry_run && root.is_real() && !is_root() {
        return Err(TuneError::NotRoot);
    }
    let snapshot = read::read_snapshot(&root, &data_dir, shards);
    let findings = evaluate::evaluate(&snapshot, args.profile);
    if !args.apply {
        if args.json {
            let doc = render::CheckJson {
                profile: args.profile,
                data_dir: &data_dir,
                ok: evaluate::all_ok(&findings),
                findings: &findings,
            };
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        } else {
            write!(out, "{}", render::table(&findings, args.profile, &data_dir))?;
        }
        return Ok(evaluate::all_ok(&findings));
    }

    let report = apply::apply(&findings, &root, args.dry_run);
    // What is still off: re-read after real writes; for a dry run, whatever has no write.
    let after = if args.dry_run {
        findings.clone()
    } else {
        evaluate::evaluate(&read::read_snapshot(&root, &data_dir, shards), args.profile)
    };
    let remaining: Vec<&Finding> = after
        .iter()
        .filter(|f| !f.ok && (!args.dry_run || f.apply.is_empty()))
        .collect();
    if args.json {
        let doc = render::ApplyJson {
            profile: args.profile,
            dry_run: args.dry_run,
            report: &report,
            remaining: remaining.clone(),
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        write!(
            out,
            "{}",
            render::apply_report(&report, &remaining, args.dry_run)
        )?;
    }
    if !report.failures.is_empty() {
        return Err(TuneError::ApplyFailed {
            failed: report.failures.len(),
            attempted: report.failures.len() + report.changes.len(),
        });
    }
    Ok(remaining.is_empty())
}

/// The data directory and shard count to check: flags first, then --config, then the
/// broker's defaults.
fn target(args: &TuneArgs) -> Result<(PathBuf, Option<usize>), TuneError> {
    let config = match &args.config {
        Some(path) => Some(crate::config::BrokerConfig::from_file(path)?),
        None => None,
    };
    let data_dir = args
        .data_dir
        .clone()
        .or_else(|| config.as_ref().map(|c| c.data_dir.clone()))
        .unwrap_or_else(|| PathBuf::from("./data"));
    let shards = args.shards.or(config.as_ref().map(|c| c.shards));
    Ok((data_dir, shards))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
