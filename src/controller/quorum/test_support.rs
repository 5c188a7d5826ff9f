//! What the quorum's in-process tests share: loopback addresses for a set of voters, a broker
//! registration record, and a call into a controller loop.

use std::net::SocketAddr;

use super::server::BrokerCall;
use super::wire::{ControllerRequest, ControllerResponse};
use crate::controller::records::{MetadataRecord, RegisterBroker};
use crate::model::BrokerId;
use crate::runtime::{LocalSender, TcpListener};
use crate::util::local_oneshot;

/// `n` free loopback addresses and the voter list naming them (ids 1..=n). The listeners that
/// found them are closed again, for the nodes to bind.
pub fn voter_addresses(n: usize) -> (Vec<SocketAddr>, Vec<(BrokerId, String)>) {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind_exclusive("127.0.0.1:0".parse().expect("addr")).expect("bind"))
        .collect();
    let addrs: Vec<SocketAddr> = listeners
        .iter()
        .map(|l| l.local_addr().expect("addr"))
        .collect();
    let voters = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| (BrokerId(i as i32 + 1), a.to_string()))
        .collect();
    (addrs, voters)
}

/// A registration of broker `id` (incarnation derived from the id).
pub fn register(id: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBroker {
        broker_id: BrokerId(id),
        incarnation: uuid::Uuid::from_u128(id as u128),
        endpoints: Vec::new(),
        rack: None,
    })
}

/// One request to a controller loop, and its answer.
pub async fn call(
    calls: &LocalSender<BrokerCall>,
    request: ControllerRequest,
) -> ControllerResponse {
    let (tx, rx) = local_oneshot::channel();
    calls
        .send((request, tx))
        .await
        .expect("the controller loop runs");
    rx.await.expect("the controller loop answers")
}
