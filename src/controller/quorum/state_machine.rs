//! openraft's state machine for the metadata log: committed entries are applied, record by
//! record, to the node's [`ClusterMetadata`]; snapshots are that value's
//! [`super::super::snapshot`] bytes.
//!
//! The state machine lives in memory; only snapshots are written (`snapshot`, replaced
//! atomically). After a restart it starts from the last snapshot and openraft re-applies the
//! committed entries after it, so nothing is applied twice and nothing is skipped.
//!
//! The applied metadata is shared with the rest of shard 0 through [`MetadataView`]: a
//! read-only borrow of the value plus a watch of the last applied offset, which is the
//! "committed stream" of the seam (a reader sees every change in log order, because the value
//! only moves forward).

use std::cell::{Ref, RefCell};
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use openraft::storage::RaftStateMachine;
use openraft::{
    BasicNode, EntryPayload, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageIOError,
    StoredMembership,
};

use super::frame::{push_frame, read_frames};
use super::{BatchApplied, Entry, LogId, MetadataRaft, StorageError};
use crate::controller::cluster_metadata::ClusterMetadata;
use crate::controller::snapshot::{decode_snapshot, encode_snapshot};
use crate::model::{BrokerId, MetadataOffset};
use crate::runtime::durable_file;

const SNAPSHOT_FILE: &str = "snapshot";

type Meta = SnapshotMeta<BrokerId, BasicNode>;

/// The applied metadata of this node, shared on shard 0.
#[derive(Debug)]
pub struct MetadataView {
    meta: RefCell<ClusterMetadata>,
    applied: tokio::sync::watch::Sender<Option<MetadataOffset>>,
    /// On the active controller: the offset each broker said in its last heartbeat it has
    /// applied (soft state for `cluster status`, not part of the metadata).
    reported: RefCell<std::collections::BTreeMap<crate::model::BrokerId, MetadataOffset>>,
}

impl MetadataView {
    pub fn new(meta: ClusterMetadata) -> MetadataView {
        let applied = meta.applied_offset();
        MetadataView {
            meta: RefCell::new(meta),
            applied: tokio::sync::watch::Sender::new(applied),
            reported: RefCell::new(std::collections::BTreeMap::new()),
        }
    }

    /// The applied metadata. Do not hold the borrow across an await: applying waits for it.
    pub fn get(&self) -> Ref<'_, ClusterMetadata> {
        self.meta.borrow()
    }

    pub fn applied_offset(&self) -> Option<MetadataOffset> {
        *self.applied.borrow()
    }

    /// A broker's heartbeat said it has applied `offset`.
    pub fn note_reported(&self, broker: crate::model::BrokerId, offset: MetadataOffset) {
        self.reported.borrow_mut().insert(broker, offset);
    }

    /// What `broker` last reported having applied, as heard by this node.
    pub fn reported(&self, broker: crate::model::BrokerId) -> Option<MetadataOffset> {
        self.reported.borrow().get(&broker).copied()
    }

    /// Changes whenever records were applied.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Option<MetadataOffset>> {
        self.applied.subscribe()
    }

    /// Replaces the whole metadata (a snapshot installed, or fetched by a broker-only node).
    pub fn replace(&self, meta: ClusterMetadata) {
        let applied = meta.applied_offset();
        *self.meta.borrow_mut() = meta;
        self.applied.send_replace(applied);
    }
}

/// A snapshot as held in memory and in the `snapshot` file.
#[derive(Debug, Clone)]
struct StoredSnapshot {
    meta: Meta,
    data: Vec<u8>,
}

impl StoredSnapshot {
    fn to_snapshot(&self) -> Snapshot<MetadataRaft> {
        Snapshot {
            meta: self.meta.clone(),
            snapshot: Box::new(Cursor::new(self.data.clone())),
        }
    }

    /// Two frames: the meta as JSON, then the metadata snapshot bytes.
    fn encode(&self) -> io::Result<Vec<u8>> {
        let meta = serde_json::to_vec(&self.meta).map_err(io::Error::other)?;
        let mut out = Vec::with_capacity(meta.len() + self.data.len() + 16);
        push_frame(&mut out, &meta);
        push_frame(&mut out, &self.data);
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> io::Result<StoredSnapshot> {
        let read = read_frames(bytes);
        match (read.frames.as_slice(), read.tail) {
            ([(_, meta), (_, data)], None) => Ok(StoredSnapshot {
                meta: serde_json::from_slice(meta).map_err(io::Error::other)?,
                data: data.to_vec(),
            }),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "metadata snapshot file is damaged (it is replaced atomically, so this is not a torn write)",
            )),
        }
    }
}

async fn save(dir: &Path, snapshot: &StoredSnapshot) -> io::Result<()> {
    durable_file::replace(&dir.join(SNAPSHOT_FILE), snapshot.encode()?).await
}

/// The metadata log's state machine. Owned by openraft's state-machine task.
pub struct MetadataStateMachine {
    dir: PathBuf,
    view: Rc<MetadataView>,
    last_applied: Option<LogId>,
    membership: StoredMembership<BrokerId, BasicNode>,
    current: Rc<RefCell<Option<StoredSnapshot>>>,
    /// Tests: while set, applying waits (a node whose state machine lags its log).
    #[cfg(test)]
    apply_gate: Option<Rc<std::cell::Cell<bool>>>,
}

