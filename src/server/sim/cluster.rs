//! A simulated cluster as the scenarios drive it: three brokers of the real broker started
//! on their hosts, waited for until they form, a topic created, one seeded fault at a time
//! (a crash and restart, or a cut link and its heal), and the leader invariants checked after
//! every step. What a scenario writes and checks is its own (`replication_tests`,
//! `group_tests`).

use std::cell::RefCell;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use super::broker::{self, client_addr, node_of, SimBroker};
use super::client::SimClient;
use super::invariants::LeaderInvariants;
use crate::runtime::fault::PowerLoss;
use crate::runtime::sim::{self, net, SimConfig};
use crate::runtime::{self, Instant};
use crate::shard::Shard;

pub const IDS: [i32; 3] = [1, 2, 3];
pub const SEED_VAR: &str = "RINGBROKER_BROKER_SIM_SEED";
pub const SEEDS_VAR: &str = "RINGBROKER_BROKER_SIM_SEEDS";
pub const FROM_VAR: &str = "RINGBROKER_BROKER_SIM_FROM";
/// Set: each fault is printed as it is injected (kind, broker, virtual time).
pub const TRACE_VAR: &str = "RINGBROKER_BROKER_SIM_TRACE";
/// Set: power losses among the faults (the brokers' disks tracked). Off in `cargo test`: runs
/// with the tracking are not exact replays yet, and one open finding fails about one seed in
/// a few hundred (see docs/internals/cluster.md), which would make CI fail at random.
pub const POWER_VAR: &str = "RINGBROKER_BROKER_SIM_POWER";

/// Whether power losses are among the faults (`POWER_VAR`).
pub fn power_losses() -> bool {
    std::env::var_os(POWER_VAR).is_some()
}
/// How long (virtual time) a scenario's writers and faults go on at most.
pub const FAULT_PHASE: Duration = Duration::from_secs(600);
/// Seeds per scenario in `cargo test` (~0.2-0.5 s each in debug).
const SEEDS: u64 = 100;

/// Timeouts short enough that a fault's consequences (elections, fencing, ISR changes) fall
/// within seconds of virtual time.
fn settings() -> Vec<(&'static str, &'static str)> {
    vec![
        ("controller.quorum.election.timeout.ms", "1000"),
        ("broker.heartbeat.interval.ms", "200"),
        ("broker.session.timeout.ms", "1500"),
        ("replica.lag.time.max.ms", "2000"),
        ("offsets.topic.replication.factor", "3"),
        ("offsets.topic.num.partitions", "1"),
        // For __consumer_offsets too (it takes the broker's): with Kafka's default of 1, a
        // commit is acknowledged by a leader whose ISR shrank to itself, and its power loss
        // loses it, in Kafka as here (seed 1250 found it: the committed offset read back -1).
        ("min.insync.replicas", "2"),
    ]
}

/// Connects to any broker that answers, trying them in turn.
pub async fn any_client(up: &[i32]) -> Option<(i32, SimClient)> {
    for &id in up {
        if let Ok(c) = SimClient::connect(client_addr(id)).await {
            return Some((id, c));
        }
    }
    None
}

/// The fault [`SimCluster::fault`] injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    Crash,
    Cut,
    Pause,
    ControllerCrash,
    PowerLoss,
}

pub struct SimCluster {
    pub brokers: Rc<RefCell<Vec<SimBroker>>>,
    pub invariants: Rc<RefCell<LeaderInvariants>>,
    /// Faults injected so far, by kind.
    faults: RefCell<std::collections::BTreeMap<String, u32>>,
    /// The partitions whose invariants are checked.
    watched: Vec<(String, i32)>,
}

impl SimCluster {
    /// Starts the three brokers (data under `dir`) and checks the leaders of `watched`
    /// partitions after every step from now on.
    pub fn start(dir: &Path, watched: Vec<(String, i32)>) -> Result<SimCluster, String> {
        let voters = broker::voters(&IDS);
        let extra = settings();
        let brokers: Rc<RefCell<Vec<SimBroker>>> = Rc::new(RefCell::new(
            IDS.iter()
                .map(|&id| {
                    let d = dir.join(format!("broker-{id}"));
                    let c = broker::config(id, &d, &voters, &extra)?;
                    Ok(SimBroker::new(id, d, c, power_losses()))
                })
                .collect::<Result<_, String>>()?,
        ));
        for b in brokers.borrow_mut().iter_mut() {
            b.start();
        }
        let invariants = Rc::new(RefCell::new(LeaderInvariants::default()));
        {
            let (brokers, invariants) = (Rc::clone(&brokers), Rc::clone(&invariants));
            let watched = watched.clone();
            sim::check_every_step(move || {
                // A step that holds the list (a fault being injected) is checked at the next.
                let Ok(bs) = brokers.try_borrow() else {
                    return Ok(());
                };
                let mut inv = invariants.borrow_mut();
                for (topic, partition) in &watched {
                    inv.check(topic, *partition, bs.iter().map(|b| (b.id, b.shard())))?;
                }
                inv.steps += 1;
                Ok(())
            });
        }
        Ok(SimCluster {
            brokers,
            invariants,
            faults: RefCell::default(),
            watched,
        })
    }

