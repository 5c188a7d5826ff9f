//! The CONTROLLER listener: answers Raft RPCs from the other voters and hands brokers'
//! registrations and heartbeats to the active controller's loop (through a bounded channel,
//! so this file knows nothing of the controller's decisions).
//!
//! A connection serves one request at a time, in order. A frame that is too large or does
//! not decode closes that connection (logged) and nothing else.

use std::rc::Rc;

use futures_lite::future;

use super::state_machine::MetadataView;
use super::wire::{read_frame, write_frame, ControllerRequest, ControllerResponse, WireError};
use super::Raft;
use crate::model::MetadataOffset;
use crate::runtime::{self, LocalSender, TcpListener, TcpStream};
use crate::util::local_oneshot;
use crate::util::shutdown::ShutdownSignal;

/// A broker request for the active controller, with the slot for its answer.
pub type BrokerCall = (ControllerRequest, local_oneshot::Sender<ControllerResponse>);

/// What a connection needs to answer.
#[derive(Clone)]
pub struct ServerContext {
    pub raft: Raft,
    pub view: Rc<MetadataView>,
    /// Where broker requests go; `None` answers them "not the controller".
    pub broker_calls: Option<Rc<LocalSender<BrokerCall>>>,
    pub shutdown: Rc<ShutdownSignal>,
}

/// Accepts connections until shutdown; each is served by its own task.
pub async fn serve(listener: TcpListener, ctx: ServerContext) {
    loop {
        let accepted = future::or(async { Some(listener.accept().await) }, async {
            ctx.shutdown.wait().await;
            None
        })
        .await;
        match accepted {
            None => return,
            Some(Ok(stream)) => {
                let ctx = ctx.clone();
                runtime::spawn_detached(async move { serve_connection(stream, ctx).await });
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "controller listener: accept failed");
                // An accept error (out of descriptors) must not spin the shard.
                runtime::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

async fn serve_connection(mut stream: TcpStream, ctx: ServerContext) {
    loop {
        let request = future::or(async { Some(read_frame(&mut stream).await) }, async {
            ctx.shutdown.wait().await;
            None
        })
        .await;
        let request: ControllerRequest = match request {
            None | Some(Ok(None)) => return,
            Some(Ok(Some(r))) => r,
            Some(Err(e)) => {
                if !matches!(e, WireError::Closed) {
                    tracing::warn!(error = %e, "controller connection: bad request, closing");
                }
                return;
            }
        };
        let response = answer(&ctx, request).await;
        if let Err(e) = write_frame(&mut stream, &response).await {
            tracing::debug!(error = %e, "controller connection: cannot answer, closing");
            return;
        }
    }
}

async fn answer(ctx: &ServerContext, request: ControllerRequest) -> ControllerResponse {
    match request {
        ControllerRequest::AppendEntries(rpc) => ControllerResponse::AppendEntries(
            ctx.raft
                .append_entries(rpc)
                .await
                .map_err(|e| e.to_string()),
        ),
        ControllerRequest::Vote(rpc) => {
            ControllerResponse::Vote(ctx.raft.vote(rpc).await.map_err(|e| e.to_string()))
        }
        ControllerRequest::InstallSnapshot(rpc) => {
            ControllerResponse::InstallSnapshot(ctx.raft.install_snapshot(rpc).await)
        }
        ControllerRequest::Status => {
            ControllerResponse::Status(super::status::report(&ctx.raft, &ctx.view))
        }
        ControllerRequest::FetchMetadata { after, wait_ms } => {
            fetch_metadata(&ctx.view, after, wait_ms, &ctx.shutdown).await
        }
        broker @ (ControllerRequest::RegisterBroker(_)
        | ControllerRequest::BrokerHeartbeat(_)
        | ControllerRequest::TopicChanges { .. }
        | ControllerRequest::AlterPartition(_)
        | ControllerRequest::AllocateProducerIds { .. }) => {
            let not_controller = || ControllerResponse::NotController {
                leader: ctx.raft.metrics().borrow().current_leader,
            };
            let Some(calls) = &ctx.broker_calls else {
                return not_controller();
            };
            let (tx, rx) = local_oneshot::channel();
            if calls.send((broker, tx)).await.is_err() {
                return not_controller();
            }
            rx.await.unwrap_or_else(not_controller)
        }
    }
}

/// The longest a FetchMetadata may wait (the asker's request timeout is longer).
const MAX_METADATA_WAIT_MS: u64 = 5_000;

/// Answers once the applied offset is past `after`, or with `None` after the wait.
async fn fetch_metadata(
    view: &MetadataView,
    after: Option<MetadataOffset>,
    wait_ms: u64,
    shutdown: &ShutdownSignal,
) -> ControllerResponse {
    let mut applied = view.subscribe();
    let past = |offset: Option<MetadataOffset>| offset.is_some() && offset > after;
    let waited = future::or(
        async {
            while !past(*applied.borrow_and_update()) {
                if applied.changed().await.is_err() {
                    break;
                }
            }
        },
        future::or(
            runtime::sleep(std::time::Duration::from_millis(
                wait_ms.min(MAX_METADATA_WAIT_MS),
            )),
            shutdown.wait(),
        ),
    );
    waited.await;
    if !past(view.applied_offset()) {
        return ControllerResponse::Metadata(None);
    }
    ControllerResponse::Metadata(Some(view.get().to_snapshot()))
}
