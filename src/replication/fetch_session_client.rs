//! A follower's side of a fetch session (KIP-227, Kafka's `FetchSessionHandler`): after one
//! full fetch the leader caches the follower's partitions and positions, and each later
//! request names only the partitions whose position changed (and those to forget); the
//! leader answers only partitions with news. With thousands of partitions per leader this
//! keeps an idle follower's requests and the leader's answers small.
//!
//! Pure state machine, no I/O: [`FollowerSession::next`] plans a request over the
//! partitions to fetch now, and [`FollowerSession::on_response`] (or
//! [`FollowerSession::on_failure`]) tells it how that request ended. Any doubt (an error, a
//! lost connection, a session the leader no longer has) goes back to a full fetch.

use crate::util::hash::HashMap;
use std::hash::Hash;

/// The epoch of a full fetch that creates (or replaces) a session.
const INITIAL_EPOCH: i32 = 0;
/// No session.
const NO_SESSION: i32 = 0;

/// One planned request: the session fields to send, which of the given partitions to name
/// (indexes into the slice given to [`FollowerSession::next`]) and which to forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRequest<K> {
    pub session_id: i32,
    pub epoch: i32,
    pub send: Vec<usize>,
    pub forgotten: Vec<K>,
}

/// A follower's session with one leader. `K` names a partition, `S` is what the follower
/// tells the leader about it (fetch offset, log start, epochs, byte limit): a partition is
/// sent again when its `S` changed.
#[derive(Debug)]
pub struct FollowerSession<K, S> {
    id: i32,
    next_epoch: i32,
    /// What the leader's session holds, as of the last answered request.
    held: HashMap<K, S>,
    /// What the request in flight would make it hold, once answered.
    pending: Option<HashMap<K, S>>,
}

impl<K: Clone + Eq + Hash, S: Clone + PartialEq> Default for FollowerSession<K, S> {
    fn default() -> Self {
        FollowerSession::new()
    }
}

impl<K: Clone + Eq + Hash, S: Clone + PartialEq> FollowerSession<K, S> {
    /// No session yet: the first request is a full one.
    pub fn new() -> Self {
        FollowerSession {
            id: NO_SESSION,
            next_epoch: INITIAL_EPOCH,
            held: HashMap::default(),
            pending: None,
        }
    }

    /// The session id, once the leader gave one (0 before).
    pub fn id(&self) -> i32 {
        self.id
    }

    /// Plans the request for `partitions` (everything to fetch now, with its state).
    pub fn next(&mut self, partitions: &[(K, S)]) -> SessionRequest<K> {
        let now: HashMap<K, S> = partitions.iter().cloned().collect();
        let request = if self.id == NO_SESSION {
            SessionRequest {
                session_id: NO_SESSION,
                epoch: INITIAL_EPOCH,
                send: (0..partitions.len()).collect(),
                forgotten: Vec::new(),
            }
        } else {
            let send = partitions
                .iter()
                .enumerate()
                .filter(|(_, (k, s))| self.held.get(k) != Some(s))
                .map(|(i, _)| i)
                .collect();
            let forgotten = self
                .held
                .keys()
                .filter(|k| !now.contains_key(*k))
                .cloned()
                .collect();
            SessionRequest {
                session_id: self.id,
                epoch: self.next_epoch,
                send,
                forgotten,
            }
        };
        self.pending = Some(now);
        request
    }

    /// The leader answered the planned request with `session_id` and the response's
    /// top-level `error_code`.
    pub fn on_response(&mut self, session_id: i32, error_code: i16) {
        let Some(pending) = self.pending.take() else {
            return;
        };
        if error_code != 0 {
            // FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or anything else: the
            // leader's view is unknown; start over with a full fetch.
            self.reset();
            return;
        }
        if self.id == NO_SESSION {
            // A full fetch: a session exists if the leader named one (0: it keeps none).
            self.id = session_id;
            self.next_epoch = next_epoch(INITIAL_EPOCH);
        } else if session_id != self.id {
            self.reset();
            return;
        } else {
            self.next_epoch = next_epoch(self.next_epoch);
        }
        self.held = pending;
    }

    /// The request got no answer (timeout, lost connection): the next one is full.
    pub fn on_failure(&mut self) {
        self.reset();
    }

    fn reset(&mut self) {
        self.id = NO_SESSION;
        self.next_epoch = INITIAL_EPOCH;
        self.held.clear();
        self.pending = None;
    }
}

/// Epochs count 1, 2, ... and wrap to 1 (0 and -1 are the full fetch's).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Session = FollowerSession<&'static str, i64>;

    #[test]
    fn full_then_incremental_with_only_what_changed() {
        let mut s = Session::new();
        let parts = [("a", 10), ("b", 20)];
        let r = s.next(&parts);
        assert_eq!((r.session_id, r.epoch, r.send.clone()), (0, 0, vec![0, 1]));
        s.on_response(77, 0);
        assert_eq!(s.id(), 77);

        // Nothing moved: an empty incremental fetch (the long poll still waits for news).
        let r = s.next(&parts);
        assert_eq!((r.session_id, r.epoch), (77, 1));
        assert!(r.send.is_empty() && r.forgotten.is_empty());
        s.on_response(77, 0);

        // "b" advanced, "c" is new, "a" is no longer followed from this leader.
        let parts = [("b", 25), ("c", 0)];
        let r = s.next(&parts);
        assert_eq!(
            (r.epoch, r.send.clone(), r.forgotten.clone()),
            (2, vec![0, 1], vec!["a"])
        );
        s.on_response(77, 0);
        let r = s.next(&parts);
        assert_eq!((r.epoch, r.send.len(), r.forgotten.len()), (3, 0, 0));
    }

    #[test]
    fn session_errors_and_failures_go_back_to_a_full_fetch() {
        for (error, answered) in [(70, true), (71, true), (6, true), (0, false)] {
            let mut s = Session::new();
            let parts = [("a", 1)];
            s.next(&parts);
            s.on_response(5, 0);
            s.next(&parts);
            if answered {
                s.on_response(5, error);
            } else {
                s.on_failure();
            }
            let r = s.next(&parts);
            assert_eq!(
                (r.session_id, r.epoch, r.send.clone()),
                (0, 0, vec![0]),
                "error {error}"
            );
        }
    }

    #[test]
    fn a_leader_without_sessions_gets_full_fetches() {
        let mut s = Session::new();
        let parts = [("a", 1)];
        for _ in 0..3 {
            let r = s.next(&parts);
            assert_eq!((r.session_id, r.epoch, r.send.clone()), (0, 0, vec![0]));
            s.on_response(0, 0);
        }
    }

    #[test]
    fn an_unanswered_plan_changes_nothing_the_leader_holds() {
        let mut s = Session::new();
        s.next(&[("a", 1)]);
        s.on_response(9, 0);
        // Planned with "a" at 2, then replanned (the first never went out): still sent.
        s.next(&[("a", 2)]);
        let r = s.next(&[("a", 2)]);
        assert_eq!(r.send, vec![0]);
        // A session id the follower did not expect: start over.
        s.on_response(10, 0);
        assert_eq!(s.next(&[("a", 2)]).session_id, 0);
    }

    #[test]
    fn epochs_wrap_to_one() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(41), 42);
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