    /// Waits until a broker answers with all three registered.
    pub async fn formed(&self) -> Result<(), String> {
        for _ in 0..300 {
            runtime::sleep(Duration::from_millis(100)).await;
            if let Some((_, mut c)) = any_client(&IDS).await {
                if let Ok(m) = c.metadata("any").await {
                    if m.brokers.len() == IDS.len() {
                        return Ok(());
                    }
                }
            }
        }
        Err("the cluster did not form in 30 s".into())
    }

    /// Creates `topic` with one partition, RF 3 and `configs` (already there is fine).
    pub async fn create_topic(&self, topic: &str, configs: &[(&str, &str)]) -> Result<(), String> {
        for _ in 0..100 {
            if let Some((_, mut c)) = any_client(&IDS).await {
                if let Ok(code) = c.create_topic(topic, 1, 3, configs).await {
                    // 36: TOPIC_ALREADY_EXISTS (an earlier try's answer was lost).
                    if code == 0 || code == 36 {
                        return Ok(());
                    }
                }
            }
            runtime::sleep(Duration::from_millis(200)).await;
        }
        Err(format!("the topic {topic} was not created"))
    }

    /// One seeded fault, after a pause: a broker crashed and restarted, the link between two
    /// brokers cut and healed, a broker paused (SIGSTOP, held long enough to be fenced, then
    /// resumed as it was), the active controller crashed and restarted, or (with `power`) a
    /// broker's host losing power and restarting.
    pub async fn fault(&self, power: bool) -> Result<Fault, String> {
        runtime::sleep(Duration::from_millis(500 + sim::random_u64() % 1500)).await;
        let mut victim = IDS[(sim::random_u64() % 3) as usize];
        let other = IDS[(sim::random_u64() % 3) as usize];
        let hold = Duration::from_millis(300 + sim::random_u64() % 3000);
        let kinds = [
            Fault::Crash,
            Fault::Cut,
            Fault::Pause,
            Fault::ControllerCrash,
            Fault::PowerLoss,
        ];
        let n = if power { kinds.len() } else { kinds.len() - 1 };
        let fault = kinds[(sim::random_u64() % n as u64) as usize];
        if fault == Fault::ControllerCrash {
            match self.active_controller() {
                Some(c) => victim = c,
                None => return Ok(Fault::None),
            }
        }
        let at = (victim - 1) as usize;
        match fault {
            Fault::Crash | Fault::ControllerCrash => self.brokers.borrow_mut()[at].crash(),
            Fault::Cut if victim != other => net::partition(node_of(victim), node_of(other)),
            Fault::Pause => self.brokers.borrow()[at].pause(),
            // A power loss while a watched partition's ISR is not whole is a second fault on
            // top of the one that shrank it, and can lose what the others acknowledged, in
            // Kafka too without KIP-966 (not built here yet): seed 1250 found it (a
            // power-lost leader restarted inside its session; the crash of the other ISR
            // member then left it the only one, elected with an empty log). This schedule
            // crashes it instead. Seed 1058 still finds the same with a whole ISR.
            Fault::PowerLoss if !self.isrs_whole() => {
                self.brokers.borrow_mut()[at].crash();
            }
            Fault::PowerLoss => {
                let mode = match sim::random_u64() % 2 {
                    0 => PowerLoss::DropUnsynced,
                    _ => PowerLoss::KeepSome {
                        seed: sim::random_u64(),
                    },
                };
                self.brokers.borrow_mut()[at].power_loss(mode)?;
            }
            Fault::Cut | Fault::None => return Ok(Fault::None),
        }
        runtime::sleep(hold).await;
        match fault {
            Fault::Cut => net::heal(node_of(victim), node_of(other)),
            Fault::Pause => self.brokers.borrow()[at].resume(),
            _ => self.brokers.borrow_mut()[at].start(),
        }
        if std::env::var_os(TRACE_VAR).is_some() {
            eprintln!(
                "fault {fault:?} on broker {victim} (other {other}) ended at {:?}",
                sim::elapsed()
            );
        }
        *self
            .faults
            .borrow_mut()
            .entry(format!("{fault:?}"))
            .or_default() += 1;
        Ok(fault)
    }

    /// Faults, one after another, while `going` says so and for at most [`FAULT_PHASE`].
    pub async fn faults_while(&self, going: impl Fn() -> bool, power: bool) -> Result<(), String> {
        let started = Instant::now();
        while going() && started.elapsed() < FAULT_PHASE {
            self.fault(power).await?;
        }
        Ok(())
    }

