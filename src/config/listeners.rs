//! `listeners`, `advertised.listeners` and `controller.listener.names`: kept as given (the
//! KRaft rules read them whole) and resolved here to the one client address every shard
//! listens on and the one given to clients in Metadata.

use std::net::{SocketAddr, ToSocketAddrs};

use super::broker_config::BrokerConfig;

/// `controller.listener.names` unless set (Kafka's KRaft examples name it so).
pub const DEFAULT_CONTROLLER_LISTENER_NAMES: &str = "CONTROLLER";

impl BrokerConfig {
    /// Stores one of the three listener properties and works out the client addresses again;
    /// a bad `listeners` or `advertised.listeners` leaves the previous value in place.
    pub(super) fn set_listener_property(
        &mut self,
        name: &'static str,
        value: &str,
    ) -> Result<(), String> {
        let previous = self.cluster.insert(name, value.trim().to_string());
        let resolved = self.set_listeners();
        if resolved.is_err() && name != "controller.listener.names" {
            match previous {
                Some(p) => self.cluster.insert(name, p),
                None => self.cluster.remove(name),
            };
        }
        resolved
    }

    fn controller_listener_names(&self) -> Vec<String> {
        self.cluster
            .get("controller.listener.names")
            .map_or(DEFAULT_CONTROLLER_LISTENER_NAMES, String::as_str)
            .split(',')
            .map(|n| n.trim().to_ascii_uppercase())
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// The `listeners` value for `serve --listen addr`: the controller listeners named in
    /// `listeners` stay, every other entry gives way to `addr`.
    pub(super) fn listeners_with_client(&self, addr: &str) -> String {
        let names = self.controller_listener_names();
        let current = self.cluster.get("listeners").cloned().unwrap_or_default();
        let (controllers, others): (Vec<&str>, Vec<&str>) = current
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .partition(|e| listener_name(e).is_some_and(|n| names.contains(&n)));
        if controllers.is_empty() {
            return addr.to_string();
        }
        // Next to named listeners the client one needs its name too (KRaft's syntax): the
        // name of the entry it replaces, else PLAINTEXT.
        let addr = addr.trim();
        let client = if addr.contains("://") {
            addr.to_string()
        } else {
            let name = others
                .iter()
                .find_map(|e| e.split_once("://").map(|(n, _)| n.trim()))
                .unwrap_or("PLAINTEXT");
            format!("{name}://{addr}")
        };
        std::iter::once(client.as_str())
            .chain(controllers)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The first entry of a listener list that is not a controller listener: the one
    /// clients use (`listeners=PLAINTEXT://...,CONTROLLER://...`).
    fn client_listener<'a>(&self, value: &'a str) -> &'a str {
        let names = self.controller_listener_names();
        let entries = || value.split(',').map(str::trim).filter(|e| !e.is_empty());
        entries()
            .find(|e| listener_name(e).is_none_or(|n| !names.contains(&n)))
            .or_else(|| entries().next())
            .unwrap_or(value)
    }

    fn set_listeners(&mut self) -> Result<(), String> {
        if let Some(value) = self.cluster.get("listeners").cloned() {
            self.listen = parse_listener(self.client_listener(&value))?;
            if !self.advertised_explicit {
                self.advertised_host = self.listen.ip().to_string();
                self.advertised_port = self.listen.port();
            }
        }
        if let Some(value) = self.cluster.get("advertised.listeners").cloned() {
            let (host, port) = parse_host_port(self.client_listener(&value))?;
            self.advertised_host = host;
            self.advertised_port = port;
            self.advertised_explicit = true;
        }
        Ok(())
    }
}

/// The name of a `NAME://host:port` listener entry, upper-cased (`None` for a bare address).
fn listener_name(entry: &str) -> Option<String> {
    entry
        .split_once("://")
        .map(|(name, _)| name.trim().to_ascii_uppercase())
}

/// `PLAINTEXT://host:port` or `host:port` (the first listener when several are given),
/// resolved; an empty host is every interface.
pub(super) fn parse_listener(v: &str) -> Result<SocketAddr, String> {
    let (host, port) = parse_host_port(v)?;
    let host = if host.is_empty() {
        "0.0.0.0".to_string()
    } else {
        host
    };
    (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port} resolves to no address"))
}

fn parse_host_port(v: &str) -> Result<(String, u16), String> {
    let first = v.split(',').next().unwrap_or("").trim();
    let without_scheme = first.split_once("://").map_or(first, |(_, rest)| rest);
    let (host, port) = without_scheme
        .rsplit_once(':')
        .ok_or_else(|| format!("expected host:port, got {v:?}"))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("bad port in {v:?}"))?;
    Ok((host.trim_matches(['[', ']']).to_string(), port))
}