impl MetadataStateMachine {
    /// Starts from the snapshot in `dir`, if there is one.
    pub async fn open(dir: &Path) -> io::Result<MetadataStateMachine> {
        let path = dir.join(SNAPSHOT_FILE);
        let stored = match durable_file::read_all(&path).await {
            Ok(bytes) => Some(StoredSnapshot::decode(&bytes)?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let (meta, last_applied, membership) = match &stored {
            Some(s) => (
                decode_snapshot(&s.data)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
                s.meta.last_log_id,
                s.meta.last_membership.clone(),
            ),
            None => (ClusterMetadata::new(), None, StoredMembership::default()),
        };
        Ok(MetadataStateMachine {
            dir: dir.to_path_buf(),
            view: Rc::new(MetadataView::new(meta)),
            last_applied,
            membership,
            current: Rc::new(RefCell::new(stored)),
            #[cfg(test)]
            apply_gate: None,
        })
    }

    /// Tests: applying waits while `gate` is set.
    #[cfg(test)]
    pub fn with_apply_gate(mut self, gate: Option<Rc<std::cell::Cell<bool>>>) -> Self {
        self.apply_gate = gate;
        self
    }

    pub fn view(&self) -> Rc<MetadataView> {
        Rc::clone(&self.view)
    }

    fn apply_entry(&mut self, entry: Entry) -> BatchApplied {
        self.last_applied = Some(entry.log_id);
        match entry.payload {
            EntryPayload::Blank => BatchApplied {
                first_offset: None,
                skipped: 0,
            },
            EntryPayload::Membership(m) => {
                self.membership = StoredMembership::new(Some(entry.log_id), m);
                BatchApplied {
                    first_offset: None,
                    skipped: 0,
                }
            }
            EntryPayload::Normal(batch) => {
                let mut meta = self.view.meta.borrow_mut();
                let first = MetadataOffset(meta.applied_offset().map_or(1, |o| o.0 + 1));
                let mut skipped_records = 0;
                for (i, record) in batch.0.iter().enumerate() {
                    let offset = MetadataOffset(first.0 + i as u64);
                    // A skipped record is part of the log all the same (records.rs).
                    if let Err(skipped) = meta.apply(offset, record) {
                        tracing::debug!(%offset, ?skipped, "metadata record skipped");
                        skipped_records += 1;
                    }
                }
                BatchApplied {
                    first_offset: (!batch.0.is_empty()).then_some(first),
                    skipped: skipped_records,
                }
            }
        }
    }
}

/// Builds a snapshot of the state at the time it was asked for.
pub struct MetadataSnapshotBuilder {
    dir: PathBuf,
    meta: Meta,
    data: Result<Vec<u8>, String>,
    current: Rc<RefCell<Option<StoredSnapshot>>>,
}

impl RaftSnapshotBuilder<MetadataRaft> for MetadataSnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<MetadataRaft>, StorageError> {
        let data = self
            .data
            .clone()
            .map_err(|e| StorageIOError::write_snapshot(None, &io::Error::other(e)))?;
        let stored = StoredSnapshot {
            meta: self.meta.clone(),
            data,
        };
        save(&self.dir, &stored)
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(stored.meta.signature()), &e))?;
        let snapshot = stored.to_snapshot();
        *self.current.borrow_mut() = Some(stored);
        Ok(snapshot)
    }
}

impl RaftStateMachine<MetadataRaft> for MetadataStateMachine {
    type SnapshotBuilder = MetadataSnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId>, StoredMembership<BrokerId, BasicNode>), StorageError> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<BatchApplied>, StorageError>
    where
        I: IntoIterator<Item = Entry>,
    {
        #[cfg(test)]
        if let Some(gate) = self.apply_gate.clone() {
            while gate.get() {
                crate::runtime::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
        let replies: Vec<BatchApplied> = entries.into_iter().map(|e| self.apply_entry(e)).collect();
        let applied = self.view.meta.borrow().applied_offset();
        self.view.applied.send_replace(applied);
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> MetadataSnapshotBuilder {
        let last = self.last_applied;
        let meta = Meta {
            last_log_id: last,
            last_membership: self.membership.clone(),
            snapshot_id: format!(
                "{}-{}",
                last.map_or(0, |l| l.leader_id.term),
                last.map_or(0, |l| l.index)
            ),
        };
        MetadataSnapshotBuilder {
            dir: self.dir.clone(),
            meta,
            data: encode_snapshot(&self.view.get()).map_err(|e| e.to_string()),
            current: Rc::clone(&self.current),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let metadata = decode_snapshot(&data).map_err(|e| {
            StorageIOError::read_snapshot(
                Some(meta.signature()),
                &io::Error::new(io::ErrorKind::InvalidData, e),
            )
        })?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        save(&self.dir, &stored)
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.view.replace(metadata);
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        *self.current.borrow_mut() = Some(stored);
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<MetadataRaft>>, StorageError> {
        Ok(self
            .current
            .borrow()
            .as_ref()
            .map(StoredSnapshot::to_snapshot))
    }
}
