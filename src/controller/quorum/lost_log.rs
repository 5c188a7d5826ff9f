//! A voter that lost its metadata log must not start as one (issue 32, finding 7).
//!
//! A voter whose log directory was wiped would initialize itself again from
//! `controller.quorum.voters`, as on a cluster's first start, and could then vote for a
//! candidate that misses committed entries: with the voter that still has them, a majority
//! that forgot them (Raft assumes stable storage). Kafka 3.9 tells the two apart with
//! directory ids in the voter set (KIP-853); a static quorum here uses two pieces of evidence
//! that the empty log is a lost one, not a new one:
//! - a marker beside the log directory, written once this voter's log held the quorum's
//!   first entry (a wiped log directory with the rest of the data directory intact);
//! - a leader among the other voters that knows this voter held entries (the whole data
//!   directory wiped): its replication state names a log end here past the first entry.
//!
//! Either refuses the start with a line saying what to do. Without either (every peer
//! unreachable and the whole directory gone), the start cannot tell and proceeds.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::status::fetch_status;
use super::status_report::ClusterStatusReport;
use crate::model::BrokerId;
use crate::runtime;

/// How long each other voter is given to answer at start.
const PEER_TIMEOUT: Duration = Duration::from_millis(1_000);

/// The marker file beside the log directory `dir` (`<data dir>/<log dir name>.voter`).
pub fn marker_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".voter");
    dir.with_file_name(name)
}

/// Writes the marker (durably) once the log holds the quorum's first entry.
pub fn write_marker(dir: &Path, me: BrokerId) -> std::io::Result<()> {
    let path = marker_path(dir);
    if path.exists() {
        return Ok(());
    }
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    writeln!(
        f,
        "# node {me} is a voter whose metadata log is in {}; an empty log there at a later \
         start means it was lost",
        dir.display()
    )?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(parent)?.sync_all()
}

/// Why an empty log is a lost one, from the reports of the other voters that answered: a
/// leader's replication state says voter `me` held entries past the first.
pub fn evidence_from_peers(me: BrokerId, reports: &[ClusterStatusReport]) -> Option<String> {
    reports.iter().find_map(|r| {
        if r.leader != Some(r.node_id) {
            return None;
        }
        let held = r
            .voters
            .iter()
            .find(|v| v.id == me)
            .and_then(|v| v.log_end)
            .filter(|end| *end > 0)?;
        Some(format!(
            "the quorum leader (node {}) replicated entries up to index {held} to this voter",
            r.node_id
        ))
    })
}

/// The evidence that the empty log in `dir` of voter `me` was lost, if any: the marker, then
/// the other voters' reports (asked in turn, each bounded by [`PEER_TIMEOUT`]).
pub async fn lost_log_evidence(
    dir: &Path,
    me: BrokerId,
    voters: &[(BrokerId, String)],
) -> Option<String> {
    let marker = marker_path(dir);
    if marker.exists() {
        return Some(format!(
            "{} says this voter held the metadata log before",
            marker.display()
        ));
    }
    let mut reports = Vec::new();
    for (id, address) in voters.iter().filter(|(id, _)| *id != me) {
        let Ok(addr) = address.parse() else {
            continue;
        };
        // Blocking sockets, on the blocking pool: this runs once, before the node starts.
        match runtime::spawn_blocking(move || fetch_status(addr, PEER_TIMEOUT)).await {
            Ok(report) => reports.push(report),
            Err(e) => tracing::debug!(voter = id.0, error = %e, "voter not reachable at start"),
        }
    }
    evidence_from_peers(me, &reports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::quorum::status_report::VoterStatus;

    fn report(node: i32, leader: Option<i32>, ends: &[(i32, Option<u64>)]) -> ClusterStatusReport {
        ClusterStatusReport {
            node_id: BrokerId(node),
            leader: leader.map(BrokerId),
            term: 3,
            last_log_index: Some(9),
            metadata_offset: None,
            voters: ends
                .iter()
                .map(|(id, end)| VoterStatus {
                    id: BrokerId(*id),
                    address: String::new(),
                    log_end: *end,
                    lag: None,
                })
                .collect(),
            brokers: Vec::new(),
        }
    }

    #[test]
    fn only_a_leader_that_replicated_entries_here_is_evidence() {
        let me = BrokerId(3);
        // The leader replicated up to index 7 to node 3.
        let leader = report(1, Some(1), &[(1, Some(9)), (2, Some(9)), (3, Some(7))]);
        assert!(evidence_from_peers(me, &[leader]).is_some());
        // A follower does not track the others' logs.
        let follower = report(2, Some(1), &[(3, Some(7))]);
        assert_eq!(evidence_from_peers(me, &[follower]), None);
        // A leader that never replicated anything here (a new cluster, this voter late).
        let fresh = report(1, Some(1), &[(3, None)]);
        assert_eq!(evidence_from_peers(me, &[fresh]), None);
        let only_first = report(1, Some(1), &[(3, Some(0))]);
        assert_eq!(evidence_from_peers(me, &[only_first]), None);
    }
}
