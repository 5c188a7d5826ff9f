//! openraft's log storage for the metadata log: one file of framed entries plus the vote.
//!
//! Durability as openraft requires it: an append is written and fdatasynced before its
//! callback reports it stored, and the vote is replaced atomically (temporary file, fsync,
//! rename, directory fsync) before `save_vote` returns. Entries are also kept in memory (the
//! metadata log is small and purged after every snapshot), so reads never wait for the disk.
//!
//! File layout (`log`): frames ([`super::frame`]) whose payloads are `LogFileRecord`s in
//! JSON: optionally one `Purged` first (the last log id a snapshot replaced), then entries with
//! consecutive indexes. Truncation cuts the file at an entry's frame; a purge rewrites the
//! file (purges follow snapshots, which are rare) and replaces it atomically. On open, a torn
//! or corrupt tail (a crash during an append that was never acknowledged) is cut off.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{LogState, RaftLogReader, StorageIOError, Vote};
use serde::{Deserialize, Serialize};

use super::frame::{push_frame, read_frames};
use super::{Entry, LogId, MetadataRaft, StorageError};
use crate::model::BrokerId;
use crate::runtime::File;
use crate::runtime::{self, durable_file};

const LOG_FILE: &str = "log";
/// Kafka's name for the file holding the quorum's vote.
const VOTE_FILE: &str = "quorum-state";

/// One frame's payload in the log file.
#[derive(Debug, Serialize, Deserialize)]
enum LogFileRecord {
    Purged(LogId),
    Entry(Entry),
}

/// What is wrong with the files found at open.
#[derive(Debug, thiserror::Error)]
pub enum LogOpenError {
    #[error("metadata log {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("metadata log {path}: frame at byte {position} is not a log record: {reason}")]
    BadRecord {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    #[error(
        "metadata log {path}: entry {found} follows {expected_after} (entries must be consecutive)"
    )]
    Gap {
        path: PathBuf,
        expected_after: u64,
        found: u64,
    },
}

/// The in-memory copy of the log, shared with the readers openraft asks for.
#[derive(Debug, Default)]
struct LogCache {
    entries: BTreeMap<u64, Entry>,
    last_purged: Option<LogId>,
}

impl LogCache {
    fn last_log_id(&self) -> Option<LogId> {
        self.entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(self.last_purged)
    }
}

/// A reader of the log (openraft's replication tasks use one each).
#[derive(Debug, Clone)]
pub struct LogReader {
    cache: Rc<RefCell<LogCache>>,
}

/// The metadata log's storage. Owned by the Raft core task.
pub struct MetadataLogStore {
    dir: PathBuf,
    file: File,
    /// Where each entry's frame starts in the file: truncation cuts there.
    positions: BTreeMap<u64, u64>,
    /// The end of the last complete frame: the next append goes there.
    end: u64,
    cache: Rc<RefCell<LogCache>>,
    vote: Option<Vote<BrokerId>>,
}

/// What recovery found, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub entries: usize,
    /// Bytes cut off the end (a torn or corrupt tail).
    pub cut_bytes: u64,
}

fn encode_record(record: &LogFileRecord, out: &mut Vec<u8>) -> io::Result<()> {
    let json = serde_json::to_vec(record).map_err(io::Error::other)?;
    push_frame(out, &json);
    Ok(())
}

