//! The cases of Kafka's `LeaderEpochFileCacheTest`, as tables, plus the checkpoint format and
//! a seeded random walk over assign and truncate.

use super::*;
use crate::util::rng::SeededRng;

fn entry(epoch: i32, start_offset: i64) -> EpochEntry {
    EpochEntry {
        epoch: LeaderEpoch(epoch),
        start_offset: Offset(start_offset),
    }
}

fn entries(pairs: &[(i32, i64)]) -> Vec<EpochEntry> {
    pairs.iter().map(|&(e, o)| entry(e, o)).collect()
}

/// A cache built by assigning `pairs` in order.
fn cache_of(pairs: &[(i32, i64)]) -> LeaderEpochCache {
    let mut cache = LeaderEpochCache::new();
    for &(e, o) in pairs {
        cache.assign(LeaderEpoch(e), Offset(o));
    }
    cache
}

const UNDEFINED: (i32, i64) = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET.0);
const THREE_EPOCHS: &[(i32, i64)] = &[(2, 6), (3, 8), (4, 11)];

#[test]
fn assign_keeps_the_first_start_of_each_epoch_and_drops_conflicts() {
    struct Case {
        name: &'static str,
        assigns: &'static [(i32, i64)],
        changed: &'static [bool],
        want: &'static [(i32, i64)],
    }
    let cases = [
        Case {
            name: "a first epoch is added",
            assigns: &[(2, 10)],
            changed: &[true],
            want: &[(2, 10)],
        },
        Case {
            name: "a later batch of the same epoch does not move its start",
            assigns: &[(2, 9), (2, 10)],
            changed: &[true, false],
            want: &[(2, 9)],
        },
        Case {
            name: "the same epoch at the same start is no change",
            assigns: &[(2, 6), (2, 6)],
            changed: &[true, false],
            want: &[(2, 6)],
        },
        Case {
            name: "a new epoch at the same start replaces the old one",
            assigns: &[(2, 9), (3, 9)],
            changed: &[true, true],
            want: &[(3, 9)],
        },
        Case {
            name: "the latest epoch at an earlier start drops what started after it",
            assigns: &[(5, 11), (6, 12), (7, 13), (7, 12)],
            changed: &[true, true, true, true],
            want: &[(5, 11), (7, 12)],
        },
        Case {
            name: "an older epoch after a newer one drops both conflicting entries",
            assigns: &[(1, 5), (2, 6), (1, 7)],
            changed: &[true, true, true],
            want: &[(1, 7)],
        },
        Case {
            name: "a newer epoch at an earlier offset replaces the entry after it",
            assigns: &[(2, 6), (3, 5)],
            changed: &[true, true],
            want: &[(3, 5)],
        },
        Case {
            name: "leaders elected at the same offset: only the last is kept",
            assigns: &[(0, 0), (1, 0), (2, 5)],
            changed: &[true, true, true],
            want: &[(1, 0), (2, 5)],
        },
        Case {
            name: "a follower offered every batch keeps one entry per epoch",
            assigns: &[
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 3),
                (1, 4),
                (1, 5),
                (2, 6),
                (2, 7),
            ],
            changed: &[true, false, false, true, false, false, true, false],
            want: &[(0, 0), (1, 3), (2, 6)],
        },
        Case {
            name: "undefined epochs and offsets are ignored",
            assigns: &[(2, 6), (-1, 9), (3, -1)],
            changed: &[true, false, false],
            want: &[(2, 6)],
        },
    ];
    for case in cases {
        let mut cache = LeaderEpochCache::new();
        let changed: Vec<bool> = case
            .assigns
            .iter()
            .map(|&(e, o)| cache.assign(LeaderEpoch(e), Offset(o)))
            .collect();
        assert_eq!(changed, case.changed, "{}: changed", case.name);
        assert_eq!(cache.entries(), entries(case.want), "{}", case.name);
    }
}

