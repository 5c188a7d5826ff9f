//! The shard's side of producer ids: a shard takes ids from its block and asks shard 0 for a
//! new block when it runs out; shard 0 gets blocks from the controller (cluster mode) or its
//! data directory's counter (`idempotence::producer_ids`).

use std::rc::Rc;

use super::messages::{ShardReply, ShardRequest};
use super::Shard;
use crate::idempotence::producer_ids::ProducerIdError;
use crate::metadata::store::METADATA_DIR;
use crate::model::ProducerIdBlock;

impl Shard {
    /// A producer id never handed out before on this data directory.
    pub async fn allocate_producer_id(self: &Rc<Self>) -> Result<i64, ProducerIdError> {
        if let Some(id) = self.producer_ids.take() {
            return Ok(id);
        }
        let block = if self.id == 0 {
            self.allocate_producer_id_block().await?
        } else {
            match self.request(0, ShardRequest::AllocateProducerIdBlock).await {
                Some(ShardReply::ProducerIdBlock(result)) => result?,
                _ => return Err(ProducerIdError::Unavailable),
            }
        };
        self.producer_ids
            .install_and_take(block)
            .ok_or(ProducerIdError::Unavailable)
    }

    /// Shard 0's side of [`ShardRequest::AllocateProducerIdBlock`]: from the controller in
    /// cluster mode (ids unique cluster-wide), else from this data directory's counter.
    pub(super) async fn allocate_producer_id_block(
        &self,
    ) -> Result<ProducerIdBlock, ProducerIdError> {
        if self.config.is_cluster_mode() {
            return self.controller_producer_id_block().await;
        }
        self.producer_ids
            .allocate_block(&self.config.data_dir.join(METADATA_DIR))
            .await
    }
}
