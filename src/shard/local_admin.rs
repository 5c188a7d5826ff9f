//! A single node's admin changes on shard 0: decided by its own controller
//! (`controller::local`) with the rules the cluster's active controller applies, saved, then
//! published to every shard before the request is answered.

use std::rc::Rc;
use std::sync::Arc;

use super::cluster_admin::change_of;
use super::messages::{AdminError, AdminOp, MetadataRequest, ShardRequest};
use super::stored_metadata::StoredSide;
use super::{advertised_self, Shard};
use crate::config::topic_log_config;
use crate::controller::image::single_node_image;
use crate::controller::records::MetadataRecord;
use crate::metadata::{store, MetadataImage};
use crate::protocol::ResponseError;
use crate::runtime;

fn invalid_config(e: impl std::fmt::Display) -> AdminError {
    AdminError {
        code: ResponseError::InvalidConfig.code(),
        message: e.to_string(),
    }
}

impl Shard {
    /// Shard 0 of a single node, inside the admin section: one change, decided, saved and
    /// published (or, with `validate_only`, only decided).
    pub(super) async fn execute_local_admin(
        self: &Rc<Self>,
        op: AdminOp,
    ) -> Result<Arc<MetadataImage>, AdminError> {
        // Topic configs are checked against this broker's defaults too (a value may be valid
        // alone and not with them, e.g. a segment smaller than the index interval).
        if let AdminOp::CreateTopic { configs, .. } | AdminOp::SetTopicConfigs { configs, .. } = &op
        {
            let defaults = self.effective_config().log_defaults;
            topic_log_config(&defaults, configs).map_err(invalid_config)?;
        }
        let (records, validate_only) = self.decide_local(op)?;
        let (next, cluster_id) = {
            let stored = self.stored.borrow();
            let StoredSide::Local {
                controller,
                cluster_id,
            } = &*stored
            else {
                return Err(AdminError {
                    code: ResponseError::UnknownServerError.code(),
                    message: "metadata changes are made on shard 0 only".to_string(),
                });
            };
            (controller.applied(&records), cluster_id.clone())
        };
        let image = Arc::new(single_node_image(
            &next,
            cluster_id,
            &advertised_self(&self.config),
        ));
        if validate_only {
            return Ok(image);
        }
        store::save(&self.config.data_dir, &next.to_snapshot())
            .await
            .map_err(|e| AdminError {
                code: ResponseError::KafkaStorageError.code(),
                message: e.to_string(),
            })?;
        if let StoredSide::Local { controller, .. } = &mut *self.stored.borrow_mut() {
            controller.commit(next);
        }
        self.publish_local(&image).await;
        Ok(image)
    }

    /// The records of `op` as this node's controller decides them, and whether it is only
    /// to be validated.
    fn decide_local(&self, op: AdminOp) -> Result<(Vec<MetadataRecord>, bool), AdminError> {
        let stored = self.stored.borrow();
        let StoredSide::Local { controller, .. } = &*stored else {
            return Err(AdminError {
                code: ResponseError::UnknownServerError.code(),
                message: "metadata changes are made on shard 0 only".to_string(),
            });
        };
        let (change, validate_only) = change_of(op)?;
        let decision = controller.decide(&[change], crate::util::entropy::uuid_v4);
        if let Some(Err(refused)) = decision.results.into_iter().next() {
            return Err(AdminError {
                code: refused.code,
                message: refused.message,
            });
        }
        Ok((decision.records, validate_only))
    }

    /// Hands `image` to every shard (this one included) and waits until all have adopted it:
    /// the change is answered only once every shard serves it.
    async fn publish_local(self: &Rc<Self>, image: &Arc<MetadataImage>) {
        let mut tasks = Vec::new();
        for to in 0..self.count {
            if to == self.id {
                continue;
            }
            let shard = Rc::clone(self);
            let image = Arc::clone(image);
            tasks.push(runtime::spawn(async move {
                shard
                    .request(to, ShardRequest::Metadata(MetadataRequest::Apply(image)))
                    .await
            }));
        }
        self.adopt_image(Arc::clone(image)).await;
        for t in tasks {
            if t.await.is_none() {
                tracing::error!("a shard did not acknowledge new metadata");
            }
        }
    }
}
