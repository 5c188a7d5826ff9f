//! Fetch sessions (KIP-227): what a consumer's or a follower's Fetch requests leave out once
//! a session exists.
//!
//! Pure state machine, no I/O. A full fetch (epoch 0) creates a session whose id the response
//! carries; the client then sends only the partitions whose fetch position changed (and the
//! ones to forget), with the epoch incremented each time, and the broker answers only the
//! partitions with something new: records, a moved high watermark / last stable offset / log
//! start, or an error. Epoch -1 closes the session (a full, sessionless fetch).
//!
//! Kafka keeps one cache per broker; ours is per shard, since a connection lives on the shard
//! that accepted it. The cache holds at most `max.incremental.fetch.session.cache.slots`
//! sessions; when full, the least recently used one is evicted for a new one (Kafka weighs
//! eviction by staleness and size; plain LRU is simpler and never refuses a new session).

use crate::util::hash::HashMap;

use crate::model::Offset;

/// The epoch of a full fetch that creates (or resets) a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full fetch that closes the session and creates none.
pub const FINAL_EPOCH: i32 = -1;
/// No session.
pub const NO_SESSION: i32 = 0;

/// Kafka's "unknown offset": cached as what the client was told when it was told nothing
/// yet, so that any real value compares as a change.
const UNKNOWN_OFFSET: Offset = Offset(-1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("fetch session {0} not found")]
    NotFound(i32),
    #[error("fetch session {id}: epoch {got}, expected {expected}")]
    InvalidEpoch { id: i32, got: i32, expected: i32 },
}

impl SessionError {
    /// Kafka's error code: FETCH_SESSION_ID_NOT_FOUND (70), INVALID_FETCH_SESSION_EPOCH (71).
    pub fn code(&self) -> i16 {
        match self {
            SessionError::NotFound(_) => 70,
            SessionError::InvalidEpoch { .. } => 71,
        }
    }
}

/// A partition of a session: the topic as the request names it (its name before v13, its id
/// from v13 on; the other one empty), and the partition index.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionPartition {
    pub topic: String,
    pub topic_id: u128,
    pub partition: i32,
}

/// Where the client reads a partition from, as the request gave it: an incremental fetch
/// reads a partition it leaves out with these (a follower's epochs and log start included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub fetch_offset: Offset,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
    pub log_start_offset: Offset,
}

/// What one partition's read returned, as far as deciding whether to answer it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOutcome {
    pub high_watermark: Offset,
    pub last_stable_offset: Offset,
    pub log_start_offset: Offset,
    pub has_records: bool,
    pub error: bool,
}

#[derive(Debug, Clone)]
struct Cached {
    key: SessionPartition,
    position: Position,
    /// What the client was last told; -1 until then (or after an error: re-sent once it clears).
    high_watermark: Offset,
    last_stable_offset: Offset,
    log_start_offset: Offset,
}

#[derive(Debug)]
struct Session {
    /// The epoch the next request must carry.
    epoch: i32,
    partitions: Vec<Cached>,
    last_used: u64,
}

/// How to serve one Fetch request.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Every requested partition, answered in full; no session (epoch -1, or no room).
    Sessionless,
    /// Every requested partition, answered in full; then [`FetchSessions::create`].
    Full,
    /// Read these (every partition of the session, in its order) and answer only what
    /// [`FetchSessions::select`] keeps.
    Incremental {
        id: i32,
        partitions: Vec<(SessionPartition, Position)>,
    },
}

/// The fetch sessions of one shard.
#[derive(Debug)]
pub struct FetchSessions {
    slots: usize,
    sessions: HashMap<i32, Session>,
    next_id: i32,
    clock: u64,
}