    /// Whether every running broker's metadata has every broker in the ISR of every watched
    /// partition.
    fn isrs_whole(&self) -> bool {
        self.shards().into_iter().all(|(_, shard)| {
            let Some(shard) = shard else { return true };
            let image = shard.image();
            self.watched.iter().all(|(topic, index)| {
                image
                    .topic_by_name(topic)
                    .and_then(|t| t.partitions.get(*index as usize))
                    .is_some_and(|p| p.isr.len() == IDS.len())
            })
        })
    }

    /// The active controller as a running broker's metadata names it.
    fn active_controller(&self) -> Option<i32> {
        self.shards()
            .into_iter()
            .filter_map(|(_, shard)| shard?.image().controller)
            .map(|c| c.0)
            .next()
    }

    /// Every cut link healed.
    pub fn heal(&self) {
        net::heal_all();
    }

    /// Each broker's id and, while it runs, its shard.
    pub fn shards(&self) -> Vec<(i32, Option<Rc<Shard>>)> {
        self.brokers
            .borrow()
            .iter()
            .map(|b| (b.id, b.shard()))
            .collect()
    }

    /// Waits until every broker runs the partition and holds the highest HW any of them
    /// shows, at least `at_least`: that HW.
    pub async fn caught_up(&self, topic: &str, at_least: i64) -> Result<i64, String> {
        for _ in 0..600 {
            runtime::sleep(Duration::from_millis(100)).await;
            let mut ends = Vec::new();
            for (_, shard) in self.shards() {
                if let Some(p) = shard.and_then(|s| s.partitions.get(topic, 0)) {
                    ends.push((p.log.offsets().log_end_offset, p.high_watermark()));
                }
            }
            let max_hw = ends.iter().map(|e| e.1).max().unwrap_or(-1);
            if ends.len() == IDS.len() && ends.iter().all(|e| e.0 >= max_hw) && max_hw >= at_least {
                return Ok(max_hw);
            }
        }
        Err(format!(
            "the replicas of {topic} did not catch up after healing"
        ))
    }

    /// Kills every broker (the run is over).
    pub fn crash_all(&self) {
        for b in self.brokers.borrow_mut().iter_mut() {
            b.crash();
        }
    }

    /// "(N steps checked), M leader epochs, F faults {kind: count}" for a run's summary.
    pub fn checked(&self) -> String {
        let i = self.invariants.borrow();
        let faults = self.faults.borrow();
        format!(
            "({} steps checked), {} leader epochs, {} faults {:?}",
            i.steps,
            i.epochs(),
            faults.values().sum::<u32>(),
            faults
        )
    }
}

/// The seeds to run: `SEED_VAR`'s one, else `SEEDS_VAR`'s count (default 100) from
/// `FROM_VAR` (default 0), so that long runs split a range between processes.
pub fn seeds() -> Vec<u64> {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    if let Some(s) = var(SEED_VAR) {
        return vec![s];
    }
    let from = var(FROM_VAR).unwrap_or(0);
    (from..from.saturating_add(var(SEEDS_VAR).unwrap_or(SEEDS))).collect()
}

/// Logs to the test's output when `RUST_LOG` is set.
pub fn log_if_asked() {
    if std::env::var("RUST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// Runs `scenario` for every seed of [`seeds`], printing each summary (logs if asked).
pub fn run_seeds<F, Fut>(scenario: F)
where
    F: Fn(u64, PathBuf) -> Fut,
    Fut: Future<Output = Result<String, String>> + 'static,
{
    log_if_asked();
    for seed in seeds() {
        eprintln!("{}", run_seed(seed, &scenario));
    }
}

/// Runs `scenario(seed, data dir)` in a simulation of `seed`: its summary, or a panic that
/// names the seed to replay.
pub fn run_seed<F, Fut>(seed: u64, scenario: F) -> String
where
    F: FnOnce(u64, PathBuf) -> Fut,
    Fut: Future<Output = Result<String, String>> + 'static,
{
    run_seed_outcome(seed, scenario).unwrap_or_else(|e| panic!("{e}"))
}

/// As [`run_seed`], the failure returned: what went wrong, naming the seed to replay.
pub fn run_seed_outcome<F, Fut>(seed: u64, scenario: F) -> Result<String, String>
where
    F: FnOnce(u64, PathBuf) -> Fut,
    Fut: Future<Output = Result<String, String>> + 'static,
{
    // On tmpfs when there is one: the brokers' fsyncs are real system calls, and the
    // simulation does not need them to reach a disk.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("tempdir");
    let path = dir.path().to_path_buf();
    // A run takes ~20–120k polls: a livelock (tasks that run on without time moving) fails
    // at the limit instead of hanging.
    let config = SimConfig {
        max_time: Duration::from_secs(1800),
        max_polls: 5_000_000,
        ..SimConfig::seeded(seed)
    };
    match sim::run(config, scenario(seed, path)) {
        Ok(Ok(summary)) => Ok(summary),
        Ok(Err(e)) => Err(format!(
            "seed {seed} failed: {e} (replay: {SEED_VAR}={seed})"
        )),
        Err(e) => Err(format!("seed {seed}: {e} (replay: {SEED_VAR}={seed})")),
    }
}