#[test]
fn end_offset_for_follows_kafka() {
    struct Case {
        name: &'static str,
        assigns: &'static [(i32, i64)],
        /// (requested epoch, log end offset, expected answer)
        queries: &'static [(i32, i64, (i32, i64))],
    }
    let cases = [
        Case {
            name: "the latest epoch ends at the log end",
            assigns: &[(2, 10)],
            queries: &[(2, 11, (2, 11))],
        },
        Case {
            name: "the latest epoch offered twice still ends at the log end",
            assigns: &[(2, 11), (2, 12)],
            queries: &[(2, 14, (2, 14))],
        },
        Case {
            name: "epochs need not start from zero",
            assigns: &[(2, 6)],
            queries: &[(2, 7, (2, 7))],
        },
        Case {
            name: "an undefined epoch has no answer",
            assigns: &[(2, 11), (3, 12)],
            queries: &[(-1, 0, UNDEFINED)],
        },
        Case {
            name: "an empty cache has no answer",
            assigns: &[],
            queries: &[(0, 0, UNDEFINED), (7, 0, UNDEFINED), (-1, 73, UNDEFINED)],
        },
        Case {
            name: "below the first epoch: the requested epoch, ending at the first start",
            assigns: &[(5, 11), (6, 12), (7, 13)],
            queries: &[(4, 0, (4, 11))],
        },
        Case {
            name: "after an earlier start of the latest epoch, the dropped epoch maps to its predecessor",
            assigns: &[(5, 11), (6, 12), (7, 13), (7, 12)],
            queries: &[(5, 0, (5, 12)), (6, 0, (5, 12))],
        },
        Case {
            name: "an older epoch ends where the next one starts",
            assigns: &[(1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)],
            queries: &[(2, 17, (2, 15))],
        },
        Case {
            name: "an epoch between two entries maps to the lower one",
            assigns: &[(0, 10), (2, 13), (4, 17)],
            queries: &[(1, 0, (0, 13)), (2, 0, (2, 17)), (3, 0, (2, 17))],
        },
        Case {
            name: "an epoch above the latest has no answer",
            assigns: &[(2, 100)],
            queries: &[(3, 100, UNDEFINED)],
        },
        Case {
            name: "an epoch dropped by an older one has no answer",
            assigns: &[(1, 5), (2, 6), (1, 7)],
            queries: &[(1, 8, (1, 8)), (2, 8, UNDEFINED)],
        },
        Case {
            name: "many leader changes",
            assigns: &[(0, 0), (1, 0), (2, 5)],
            queries: &[(2, 10, (2, 10)), (1, 10, (1, 5)), (0, 10, (0, 0))],
        },
        Case {
            name: "a follower offered every batch",
            assigns: &[(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (2, 6), (2, 7), (2, 8)],
            queries: &[(2, 9, (2, 9)), (0, 9, (0, 3)), (1, 9, (1, 6))],
        },
    ];
    for case in cases {
        let cache = cache_of(case.assigns);
        for &(requested, leo, want) in case.queries {
            let (epoch, end) = cache.end_offset_for(LeaderEpoch(requested), Offset(leo));
            assert_eq!(
                (epoch, end.0),
                want,
                "{}: epoch {requested}, log end {leo}",
                case.name
            );
        }
    }
}

#[test]
fn end_offset_for_before_and_after_the_second_epoch() {
    // Kafka's "leaders change many times": the answer for the latest epoch follows the log end.
    let mut cache = cache_of(&[(0, 0), (1, 0)]);
    assert_eq!(cache.latest_epoch(), Some(LeaderEpoch(1)));
    let end_for = |cache: &LeaderEpochCache, epoch, leo| {
        cache.end_offset_for(LeaderEpoch(epoch), Offset(leo))
    };
    assert_eq!(end_for(&cache, 1, 0), (1, Offset(0)));
    assert_eq!(end_for(&cache, 1, 5), (1, Offset(5)));
    // Epoch 0 was dropped (it started where epoch 1 did): below the first epoch.
    assert_eq!(end_for(&cache, 0, 5), (0, Offset(0)));
    cache.assign(LeaderEpoch(2), Offset(5));
    assert_eq!(end_for(&cache, 1, 10), (1, Offset(5)));
}

#[test]
fn truncate_from_end_removes_entries_starting_at_or_after_the_end() {
    struct Case {
        name: &'static str,
        assigns: &'static [(i32, i64)],
        end: i64,
        changed: bool,
        want: &'static [(i32, i64)],
    }
    let cases = [
        Case {
            name: "on an epoch boundary",
            assigns: THREE_EPOCHS,
            end: 8,
            changed: true,
            want: &[(2, 6)],
        },
        Case {
            name: "between epoch boundaries",
            assigns: THREE_EPOCHS,
            end: 9,
            changed: true,
            want: &[(2, 6), (3, 8)],
        },
        Case {
            name: "past the latest start",
            assigns: THREE_EPOCHS,
            end: 12,
            changed: false,
            want: THREE_EPOCHS,
        },
        Case {
            name: "undefined offset",
            assigns: THREE_EPOCHS,
            end: UNDEFINED_EPOCH_OFFSET.0,
            changed: false,
            want: THREE_EPOCHS,
        },
        Case {
            name: "to zero",
            assigns: THREE_EPOCHS,
            end: 0,
            changed: true,
            want: &[],
        },
        Case {
            name: "empty cache",
            assigns: &[],
            end: 7,
            changed: false,
            want: &[],
        },
    ];
    for case in cases {
        let mut cache = cache_of(case.assigns);
        assert_eq!(
            cache.truncate_from_end(Offset(case.end)),
            case.changed,
            "{}",
            case.name
        );
        assert_eq!(cache.entries(), entries(case.want), "{}", case.name);
    }
}

#[test]
fn truncate_from_start_keeps_the_entry_covering_the_new_start() {
    struct Case {
        name: &'static str,
        assigns: &'static [(i32, i64)],
        start: i64,
        changed: bool,
        want: &'static [(i32, i64)],
    }
    let cases = [
        Case {
            name: "on an epoch boundary",
            assigns: THREE_EPOCHS,
            start: 8,
            changed: true,
            want: &[(3, 8), (4, 11)],
        },
        Case {
            name: "before the first entry",
            assigns: THREE_EPOCHS,
            start: 1,
            changed: false,
            want: THREE_EPOCHS,
        },
        Case {
            name: "at the first entry's start",
            assigns: THREE_EPOCHS,
            start: 6,
            changed: false,
            want: THREE_EPOCHS,
        },
        Case {
            name: "at the latest entry's start",
            assigns: THREE_EPOCHS,
            start: 11,
            changed: true,
            want: &[(4, 11)],
        },
        Case {
            name: "between epoch boundaries",
            assigns: THREE_EPOCHS,
            start: 9,
            changed: true,
            want: &[(3, 9), (4, 11)],
        },
        Case {
            name: "inside the first epoch",
            assigns: &[(0, 0), (1, 7), (2, 10)],
            start: 5,
            changed: true,
            want: &[(0, 5), (1, 7), (2, 10)],
        },
        Case {
            name: "past the latest entry's start",
            assigns: THREE_EPOCHS,
            start: 15,
            changed: true,
            want: &[(4, 15)],
        },
        Case {
            name: "undefined offset",
            assigns: THREE_EPOCHS,
            start: UNDEFINED_EPOCH_OFFSET.0,
            changed: false,
            want: THREE_EPOCHS,
        },
        Case {
            name: "empty cache",
            assigns: &[],
            start: 7,
            changed: false,
            want: &[],
        },
    ];
    for case in cases {
        let mut cache = cache_of(case.assigns);
        assert_eq!(
            cache.truncate_from_start(Offset(case.start)),
            case.changed,
            "{}",
            case.name
        );
        assert_eq!(cache.entries(), entries(case.want), "{}", case.name);
    }
}

#[test]
fn previous_epoch_is_the_one_before_the_latest() {
    let mut cache = LeaderEpochCache::new();
    assert_eq!(cache.previous_epoch(), None);
    cache.assign(LeaderEpoch(2), Offset(10));
    assert_eq!(cache.previous_epoch(), None);
    cache.assign(LeaderEpoch(4), Offset(15));
    assert_eq!(cache.previous_epoch(), Some(LeaderEpoch(2)));
    cache.assign(LeaderEpoch(10), Offset(20));
    assert_eq!(cache.previous_epoch(), Some(LeaderEpoch(4)));
    cache.truncate_from_end(Offset(18));
    assert_eq!(cache.previous_epoch(), Some(LeaderEpoch(2)));
}

#[test]
fn lookups_by_epoch_and_by_offset() {
    let empty = LeaderEpochCache::new();
    assert_eq!(empty.latest_epoch(), None);
    assert_eq!(empty.latest_entry(), None);
    assert_eq!(empty.epoch_for_offset(Offset(0)), None);

    let cache = cache_of(&[(2, 100), (3, 500), (5, 1000)]);
    assert_eq!(cache.epoch_start(LeaderEpoch(2)), Some(Offset(100)));
    assert_eq!(cache.epoch_start(LeaderEpoch(3)), Some(Offset(500)));
    assert_eq!(cache.epoch_start(LeaderEpoch(5)), Some(Offset(1000)));
    assert_eq!(cache.epoch_start(LeaderEpoch(4)), None);
    assert_eq!(cache.latest_entry(), Some(entry(5, 1000)));

    let cache = cache_of(&[(0, 10), (1, 20), (5, 30)]);
    for (offset, want) in [
        (25, Some(1)),
        (20, Some(1)),
        (30, Some(5)),
        (50, Some(5)),
        (5, None),
    ] {
        assert_eq!(
            cache.epoch_for_offset(Offset(offset)),
            want.map(LeaderEpoch),
            "offset {offset}"
        );
    }
}

#[test]
fn from_entries_replays_assign_like_a_kafka_load() {
    assert_eq!(
        LeaderEpochCache::from_entries(entries(THREE_EPOCHS)).entries(),
        entries(THREE_EPOCHS)
    );
    // Stale entries after an epoch that went back are dropped, as the later assign drops them.
    assert_eq!(
        LeaderEpochCache::from_entries(entries(&[(1, 5), (2, 6), (1, 7)])).entries(),
        entries(&[(1, 7)])
    );
    assert_eq!(
        LeaderEpochCache::from_entries(entries(&[(2, 6), (2, 9), (3, 9)])).entries(),
        entries(&[(2, 6), (3, 9)])
    );
    assert_eq!(
        LeaderEpochCache::from_entries(entries(&[(2, 6), (3, 6)])).entries(),
        entries(&[(3, 6)])
    );
}

#[test]
fn checkpoint_text_is_kafkas() {
    assert_eq!(LeaderEpochCache::new().encode(), "0\n0\n");
    let cache = cache_of(THREE_EPOCHS);
    assert_eq!(cache.encode(), "0\n3\n2 6\n3 8\n4 11\n");
    assert_eq!(
        LeaderEpochCache::decode(&cache.encode()).expect("decode"),
        cache
    );
    // Kafka creates the file empty before it writes any entry.
    assert_eq!(
        LeaderEpochCache::decode("").expect("decode"),
        LeaderEpochCache::new()
    );
    // Without the last newline.
    assert_eq!(
        LeaderEpochCache::decode("0\n1\n2 6").expect("decode"),
        cache_of(&[(2, 6)])
    );
    // Well-formed but not monotonic: loaded as Kafka loads it.
    assert_eq!(
        LeaderEpochCache::decode("0\n3\n1 5\n2 6\n1 7\n").expect("decode"),
        cache_of(&[(1, 7)])
    );
}

#[test]
fn malformed_checkpoints_are_rejected() {
    use EpochCheckpointError as E;
    type Expect = fn(&E) -> bool;
    let cases: &[(&str, Expect)] = &[
        ("1\n0\n", |e| matches!(e, E::Version(v) if v == "1")),
        ("\n", |e| matches!(e, E::Version(_))),
        ("00\n0\n", |e| matches!(e, E::Version(_))),
        ("0\n", |e| matches!(e, E::MissingCount)),
        ("0\nx\n", |e| matches!(e, E::Count(_))),
        ("0\n-1\n", |e| matches!(e, E::Count(_))),
        ("0\n2\n2 6\n", |e| {
            matches!(
                e,
                E::CountMismatch {
                    expected: 2,
                    found: 1
                }
            )
        }),
        ("0\n0\n2 6\n", |e| {
            matches!(
                e,
                E::CountMismatch {
                    expected: 0,
                    found: 1
                }
            )
        }),
        ("0\n1\n2\n", |e| matches!(e, E::Line { line: 3, .. })),
        ("0\n1\n2 6 7\n", |e| matches!(e, E::Line { line: 3, .. })),
        ("0\n1\na 6\n", |e| matches!(e, E::Line { line: 3, .. })),
        ("0\n1\n-1 6\n", |e| matches!(e, E::Line { line: 3, .. })),
        ("0\n1\n2 -6\n", |e| matches!(e, E::Line { line: 3, .. })),
        ("0\n1\n2  6\n", |e| matches!(e, E::Line { line: 3, .. })),
        ("0\n1\n+2 6\n", |e| matches!(e, E::Line { line: 3, .. })),
        ("0\n2\n2 6\n\n", |e| matches!(e, E::Line { line: 4, .. })),
        ("0\n1\n99999999999 6\n", |e| matches!(e, E::Line { .. })),
    ];
    for (text, is_expected) in cases {
        match LeaderEpochCache::decode(text) {
            Ok(cache) => panic!("{text:?} decoded to {cache:?}"),
            Err(e) => assert!(is_expected(&e), "{text:?}: unexpected error {e}"),
        }
    }
}

/// Kafka's "persist between instances" and "write checkpoint on truncation", on disk.
#[test]
fn checkpoint_files_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::runtime::block_on(async {
        let missing = read_checkpoint(dir.path()).await.expect("read missing");
        assert_eq!(missing, LeaderEpochCache::new());

        let mut cache = cache_of(&[(2, 6)]);
        write_checkpoint(dir.path(), &cache).await.expect("write");
        assert_eq!(read_checkpoint(dir.path()).await.expect("read"), cache);

        for (e, o) in [(3, 8), (4, 11)] {
            cache.assign(LeaderEpoch(e), Offset(o));
        }
        assert!(cache.truncate_from_end(Offset(11)));
        assert!(cache.truncate_from_start(Offset(8)));
        write_checkpoint(dir.path(), &cache)
            .await
            .expect("overwrite");
        let read = read_checkpoint(dir.path()).await.expect("read");
        assert_eq!(read.entries(), entries(&[(3, 8)]));

        std::fs::write(
            dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE),
            b"0\n1\n\xff 1\n",
        )
        .expect("corrupt");
        let err = read_checkpoint(dir.path()).await.expect_err("corrupt file");
        assert!(
            matches!(err, EpochCheckpointError::Line { line: 3, .. }),
            "{err}"
        );
    })
    .expect("executor");
}