impl FetchSessions {
    /// `slots`: `max.incremental.fetch.session.cache.slots` (0: sessions off). `first_id`
    /// spreads ids over shards and restarts (any non-zero value works).
    pub fn new(slots: usize, first_id: i32) -> FetchSessions {
        FetchSessions {
            slots,
            sessions: HashMap::default(),
            next_id: first_id.max(1),
            clock: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Decides how to serve a request with `session_id`/`epoch`, updating the session with
    /// the request's partitions (added or repositioned) and `forgotten`.
    pub fn begin(
        &mut self,
        session_id: i32,
        epoch: i32,
        requested: &[(SessionPartition, Position)],
        forgotten: &[SessionPartition],
    ) -> Result<Plan, SessionError> {
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            // A full request replaces the session it names, as in Kafka.
            if session_id != NO_SESSION {
                self.sessions.remove(&session_id);
            }
            return Ok(if epoch == FINAL_EPOCH || self.slots == 0 {
                Plan::Sessionless
            } else {
                Plan::Full
            });
        }
        self.clock += 1;
        let now = self.clock;
        let session = self
            .sessions
            .get_mut(&session_id)
            .ok_or(SessionError::NotFound(session_id))?;
        if session.epoch != epoch {
            return Err(SessionError::InvalidEpoch {
                id: session_id,
                got: epoch,
                expected: session.epoch,
            });
        }
        for (key, position) in requested {
            match session.partitions.iter_mut().find(|c| &c.key == key) {
                Some(c) => c.position = *position,
                None => session.partitions.push(Cached {
                    key: key.clone(),
                    position: *position,
                    high_watermark: UNKNOWN_OFFSET,
                    last_stable_offset: UNKNOWN_OFFSET,
                    log_start_offset: UNKNOWN_OFFSET,
                }),
            }
        }
        session.partitions.retain(|c| !forgotten.contains(&c.key));
        if session.partitions.is_empty() {
            // Kafka drops a session left with no partitions and answers without one.
            self.sessions.remove(&session_id);
            return Ok(Plan::Sessionless);
        }
        session.epoch = next_epoch(session.epoch);
        session.last_used = now;
        Ok(Plan::Incremental {
            id: session_id,
            partitions: session
                .partitions
                .iter()
                .map(|c| (c.key.clone(), c.position))
                .collect(),
        })
    }

    /// After a full fetch: creates a session with what was answered (epoch 1 next) and returns
    /// its id, evicting the least recently used session when the cache is full.
    pub fn create(&mut self, answered: Vec<(SessionPartition, Position, ReadOutcome)>) -> i32 {
        if self.slots == 0 || answered.is_empty() {
            return NO_SESSION;
        }
        while self.sessions.len() >= self.slots {
            let Some(oldest) = self
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(id, _)| *id)
            else {
                break;
            };
            self.sessions.remove(&oldest);
        }
        let id = self.fresh_id();
        self.clock += 1;
        let partitions = answered
            .into_iter()
            .map(|(key, position, read)| {
                let mut c = Cached {
                    key,
                    position,
                    high_watermark: UNKNOWN_OFFSET,
                    last_stable_offset: UNKNOWN_OFFSET,
                    log_start_offset: UNKNOWN_OFFSET,
                };
                remember(&mut c, &read);
                c
            })
            .collect();
        self.sessions.insert(
            id,
            Session {
                epoch: next_epoch(INITIAL_EPOCH),
                partitions,
                last_used: self.clock,
            },
        );
        id
    }

    /// After an incremental read of session `id` (`reads` in the order [`Plan::Incremental`]
    /// gave): which partitions to answer. Remembers what the client is told. Partitions that
    /// had records move to the end of the session, so that others get read first next time
    /// (as Kafka does, for fairness under the byte budget).
    pub fn select(&mut self, id: i32, reads: &[(SessionPartition, ReadOutcome)]) -> Vec<bool> {
        let Some(session) = self.sessions.get_mut(&id) else {
            // Evicted meanwhile: answer everything.
            return vec![true; reads.len()];
        };
        let mut moved = Vec::new();
        let keep = reads
            .iter()
            .map(|(key, read)| {
                let Some(i) = session.partitions.iter().position(|c| &c.key == key) else {
                    return true;
                };
                let c = &mut session.partitions[i];
                let changed = read.has_records
                    || read.error
                    || c.high_watermark != read.high_watermark
                    || c.last_stable_offset != read.last_stable_offset
                    || c.log_start_offset != read.log_start_offset;
                remember(c, read);
                if read.has_records {
                    moved.push(key.clone());
                }
                changed
            })
            .collect();
        for key in moved {
            if let Some(i) = session.partitions.iter().position(|c| c.key == key) {
                let c = session.partitions.remove(i);
                session.partitions.push(c);
            }
        }
        keep
    }

