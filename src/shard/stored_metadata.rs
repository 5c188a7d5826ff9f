//! Shard 0's stored side of the metadata, and what every shard loads at start.
//!
//! On a single node shard 0 holds the broker's own controller (`controller::local`): the
//! truth, saved as a snapshot at every change. In cluster mode the truth is the metadata log;
//! shard 0 saves a copy of what it applied whenever the placement of this broker's logs
//! changed, so that the next start opens them before the log is caught up, and so that a
//! view still catching up (behind the copy) deletes nothing. Data directories of earlier
//! releases are imported here, once.

use std::rc::Rc;
use std::time::Duration;

use super::messages::AdminError;
use super::{advertised_self, Shard, ShardError};
use crate::config::BrokerConfig;
use crate::controller::active_controller::ControllerConfig;
use crate::controller::cluster_metadata::ClusterMetadata;
use crate::controller::image::single_node_image;
use crate::controller::local::{import_legacy, LocalController};
use crate::metadata::store;
use crate::metadata::{MetadataImage, MetadataSnapshot};
use crate::model::MetadataOffset;
use crate::protocol::ResponseError;
use crate::runtime;

pub(super) enum StoredSide {
    /// Shards other than 0: they only read what shard 0 publishes.
    Reader,
    /// A single node's shard 0.
    Local {
        controller: Box<LocalController>,
        cluster_id: String,
    },
    /// Cluster mode's shard 0: the applied metadata as last saved.
    Copy(Box<MetadataSnapshot>),
}

pub(super) struct Loaded {
    /// What to place this shard's logs by (and on a single node to answer from).
    pub placement: MetadataImage,
    pub stored: StoredSide,
}

/// The single node's controller settings: what it decides alone. One broker, so one replica
/// (a client asking for more was refused by the handler).
fn local_controller_config(config: &BrokerConfig) -> ControllerConfig {
    ControllerConfig {
        default_partitions: config.num_partitions,
        default_replication_factor: 1,
        ..ControllerConfig::default()
    }
}

/// Loads the metadata at start: shard 0 reads (or creates, or imports) the stored snapshot and
/// writes it back if that changed anything; the others read what shard 0 wrote (they start
/// at the same time, so a missing file on shard ≠ 0 means "not yet": wait).
pub(super) async fn load(id: usize, config: &BrokerConfig) -> Result<Loaded, ShardError> {
    let cluster_mode = config.is_cluster_mode();
    let me = advertised_self(config);
    if id != 0 {
        let mut tries = 0;
        let (cluster_id, snapshot) = loop {
            if let Some(found) = store::load_existing(&config.data_dir).await? {
                break found;
            }
            tries += 1;
            if tries > 500 {
                tracing::error!(
                    shard = id,
                    "shard 0 wrote no metadata within 5 s; this shard starts without topics"
                );
                break (String::new(), MetadataSnapshot::default());
            }
            runtime::sleep(Duration::from_millis(10)).await;
        };
        let placement = if cluster_mode {
            MetadataImage::of_snapshot(&snapshot, cluster_id)
        } else {
            match ClusterMetadata::from_snapshot(snapshot) {
                Ok(meta) => single_node_image(&meta, cluster_id, &me),
                Err(e) => {
                    // Shard 0 refuses to start on the same file: the process stops.
                    tracing::error!(shard = id, error = %e, "the stored metadata is inconsistent");
                    MetadataImage::empty(cluster_id)
                }
            }
        };
        return Ok(Loaded {
            placement,
            stored: StoredSide::Reader,
        });
    }
    let stored = store::load_or_create(&config.data_dir, config.node_id).await?;
    let mut must_save = stored.snapshot.is_none();
    let snapshot = match (stored.snapshot, &stored.legacy) {
        (Some(snapshot), _) => snapshot,
        (None, Some(legacy)) => {
            tracing::info!(
                topics = legacy.topics.len(),
                "importing the metadata file of an earlier release (metadata.json) into a snapshot"
            );
            import_legacy(legacy, me.id, cluster_mode)
        }
        (None, None) => MetadataSnapshot::default(),
    };
    let cluster_id = stored.cluster_id;
    let (placement, side, snapshot) = if cluster_mode {
        let placement = MetadataImage::of_snapshot(&snapshot, cluster_id);
        (placement, None, snapshot)
    } else {
        let (controller, changed) =
            LocalController::open(snapshot, &me, local_controller_config(config))?;
        must_save |= changed;
        let placement = single_node_image(controller.metadata(), cluster_id.clone(), &me);
        let snapshot = controller.metadata().to_snapshot();
        (placement, Some((controller, cluster_id)), snapshot)
    };
    if must_save {
        store::save(&config.data_dir, &snapshot).await?;
    }
    if stored.legacy.is_some() {
        store::retire_legacy(&config.data_dir).await?;
    }
    let stored = match side {
        Some((controller, cluster_id)) => StoredSide::Local {
            controller: Box::new(controller),
            cluster_id,
        },
        None => StoredSide::Copy(Box::new(snapshot)),
    };
    Ok(Loaded { placement, stored })
}

/// Whether `a` and `b` place this broker's logs alike: the same topics (ids, names, configs),
/// partitions (replicas, slots) and dynamic broker configs. Leaders, ISRs, epochs and brokers
/// change far more often and place nothing.
fn same_placement(a: &MetadataSnapshot, b: &MetadataSnapshot) -> bool {
    a.broker_configs == b.broker_configs
        && a.topics.len() == b.topics.len()
        && a.topics.iter().zip(&b.topics).all(|(x, y)| {
            x.id == y.id
                && x.name == y.name
                && x.configs == y.configs
                && x.partitions.len() == y.partitions.len()
                && x.partitions
                    .iter()
                    .zip(&y.partitions)
                    .all(|(p, q)| p.replicas == q.replicas && p.slot == q.slot)
        })
}

impl Shard {
    /// Cluster mode: whether metadata applied up to `offset` is behind what this broker saved
    /// before (a view still catching up after a restart): not to be saved nor published.
    pub fn behind_copied(&self, offset: Option<MetadataOffset>) -> bool {
        match &*self.stored.borrow() {
            StoredSide::Copy(copy) => copy.applied.is_some_and(|c| offset.is_none_or(|o| o < c)),
            _ => false,
        }
    }

    /// Cluster mode, shard 0: saves the applied metadata as this broker's copy when it places
    /// the logs differently from the copy saved last (before any shard acts on it, so a crash
    /// in between reopens what the shards may have created).
    pub async fn save_applied_copy(
        self: &Rc<Self>,
        meta: &ClusterMetadata,
    ) -> Result<(), AdminError> {
        let snapshot = meta.to_snapshot();
        let unchanged = match &*self.stored.borrow() {
            StoredSide::Copy(copy) => same_placement(copy, &snapshot),
            _ => return Ok(()),
        };
        if unchanged {
            return Ok(());
        }
        store::save(&self.config.data_dir, &snapshot)
            .await
            .map_err(|e| AdminError {
                code: ResponseError::KafkaStorageError.code(),
                message: e.to_string(),
            })?;
        *self.stored.borrow_mut() = StoredSide::Copy(Box::new(snapshot));
        Ok(())
    }
}