impl MetadataLogStore {
    /// Opens (creating if needed) the log in `dir`, cutting a torn tail.
    pub async fn open(dir: &Path) -> Result<(MetadataLogStore, Recovered), LogOpenError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LogOpenError::Io { path, source }
        };
        let new_dir = !dir.exists();
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        if new_dir {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                runtime::sync_dir(parent).await.map_err(io_err(parent))?;
            }
        }
        let path = dir.join(LOG_FILE);
        let new_file = !path.exists();
        let file = File::open_or_create(&path).await.map_err(io_err(&path))?;
        // A new file's name is durable before anything in it is acknowledged: a power loss
        // could otherwise take the whole file away, entries a quorum counted included.
        if new_file {
            runtime::sync_dir(dir).await.map_err(io_err(dir))?;
        }
        let size = file.size().await.map_err(io_err(&path))?;
        let bytes = file
            .read_at(0, size as usize)
            .await
            .map_err(io_err(&path))?;
        let read = read_frames(&bytes);
        let mut cache = LogCache::default();
        let mut positions = BTreeMap::new();
        for (position, payload) in &read.frames {
            let record: LogFileRecord =
                serde_json::from_slice(payload).map_err(|e| LogOpenError::BadRecord {
                    path: path.clone(),
                    position: *position,
                    reason: e.to_string(),
                })?;
            match record {
                LogFileRecord::Purged(id) => cache.last_purged = Some(id),
                LogFileRecord::Entry(entry) => {
                    let index = entry.log_id.index;
                    if let Some(last) = cache.last_log_id() {
                        if index != last.index + 1 {
                            return Err(LogOpenError::Gap {
                                path,
                                expected_after: last.index,
                                found: index,
                            });
                        }
                    }
                    positions.insert(index, *position);
                    cache.entries.insert(index, entry);
                }
            }
        }
        let cut_bytes = size - read.valid_len;
        if let Some(problem) = read.tail {
            tracing::warn!(
                path = %path.display(),
                ?problem,
                cut_bytes,
                "metadata log ends in an incomplete or corrupt frame (a crash during an append); cutting it off"
            );
            file.truncate(read.valid_len).await.map_err(io_err(&path))?;
            file.fdatasync().await.map_err(io_err(&path))?;
        }
        let vote_path = dir.join(VOTE_FILE);
        let vote = match durable_file::read_all(&vote_path).await {
            Ok(bytes) => Some(
                decode_vote(&bytes).map_err(|reason| LogOpenError::BadRecord {
                    path: vote_path.clone(),
                    position: 0,
                    reason,
                })?,
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err(&vote_path)(e)),
        };
        let recovered = Recovered {
            entries: cache.entries.len(),
            cut_bytes,
        };
        let store = MetadataLogStore {
            dir: dir.to_path_buf(),
            file,
            positions,
            end: read.valid_len,
            cache: Rc::new(RefCell::new(cache)),
            vote,
        };
        Ok((store, recovered))
    }

    /// The log ids held, first to last (for tests and status).
    pub fn log_ids(&self) -> Vec<LogId> {
        self.cache
            .borrow()
            .entries
            .values()
            .map(|e| e.log_id)
            .collect()
    }

    pub fn last_purged(&self) -> Option<LogId> {
        self.cache.borrow().last_purged
    }

    pub fn vote(&self) -> Option<Vote<BrokerId>> {
        self.vote
    }

    async fn write_entries(&mut self, entries: Vec<Entry>) -> io::Result<()> {
        let mut buf = Vec::new();
        let mut starts = Vec::with_capacity(entries.len());
        for entry in &entries {
            starts.push((entry.log_id.index, self.end + buf.len() as u64));
            encode_record(&LogFileRecord::Entry(entry.clone()), &mut buf)?;
        }
        let len = buf.len() as u64;
        {
            // Readers see the entries as soon as they are accepted; openraft only counts
            // them as stored once the callback below reports the fsync.
            let mut cache = self.cache.borrow_mut();
            for entry in entries {
                cache.entries.insert(entry.log_id.index, entry);
            }
        }
        self.positions.extend(starts);
        self.file.write_all_at(buf, self.end).await?;
        self.end += len;
        self.file.fdatasync().await
    }

    async fn cut_from(&mut self, index: u64) -> io::Result<()> {
        let Some(&position) = self.positions.range(index..).next().map(|(_, p)| p) else {
            return Ok(());
        };
        self.cache.borrow_mut().entries.split_off(&index);
        self.positions.split_off(&index);
        self.file.truncate(position).await?;
        self.end = position;
        self.file.fdatasync().await
    }

    /// Drops entries up to `upto` and rewrites the file without them.
    async fn purge_upto(&mut self, upto: LogId) -> io::Result<()> {
        let kept: Vec<Entry> = {
            let mut cache = self.cache.borrow_mut();
            let kept = cache.entries.split_off(&(upto.index + 1));
            cache.entries = kept;
            cache.last_purged = Some(upto);
            cache.entries.values().cloned().collect()
        };
        let mut buf = Vec::new();
        encode_record(&LogFileRecord::Purged(upto), &mut buf)?;
        let mut positions = BTreeMap::new();
        for entry in kept {
            positions.insert(entry.log_id.index, buf.len() as u64);
            encode_record(&LogFileRecord::Entry(entry), &mut buf)?;
        }
        let path = self.dir.join(LOG_FILE);
        let len = buf.len() as u64;
        durable_file::replace(&path, buf).await?;
        let file = File::open_existing(&path).await?;
        let old = std::mem::replace(&mut self.file, file);
        // The old descriptor points at the replaced inode; a failed close loses nothing.
        let _ = old.close().await;
        self.positions = positions;
        self.end = len;
        Ok(())
    }
}

fn encode_vote(vote: &Vote<BrokerId>) -> io::Result<Vec<u8>> {
    let json = serde_json::to_vec(vote).map_err(io::Error::other)?;
    let mut out = Vec::new();
    push_frame(&mut out, &json);
    Ok(out)
}

fn decode_vote(bytes: &[u8]) -> Result<Vote<BrokerId>, String> {
    let read = read_frames(bytes);
    match (read.frames.as_slice(), read.tail) {
        ([(_, payload)], None) => serde_json::from_slice(payload).map_err(|e| e.to_string()),
        _ => {
            Err("not one intact frame (the file is replaced atomically, so this is damage)".into())
        }
    }
}

fn entries_in<RB: RangeBounds<u64>>(cache: &RefCell<LogCache>, range: RB) -> Vec<Entry> {
    cache
        .borrow()
        .entries
        .range(range)
        .map(|(_, e)| e.clone())
        .collect()
}

impl RaftLogReader<MetadataRaft> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(entries_in(&self.cache, range))
    }
}

impl RaftLogReader<MetadataRaft> for MetadataLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(entries_in(&self.cache, range))
    }
}

impl RaftLogStorage<MetadataRaft> for MetadataLogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<MetadataRaft>, StorageError> {
        let cache = self.cache.borrow();
        Ok(LogState {
            last_purged_log_id: cache.last_purged,
            last_log_id: cache.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        LogReader {
            cache: Rc::clone(&self.cache),
        }
    }

    async fn save_vote(&mut self, vote: &Vote<BrokerId>) -> Result<(), StorageError> {
        let bytes = encode_vote(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        durable_file::replace(&self.dir.join(VOTE_FILE), bytes)
            .await
            .map_err(|e| StorageIOError::write_vote(&e))?;
        self.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<BrokerId>>, StorageError> {
        Ok(self.vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<MetadataRaft>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry>,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        match self.write_entries(entries).await {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let err = StorageIOError::write_logs(&e);
                callback.log_io_completed(Err(e));
                Err(err.into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.cut_from(log_id.index)
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.purge_upto(log_id)
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }
}