/// Random assign and truncate sequences, from fixed seeds: the invariant holds after every
/// step, `changed` is reported exactly when the entries changed, and the text round-trips.
#[test]
fn random_histories_stay_monotonic_and_round_trip() {
    for seed in 0..200u64 {
        let mut rng = SeededRng::new(seed);
        let mut cache = LeaderEpochCache::new();
        let mut epoch = 0i32;
        let mut log_end = 0i64;
        for step in 0..60 {
            let before = cache.clone();
            let roll = rng.next_u64() % 100;
            let changed = if roll < 60 {
                // Mostly a new leader at the log end, sometimes stale or out-of-order input.
                if rng.chance(700) {
                    epoch += 1 + (rng.next_u64() % 3) as i32;
                }
                let e = if rng.chance(100) {
                    (rng.next_u64() % (epoch as u64 + 1)) as i32
                } else {
                    epoch
                };
                let o = if rng.chance(150) {
                    (rng.next_u64() % (log_end as u64 + 1)) as i64
                } else {
                    log_end
                };
                log_end += (rng.next_u64() % 10) as i64;
                cache.assign(LeaderEpoch(e), Offset(o))
            } else if roll < 80 {
                log_end = (rng.next_u64() % (log_end as u64 + 1)) as i64;
                cache.truncate_from_end(Offset(log_end))
            } else {
                let start = (rng.next_u64() % (log_end as u64 + 1)) as i64;
                cache.truncate_from_start(Offset(start))
            };
            let context = format!("seed {seed} step {step}: {before:?} -> {cache:?}");
            assert!(
                cache
                    .entries()
                    .windows(2)
                    .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset),
                "not strictly ascending: {context}"
            );
            assert_eq!(changed, before != cache, "changed flag: {context}");
            assert_eq!(
                LeaderEpochCache::decode(&cache.encode()).expect("decode"),
                cache,
                "round trip: {context}"
            );
            assert_eq!(
                LeaderEpochCache::from_entries(cache.entries().to_vec()),
                cache,
                "reload: {context}"
            );
        }
    }
}
