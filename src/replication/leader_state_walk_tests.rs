//! Leader state, continued: seeded random walks checked against the invariants, and the low
//! watermark.

use super::*;

/// Random fetch / append / shrink / controller sequences; after every step: the HW only
/// grows, stays within every maximal-ISR member's LEO, the leader stays in the ISR, and a
/// proposal only comes when nothing was in flight.
#[test]
fn random_walk_keeps_the_invariants() {
    for seed in 1..=300u64 {
        random_walk(seed);
    }
}

fn random_walk(seed: u64) {
    let mut rng = SeededRng::new(seed);
    let mut pick = |n: u64| rng.next_u64() % n;
    let rf = 1 + pick(4) as i32;
    let replicas: Vec<i32> = (0..rf).collect();
    let isr: Vec<i32> = replicas
        .iter()
        .copied()
        .filter(|&r| r == 0 || pick(2) == 0)
        .collect();
    let min_isr = 1 + pick(rf as u64) as usize;
    let start_leo = pick(20) as i64;
    let start_hw = pick(start_leo as u64 + 1) as i64;
    let mut s = LeaderState::new(
        ME,
        ids(&replicas),
        ids(&isr),
        LeaderEpoch(1),
        PartitionEpoch(1),
        Offset(start_leo),
        Offset(start_leo),
        Offset(start_hw),
        T0,
        config(min_isr),
    );
    // Each follower's log as the follower has it. ISR members hold at least what the last
    // leader had committed (the HW this one starts from can only be lower).
    let mut follower_log: BTreeMap<BrokerId, i64> = BTreeMap::new();
    for &r in &replicas[1..] {
        let low = if isr.contains(&r) { start_hw } else { 0 };
        let at = low + pick((start_leo - low + 1) as u64) as i64;
        follower_log.insert(BrokerId(r), at);
    }
    let mut now = T0;
    let mut hw = s.high_watermark().0;
    for step in 0..400 {
        let ctx = format!("seed {seed} step {step}");
        let was_pending = s.pending() != &PendingIsrChange::None;
        let under_min = s.under_min_isr();
        let mut proposed = None;
        match pick(10) {
            0 | 1 => {
                let leo = s.log_end_offset().0 + 1 + pick(5) as i64;
                s.on_leader_append(Offset(leo));
            }
            2..=4 if rf > 1 => {
                let f = BrokerId(1 + pick(rf as u64 - 1) as i32);
                let at = follower_log[&f];
                let leo = s.log_end_offset().0;
                let out = s.on_follower_fetch(f, Offset(at), Offset(leo), now);
                proposed = out.propose;
                // the response carries some or all of what the leader has
                let got = at + pick((leo - at + 1) as u64) as i64;
                follower_log.insert(f, got);
            }
            5 => now += pick(LAG as u64) as i64,
            6 => proposed = s.check_shrink(now),
            7 => match s.pending_proposal() {
                Some(p) if pick(3) > 0 => {
                    s.on_isr_committed(p.new_isr, p.partition_epoch.next());
                }
                Some(_) => s.on_isr_rejected(),
                None => {}
            },
            8 if rf > 1 => {
                // the controller drops a follower from the ISR (fenced), or marks it
                let f = BrokerId(1 + pick(rf as u64 - 1) as i32);
                if pick(2) == 0 {
                    let isr: Vec<BrokerId> = s.isr().iter().copied().filter(|&r| r != f).collect();
                    let pe = s.partition_epoch().next();
                    s.on_partition_state(ids(&replicas), isr, pe);
                } else {
                    s.set_isr_eligible(f, pick(2) == 0);
                }
            }
            _ => {
                s.maybe_advance_hw(now);
            }
        }

        let new_hw = s.high_watermark().0;
        assert!(new_hw >= hw, "{ctx}: HW went back {hw} -> {new_hw}");
        if under_min && s.under_min_isr() {
            assert_eq!(new_hw, hw, "{ctx}: HW moved under min ISR");
        }
        hw = new_hw;
        assert!(
            hw <= s.log_end_offset().0,
            "{ctx}: HW past the leader's LEO"
        );
        for m in s.maximal_isr() {
            if let Some(f) = s.follower(m) {
                if f.log_end_offset == UNKNOWN_OFFSET {
                    assert_eq!(hw, start_hw, "{ctx}: HW moved past an unknown member");
                } else {
                    assert!(hw <= f.log_end_offset.0, "{ctx}: HW past member {m}'s LEO");
                }
            }
        }
        assert!(s.isr().contains(&ME), "{ctx}: leader left the ISR");
        assert!(
            s.maximal_isr().contains(&ME),
            "{ctx}: leader left the maximal ISR"
        );
        if let Some(p) = proposed {
            assert!(!was_pending, "{ctx}: a second change in flight");
            assert!(p.new_isr.contains(&ME), "{ctx}: proposal drops the leader");
            assert_eq!(s.pending_proposal(), Some(p), "{ctx}");
        }
        if hw > 0 {
            assert!(
                matches!(s.acks_all_status(Offset(hw - 1)), AcksAllStatus::Done(_)),
                "{ctx}"
            );
        }
        assert_eq!(
            s.acks_all_status(Offset(hw)),
            AcksAllStatus::Pending,
            "{ctx}"
        );
    }
}

/// Kafka's `lowWatermarkIfLeader` (PartitionTest's low watermark cases): the minimum log
/// start over the leader and followers on live brokers; unknown until a follower reports.
#[test]
fn low_watermark_is_the_smallest_live_log_start() {
    let mut l = leader(&[0, 1, 2], &[0, 1, 2], 100, 100, 2);
    assert_eq!(
        l.low_watermark(Offset(40)),
        UNKNOWN_OFFSET,
        "no follower reported yet"
    );
    assert!(l.on_follower_log_start(BrokerId(1), Offset(30)));
    assert_eq!(
        l.low_watermark(Offset(40)),
        UNKNOWN_OFFSET,
        "follower 2 not yet"
    );
    assert!(l.on_follower_log_start(BrokerId(2), Offset(50)));
    assert_eq!(l.low_watermark(Offset(40)), Offset(30));
    assert!(
        !l.on_follower_log_start(BrokerId(2), Offset(50)),
        "same value: no change"
    );
    assert!(l.on_follower_log_start(BrokerId(1), Offset(60)));
    assert_eq!(
        l.low_watermark(Offset(40)),
        Offset(40),
        "the leader's own log start is the lowest"
    );
    assert_eq!(l.low_watermark(Offset(70)), Offset(50));
    // A fenced broker is not waited for; back in service, it counts again.
    l.set_isr_eligible(BrokerId(2), false);
    assert_eq!(l.low_watermark(Offset(70)), Offset(60));
    l.set_isr_eligible(BrokerId(2), true);
    assert_eq!(l.low_watermark(Offset(70)), Offset(50));
    // Not a replica: ignored.
    assert!(!l.on_follower_log_start(BrokerId(9), Offset(0)));
    assert_eq!(l.low_watermark(Offset(70)), Offset(50));
    // Without followers: the leader's own.
    let mut single = leader(&[0], &[0], 10, 10, 1);
    assert_eq!(single.low_watermark(Offset(7)), Offset(7));
    assert!(!single.on_follower_log_start(BrokerId(1), Offset(3)));
}