    fn fresh_id(&mut self) -> i32 {
        loop {
            let id = self.next_id;
            self.next_id = if self.next_id == i32::MAX {
                1
            } else {
                self.next_id + 1
            };
            // At most `slots` ids are taken, so this ends within slots + 1 turns.
            if !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

/// What the client now knows of a partition; an error forgets the high watermark so that the
/// partition is answered again once the error is gone.
fn remember(c: &mut Cached, read: &ReadOutcome) {
    c.high_watermark = if read.error {
        UNKNOWN_OFFSET
    } else {
        read.high_watermark
    };
    c.last_stable_offset = read.last_stable_offset;
    c.log_start_offset = read.log_start_offset;
}

/// Kafka's epoch sequence: 1, 2, ..., i32::MAX, then 1 again (0 and -1 are reserved).
fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 || epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> SessionPartition {
        SessionPartition {
            topic: "t".into(),
            topic_id: 0,
            partition: p,
        }
    }

    fn pos(offset: i64) -> Position {
        Position {
            fetch_offset: Offset(offset),
            max_bytes: 1000,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            log_start_offset: UNKNOWN_OFFSET,
        }
    }

    fn read(hw: i64, has_records: bool) -> ReadOutcome {
        ReadOutcome {
            high_watermark: Offset(hw),
            last_stable_offset: Offset(hw),
            log_start_offset: Offset(0),
            has_records,
            error: false,
        }
    }

    fn session_of(s: &mut FetchSessions, parts: &[i32]) -> i32 {
        let req: Vec<_> = parts.iter().map(|p| (key(*p), pos(0))).collect();
        assert_eq!(s.begin(0, INITIAL_EPOCH, &req, &[]), Ok(Plan::Full));
        s.create(
            req.into_iter()
                .map(|(k, p)| (k, p, read(5, true)))
                .collect(),
        )
    }

    #[test]
    fn a_full_fetch_creates_a_session_and_increments_go_by_epoch() {
        let mut s = FetchSessions::new(10, 7);
        let id = session_of(&mut s, &[0, 1]);
        assert_eq!(id, 7);
        let plan = s.begin(id, 1, &[], &[]).unwrap();
        let Plan::Incremental { partitions, .. } = plan else {
            panic!("{plan:?}")
        };
        assert_eq!(partitions.len(), 2);
        // Same epoch again: the session is at 2 now.
        assert_eq!(
            s.begin(id, 1, &[], &[]),
            Err(SessionError::InvalidEpoch {
                id,
                got: 1,
                expected: 2
            })
        );
        assert!(s.begin(id, 2, &[], &[]).is_ok());
        assert_eq!(s.begin(99, 1, &[], &[]), Err(SessionError::NotFound(99)));
        assert_eq!(SessionError::NotFound(1).code(), 70);
    }

    #[test]
    fn only_changed_partitions_are_answered() {
        let mut s = FetchSessions::new(10, 1);
        let id = session_of(&mut s, &[0, 1]);
        s.begin(id, 1, &[], &[]).unwrap();
        // Nothing moved since the full fetch.
        assert_eq!(
            s.select(id, &[(key(0), read(5, false)), (key(1), read(5, false))]),
            vec![false, false]
        );
        s.begin(id, 2, &[], &[]).unwrap();
        assert_eq!(
            s.select(id, &[(key(0), read(5, false)), (key(1), read(6, true))]),
            vec![false, true]
        );
        // An error is answered, and the partition again once the error is gone.
        s.begin(id, 3, &[], &[]).unwrap();
        let mut failed = read(5, false);
        failed.error = true;
        assert_eq!(s.select(id, &[(key(0), failed)]), vec![true]);
        s.begin(id, 4, &[], &[]).unwrap();
        assert_eq!(s.select(id, &[(key(0), read(5, false))]), vec![true]);
    }

    #[test]
    fn partitions_with_records_move_to_the_end() {
        let mut s = FetchSessions::new(10, 1);
        let id = session_of(&mut s, &[0, 1, 2]);
        s.begin(id, 1, &[], &[]).unwrap();
        s.select(id, &[(key(0), read(9, true))]);
        let Ok(Plan::Incremental { partitions, .. }) = s.begin(id, 2, &[], &[]) else {
            panic!()
        };
        let order: Vec<i32> = partitions.iter().map(|(k, _)| k.partition).collect();
        assert_eq!(order, vec![1, 2, 0]);
    }

    #[test]
    fn incremental_requests_add_reposition_and_forget() {
        let mut s = FetchSessions::new(10, 1);
        let id = session_of(&mut s, &[0, 1]);
        let Ok(Plan::Incremental { partitions, .. }) =
            s.begin(id, 1, &[(key(1), pos(5)), (key(2), pos(0))], &[key(0)])
        else {
            panic!()
        };
        assert_eq!(partitions, vec![(key(1), pos(5)), (key(2), pos(0))]);
        // A new partition is answered the first time, whatever it holds.
        assert_eq!(s.select(id, &[(key(2), read(0, false))]), vec![true]);
        // Forgetting everything ends the session.
        assert_eq!(
            s.begin(id, 2, &[], &[key(1), key(2)]),
            Ok(Plan::Sessionless)
        );
        assert!(s.is_empty());
    }

    #[test]
    fn final_epoch_closes_and_initial_epoch_replaces() {
        let mut s = FetchSessions::new(10, 1);
        let id = session_of(&mut s, &[0]);
        assert_eq!(s.begin(id, FINAL_EPOCH, &[], &[]), Ok(Plan::Sessionless));
        assert!(s.is_empty());
        let id = session_of(&mut s, &[0]);
        assert_eq!(s.begin(id, INITIAL_EPOCH, &[], &[]), Ok(Plan::Full));
        assert!(s.is_empty());
    }

    #[test]
    fn a_full_cache_evicts_the_least_recently_used() {
        let mut s = FetchSessions::new(2, 1);
        let a = session_of(&mut s, &[0]);
        let b = session_of(&mut s, &[0]);
        s.begin(a, 1, &[], &[]).unwrap(); // a is used after b
        let c = session_of(&mut s, &[0]);
        assert_eq!(s.len(), 2);
        assert_eq!(s.begin(b, 1, &[], &[]), Err(SessionError::NotFound(b)));
        assert!(s.begin(a, 2, &[], &[]).is_ok());
        assert!(s.begin(c, 1, &[], &[]).is_ok());
        // No slots: no sessions.
        let mut off = FetchSessions::new(0, 1);
        assert_eq!(off.begin(0, INITIAL_EPOCH, &[], &[]), Ok(Plan::Sessionless));
    }

    #[test]
    fn epochs_wrap_past_the_reserved_values() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
