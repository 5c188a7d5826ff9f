#!/usr/bin/env python3
"""Faults of the ACTIVE CONTROLLER with real processes and real clients (issue 32, section 2).

    controller_fault_test.py --bin path/to/ringbroker --work DIR [--seed 1] [--rounds 2]

A file of its own rather than a phase of cluster_test.py: that test's 4-node cluster runs one
kill of the controller among many functional checks, while these rounds need replication_test.py's
kind of cluster (three nodes, each a voter and a broker, RF 3 topics, min.insync.replicas=2,
idempotent producers, the Jepsen checker) and a long mode; the processes, metadata, producers and
reads are cluster_nodes.py's, shared with replication_test.py.

Starts its OWN three nodes (process.roles=broker,controller, 127.0.0.1 ports, one shard, short
heartbeat / session / election / replica-lag timeouts; data DIR/ctrl-N, logs
DIR/broker-ctrl-N-K.{out,err}, librdkafka's log with every producer's id in
DIR/controller-fault-clients.log). The active controller is the Raft leader of the metadata
quorum as `ringbroker cluster status` reports it, answered by the leader itself (Metadata's
controller_id names the same node: checked at the start; it falls back to a live broker when the
leader is unknown, so it is not what the faults aim at). Each phase runs --rounds rounds (env
RINGBROKER_CONTROLLER_FAULT_ROUNDS; CI 4, so that the isr phase runs kill -9 and SIGSTOP in both
timings), alternating kill -9 and SIGSTOP of the controller:

  isr      two acks=all idempotent producers (100 records/s each, message.timeout.ms 120 s: see
           ISR_MESSAGE_TIMEOUT_MS) on `ctrl-isr` (3 partitions, RF 3, min.insync.replicas=2). A
           round kill -9s a follower F (another node than the controller C, following a
           partition the third node leads), and faults C either at once (rounds 1, 2 of every
           4) or as soon as the first ISR shrink shows in the metadata (rounds 3, 4: the
           controller dies with the other partitions' shrinks in flight). Two of three voters
           down is a lost quorum, so F is restarted after 4-6 s: F and the third node elect a
           new controller that must commit the pending shrinks and F's return while C is still
           faulted (1.5-2.5 s more); then C is healed. Bounded wait until every ISR is full.
  pids     short-lived idempotent producers (--pid-producers per round, CI 20, 6 at a time, 10
           records each on `ctrl-pids`, RF 3), each bootstrapped at one broker. A round first
           restarts (kill -9) a node B other than C, so B holds no producer-id block (blocks are
           1000 ids, one per broker process, from the controller); the first producers go to B
           and C is faulted 0-0.4 s after they start, while B's first block is being allocated;
           the rest are spread over the brokers up at the time (a killed C allocates a new
           block from the new controller once it is back).
  topics   per round six CreateTopics requests (1-8 partitions, RF 1-3, some with configs), half
           from librdkafka's admin client (which sends them to the node Metadata names controller:
           C), half raw CreateTopics v4 to another node, which forwards them to the controller;
           C faulted 0-0.25 s after the first; a request
           that got an error is retried (bounded) until created or TOPIC_ALREADY_EXISTS (the
           errors seen: a transport error from the killed C, TOPIC_ALREADY_EXISTS on the retry
           when C had committed the topic before it died, INVALID_REPLICATION_FACTOR for RF 3
           while only two brokers are live, as Kafka answers).

A controller fault lasts 4-6 s (the isr phase: until 1.5-2.5 s after F is back), and longer, up to
10 s more, until another node is named controller: every fault ends after a failover, or fails.
A round's log line says when the new controller was first named, and how long the machine's I/O
stalled meanwhile (/proc/pressure/io: a slow restart during a stall of the shared disk is told
apart from a slow broker).

Checked: a new controller during every fault; every ISR full again after every round (bounded);
for `ctrl-isr` and `ctrl-pids` the checker over the history (every acknowledged record read
exactly once, in order, by confluent-kafka via each broker and by kafka-python); after the last
stop every batch's producer id (`ringbroker log dump --batches` of every replica) joined with the
records read: no producer id used by two producers, none that the producer's client did not
acquire (librdkafka's `Acquired PID{Id:..}` lines), and no two clients acquired the same id; the
ids' blocks are counted. For every requested topic, on every broker: present with its partitions,
replication factor, a leader and a full ISR per partition, its configs (DescribeConfigs), one
topic id everywhere, no topic id shared by two topics, no topic nobody asked for.
Every fault is bounded (a few seconds), every wait and loop bounded in count and time; every
process is stopped at the end (SIGCONT first if paused), also on failure. CI about 1.5-2 minutes
(about 25 s more per round of the three phases).
"""

import argparse
import concurrent.futures
import datetime
import json
import logging
import os
import random
import re
import signal
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_nodes  # noqa: E402
import common  # noqa: E402
import jepsen_checker  # noqa: E402
from common import Reporter  # noqa: E402

from confluent_kafka import KafkaException, Producer, TopicCollection  # noqa: E402
from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--rounds", type=int, default=int(os.environ.get("RINGBROKER_CONTROLLER_FAULT_ROUNDS") or 4),
                help="rounds of each phase (env RINGBROKER_CONTROLLER_FAULT_ROUNDS)")
ap.add_argument("--pid-producers", type=int, default=20, help="short-lived producers per pids round")
args = ap.parse_args()
rep = Reporter("controller-fault")

HEARTBEAT_MS = 200
SESSION_MS = 2000
ELECTION_MS = 300
LAG_MS = 3000
NODES = [1, 2, 3]
RF = 3
MIN_ISR = 2
NPARTS = 3
ISR_TOPIC = "ctrl-isr"
PID_TOPIC = "ctrl-pids"
DOWN_S = (4.0, 6.0)  # a faulted node stays down / stopped (longer than replica.lag.time.max.ms)
EXTRA_S = (1.5, 2.5)  # isr: the controller stays faulted after the follower is back
REJOIN_S = 30.0  # bound for every ISR to be full again
CONTROLLER_S = 15.0  # bound for the quorum to name an active controller
FLUSH_S = 45.0  # bound for a short-lived producer's flush (message.timeout.ms is 30 s)
# The isr producers' message.timeout.ms: Kafka's default delivery.timeout.ms. With 30 s, a record
# sent into the first of back-to-back double faults (two of three nodes down, no quorum) once
# timed out; librdkafka then bumps the idempotent epoch and sends the other partitions' records
# still waiting for an answer again under new sequence numbers, and those that had been written
# were in the log twice (4 of 14,347, run of 2026-12-07 under CPU load): the client giving up
# on its own guarantee, not the broker's dedup (every such bump is logged below).
ISR_MESSAGE_TIMEOUT_MS = 120_000
ISR_FLUSH_S = ISR_MESSAGE_TIMEOUT_MS / 1000 + 10
READ_S = 40.0
RATE = 100.0
POOL = 6  # pids: producers at a time
PID_RECORDS = 10
SIGNAL = {"kill": "kill -9", "stop": "SIGSTOP"}
DONE = {"kill": "killed", "stop": "stopped"}
rng = random.Random(args.seed)
T0 = time.monotonic()
os.makedirs(args.work, exist_ok=True)
client_log = logging.getLogger("controller-fault.rdkafka")
client_log.propagate = False
client_log.setLevel(logging.DEBUG)
CLIENT_LOG = os.path.join(args.work, "controller-fault-clients.log")
_handler = logging.FileHandler(CLIENT_LOG)
_handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
client_log.addHandler(_handler)
cluster = cluster_nodes.Cluster(args.bin, args.work, "ctrl", NODES, HEARTBEAT_MS, SESSION_MS, ELECTION_MS,
                                client_log, seed=args.seed)
brokers = cluster.brokers
PRODUCERS = []  # every producer thread, stopped in the end whatever happened


def log(msg):
    print(f"== {rep.name}: [{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------- the controller

def active_controller(timeout=CONTROLLER_S):
    """(node, term) of the active controller once one is named, waiting at most `timeout`;
    (None, None) if none."""
    got = common.wait_until(lambda: (c := cluster.active_controller())[0] is not None and c, timeout, interval=0.2)
    return got or (None, None)


def fault(node, kind):
    b = brokers[node]
    if kind == "kill":
        b.kill()
    else:
        b.pause()


def heal(node):
    """Resumes or restarts `node`; False (with a FAIL line) if it did not come back."""
    b = brokers[node]
    if b.state == "paused":
        b.resume()
        return True
    if b.state == "down":
        ok, detail = b.start()
        if not ok:
            rep.fail(f"broker {node} restarts", detail)
        return ok
    return True


def check_unexpected_exits():
    for n, detail in cluster.unexpected_exits():
        rep.fail(f"broker {n} stays up unless the test stops it", detail)
        ok, detail = brokers[n].start()
        log(f"restarted broker {n} after its own exit: {ok} {detail}")


def rounds(phase):
    """Yields (round, fault kind, active controller, its term) for each of --rounds rounds of
    `phase` (kill -9 in the 1st, 3rd... round, SIGSTOP in the others); a round where no controller
    is named in time is a FAIL line, and skipped."""
    for r in range(args.rounds):
        check_unexpected_exits()
        io0 = common.io_stall_ms()
        c, term = active_controller()
        if rep.check(c is not None, f"{phase} round {r + 1}: an active controller is named", "none"):
            yield r, ("kill" if r % 2 == 0 else "stop"), c, term
        stalled = common.io_stall_since(io0)
        if stalled:
            log(f"{phase} round {r + 1}:{stalled}")


def wait_isr(topic, nparts, rf, what):
    t0 = time.monotonic()
    full = common.wait_until(lambda: cluster.isr_full(topic, nparts, rf), REJOIN_S, interval=0.25)
    rep.check(bool(full), f"{what}: the ISR of every partition of {topic} is full again "
                          f"({time.monotonic() - t0:.1f}s)", cluster.describe(topic))
    return full


FAILOVER_S = 10.0  # a fault is held this much longer at most until another controller is named


def watch_controller(seconds, old, since):
    """Sleeps `seconds` while asking who the controller is, and longer (FAILOVER_S at most) until
    a node other than `old` is named: the fault then always ends after a failover, or the check
    fails. (the first other controller named or None, seconds from `since` until it was)"""
    deadline = time.monotonic() + seconds
    new = at = None
    while time.monotonic() < deadline or (new is None and time.monotonic() < deadline + FAILOVER_S):
        if new is None:
            c, _ = cluster.active_controller()
            if c is not None and c != old:
                new, at = c, round(time.monotonic() - since, 1)
        time.sleep(max(0.0, min(0.3, deadline - time.monotonic())) if new is not None else 0.2)
    return new, at


def create_topic(topic, nparts, rf, config):
    admin = cluster.admin(cluster.healthy()[0], **{"socket.timeout.ms": 10000})  # alive until answered
    fs = admin.create_topics([NewTopic(topic, nparts, rf, config=config)], operation_timeout=20, request_timeout=30)
    fs[topic].result(timeout=40)


# ---------------------------------------------------------------- isr

def phase_isr():
    create_topic(ISR_TOPIC, NPARTS, RF, {"min.insync.replicas": str(MIN_ISR)})
    rep.ok(f"topic {ISR_TOPIC}: {NPARTS} partitions, RF {RF}, min.insync.replicas={MIN_ISR}")
    wait_isr(ISR_TOPIC, NPARTS, RF, "created")
    producers = [cluster_nodes.ProducerThread(i, ISR_TOPIC, RATE, cluster.all_bootstrap(), client_log, log,
                                              ISR_FLUSH_S, prefix="i", message_timeout_ms=ISR_MESSAGE_TIMEOUT_MS)
                 for i in range(2)]
    PRODUCERS.extend(producers)
    for p in producers:
        p.start()
    warm = common.wait_until(lambda: all(len(p.acks) >= 10 for p in producers), 30)
    rep.check(bool(warm), "isr: both producers get acknowledgements before the faults",
              {p.idx: (p.sent, len(p.acks), p.errors) for p in producers})
    for r, kind, c, term in rounds("isr"):
        at_once = r % 4 < 2  # rounds 1, 2: kill, stop at once; rounds 3, 4: after the first shrink
        md = cluster.metadata(ISR_TOPIC)
        parts = md[1] if md and md[1] else {}
        others = [n for n in NODES if n != c]
        # A follower of a partition the third node leads: that leader proposes the shrink.
        followers = [n for n in others if any(l not in (n, c) and n in isr for l, _, isr, _ in parts.values())]
        f = rng.choice(followers or others)
        isr_before = {q: len(i) for q, (_, _, i, _) in parts.items()}
        acked0 = sum(len(p.acks) for p in producers)
        brokers[f].kill()
        t_f = time.monotonic()
        shrank_before = None
        if not at_once:
            shrank = common.wait_until(
                lambda: (m := cluster.metadata(ISR_TOPIC, timeout=1.0)) and m[1] and any(
                    len(i) < isr_before.get(q, RF) for q, (_, _, i, _) in m[1].items()),
                LAG_MS / 1000 + 4, interval=0.1)
            shrank_before = round(time.monotonic() - t_f, 1) if shrank else None
        fault(c, kind)
        t_c = time.monotonic()
        down = rng.uniform(*DOWN_S)
        time.sleep(max(0.0, down - (t_c - t_f)))
        heal(f)
        new, new_at = watch_controller(rng.uniform(*EXTRA_S), c, t_c)
        held = round(time.monotonic() - t_c, 1)
        heal(c)
        rep.check(new is not None and new != c,
                  f"isr round {r + 1}: a new controller while the old one ({c}) was {DONE[kind]}", f"got {new}")
        full = wait_isr(ISR_TOPIC, NPARTS, RF, f"isr round {r + 1}")
        log(f"isr round {r + 1}: kill -9 follower {f}, then {SIGNAL[kind]} controller "
            f"{c} (term {term}) {'at once' if at_once else (f'after the first shrink ({shrank_before}s)' if shrank_before is not None else 'after no shrink within the bound')}"
            f"; follower back after {down:.1f}s, controller {DONE[kind]} {held}s, new controller {new} after {new_at}s; "
            f"{sum(len(p.acks) for p in producers) - acked0} acknowledged meanwhile; "
            f"{'ISR full' if full else 'ISR NOT full'}: {cluster.describe(ISR_TOPIC)}")
    return producers


# ---------------------------------------------------------------- pids

class ShortProducer(threading.Thread):
    """One idempotent producer (one InitProducerId) writing PID_RECORDS records `<name>-<seq>`,
    flushed (bounded), then closed; at most POOL of them run at a time."""

    slots = threading.Semaphore(POOL)

    def __init__(self, name, bootstrap):
        super().__init__(daemon=True, name=f"short-{name}")
        self.pname, self.bootstrap = name, bootstrap
        self.acks, self.failed, self.unknown = [], [], []
        self.errors = {}
        self.fatal = []
        self.crashed = None
        self.left = 0
        self.started_at = None  # wall clock (the clients' log is stamped with it)

    def run(self):
        with ShortProducer.slots:
            try:
                self._run()
            except Exception as e:  # noqa: BLE001 - reported by the main thread
                self.crashed = f"{type(e).__name__}: {e}"

    def _run(self):
        self.started_at = time.time()
        pending = set()
        on_delivery = cluster_nodes.delivery_recorder(self, pending)

        def on_error(err):
            self.errors[err.name()] = self.errors.get(err.name(), 0) + 1
            if err.fatal():
                self.fatal.append(str(err))

        p = Producer({"bootstrap.servers": self.bootstrap, "client.id": self.pname, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000, "request.timeout.ms": 5000,
                      "socket.timeout.ms": 10000, "retry.backoff.ms": 50, "retry.backoff.max.ms": 500,
                      "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 1000, "log.connection.close": False,
                      "logger": client_log, "debug": "eos", "error_cb": on_error})
        try:
            for seq in range(PID_RECORDS):
                v = f"{self.pname}-{seq:06d}"
                p.produce(PID_TOPIC, key=f"k{seq % 8}".encode(), value=v.encode(), on_delivery=on_delivery)
                pending.add(v)
                p.poll(0.02)
            self.left = p.flush(FLUSH_S)
        except KafkaException as e:
            self.fatal.append(str(e))
            try:
                p.flush(10)
            except KafkaException:
                pass
        self.unknown.extend(sorted(pending))


def phase_pids():
    create_topic(PID_TOPIC, NPARTS, RF, {"min.insync.replicas": str(MIN_ISR)})
    rep.ok(f"topic {PID_TOPIC}: {NPARTS} partitions, RF {RF}, min.insync.replicas={MIN_ISR}")
    wait_isr(PID_TOPIC, NPARTS, RF, "created")
    everyone = []
    for r, kind, c, term in rounds("pids"):
        b = rng.choice([n for n in NODES if n != c])
        # A restarted broker holds no block: its first InitProducerId asks the controller for one.
        brokers[b].kill()
        ok, detail = brokers[b].start()
        rep.check(ok, f"pids round {r + 1}: broker {b} restarts after kill -9", detail)
        wait_isr(PID_TOPIC, NPARTS, RF, f"pids round {r + 1}, after restarting broker {b}")
        round_producers = []
        for j in range(args.pid_producers):
            if j < 3:
                via = b
            else:
                up = sorted(cluster.healthy()) or NODES
                via = up[j % len(up)]
            sp = ShortProducer(f"g{r}n{j}b{via}", cluster.bootstrap(via))
            round_producers.append(sp)
        for sp in round_producers[:POOL]:
            sp.start()
        time.sleep(rng.uniform(0.0, 0.4))
        fault(c, kind)
        t_c = time.monotonic()
        # The rest start meanwhile, each at a broker that is up at that moment.
        for j, sp in enumerate(round_producers[POOL:], start=POOL):
            up = sorted(cluster.healthy())
            via = up[j % len(up)]
            sp.pname = f"g{r}n{j}b{via}"
            sp.bootstrap = cluster.bootstrap(via)
            sp.start()
        down = rng.uniform(*DOWN_S)
        new, new_at = watch_controller(max(0.0, down - (time.monotonic() - t_c)), c, t_c)
        held = round(time.monotonic() - t_c, 1)
        heal(c)
        deadline = time.monotonic() + FLUSH_S + 30  # one bound for all: they ran side by side
        for sp in round_producers:
            sp.join(max(0.0, deadline - time.monotonic()))
        rep.check(new is not None, f"pids round {r + 1}: a new controller while the old one ({c}) was {DONE[kind]}",
                  "none")
        stuck = [sp.pname for sp in round_producers if sp.is_alive() or sp.crashed or sp.left]
        rep.check(not stuck, f"pids round {r + 1}: all {len(round_producers)} producers finished and flushed",
                  {sp.pname: (sp.is_alive(), sp.crashed, sp.left) for sp in round_producers if sp.pname in stuck})
        wait_isr(PID_TOPIC, NPARTS, RF, f"pids round {r + 1}")
        everyone.extend(round_producers)
        acked = sum(len(sp.acks) for sp in round_producers)
        log(f"pids round {r + 1}: broker {b} restarted, {len(round_producers)} producers, controller {c} (term {term}) "
            f"{SIGNAL[kind]} for {held}s, new controller {new} after {new_at}s; {acked} of "
            f"{len(round_producers) * PID_RECORDS} records acknowledged; fatal "
            f"{[f for sp in round_producers for f in sp.fatal][:3]}; errors "
            f"{sorted({e for sp in round_producers for e in sp.errors})}")
    return everyone


def acquired_pids():
    """({client.id: {producer id}}, {client.id: wall-clock time of its first id}) from
    librdkafka's `Acquired PID{Id:..}` lines."""
    out, first = {}, {}
    pat = re.compile(r"^(\S+ \S+) .*\[([^\]#]+)#producer-\d+\] .*Acquired PID\{Id:(\d+),Epoch:(\d+)\}")
    with open(CLIENT_LOG) as f:
        for line in f:
            m = pat.search(line)
            if m:
                out.setdefault(m[2], set()).add(int(m[3]))
                if m[2] not in first:
                    try:
                        first[m[2]] = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    except ValueError:
                        pass
    return out, first


def check_producer_ids(reads_by_topic, shorts):
    """After the last stop: every batch's producer id in every replica, joined with the values the
    reads found at its offsets."""
    by_pid = {}  # producer id -> {producer name}
    problems = []
    for topic, reads in reads_by_topic.items():
        values = {}  # (partition, offset) -> value
        for rd in reads:
            for p, pr in rd["partitions"].items():
                for o, v in pr["records"]:
                    values[(int(p), int(o))] = v
        for p in range(NPARTS):
            for n in NODES:
                batches = cluster_nodes.replica_batches(args.bin, cluster.data_dir(n), topic, p)
                if batches is None:
                    problems.append(f"{topic}-{p}: broker {n}'s replica cannot be read")
                    continue
                for base, last, _, pid in batches:
                    for o in range(base, last + 1):
                        v = values.get((p, o))
                        if v is not None:
                            by_pid.setdefault(pid, set()).add(v.rpartition("-")[0])
    rep.check(not problems, "every replica's log can be dumped", "; ".join(problems[:5]))
    shared = {pid: sorted(names) for pid, names in by_pid.items() if len(names) > 1}
    rep.check(not shared, f"no producer id in the logs is used by two producers ({len(by_pid)} producer ids)",
              f"shared: {dict(list(shared.items())[:5])}")
    short_names = {sp.pname for sp in shorts}
    acquired, first = acquired_pids()
    claims = {}
    for client, pids in acquired.items():
        for pid in pids:
            claims.setdefault(pid, set()).add(client)
    twice = {pid: sorted(cs) for pid, cs in claims.items() if len(cs) > 1}
    rep.check(not twice, f"no two clients acquired the same producer id ({len(acquired)} clients, "
                         f"{len(claims)} ids)", f"acquired by two: {dict(list(twice.items())[:5])}")
    # A short producer's records carry an id its client acquired (client.id is its name).
    foreign = {}
    for pid, names in by_pid.items():
        for name in names:
            if name in short_names and pid not in acquired.get(name, set()):
                foreign.setdefault(name, []).append(pid)
    rep.check(not foreign, "every short-lived producer's batches carry a producer id its client acquired",
              f"{dict(list(foreign.items())[:5])}; acquired {dict((k, sorted(acquired.get(k, []))) for k in list(foreign)[:5])}")
    missing = [n for n in short_names if n not in acquired]
    rep.check(not missing, f"every short-lived producer acquired a producer id ({len(short_names)})", missing[:10])
    blocks = sorted({pid // 1000 for pid in claims} | {pid // 1000 for pid in by_pid if pid >= 0})
    # How long InitProducerId took: a wait of a second or more spans a controller failover.
    waits = sorted(round(first[sp.pname] - sp.started_at, 2) for sp in shorts
                   if sp.pname in first and sp.started_at is not None)
    by_block = {}
    for pid, cs in claims.items():
        by_block.setdefault(pid // 1000, set()).update(c.rpartition("b")[2] if c in short_names else c for c in cs)
    log(f"InitProducerId waits of the short-lived producers: {len(waits)}, median "
        f"{waits[len(waits) // 2] if waits else None}s, max {waits[-1] if waits else None}s, "
        f"{sum(w >= 1.0 for w in waits)} of 1 s or more; per block of 1000, the brokers its short-lived clients "
        f"were bootstrapped at (librdkafka asks any broker it is connected to) or its long-lived clients: "
        f"{ {b: sorted(v) for b, v in sorted(by_block.items())} }")
    rep.check(len(blocks) > len(NODES),
              f"producer ids came from {len(blocks)} blocks of 1000 (more than one per broker: blocks allocated "
              f"after restarts and failovers)", f"blocks {blocks}")


# ---------------------------------------------------------------- topics

def topic_specs(r):
    """Six topics: (name, partitions, RF, configs)."""
    specs = []
    for i, (nparts, rf) in enumerate([(1, 1), (2, 2), (3, 3), (4, 3), (6, 2), (8, 3)]):
        config = {}
        if i % 2 == 0:
            config["retention.ms"] = str(3_600_000 + 1000 * r + i)
        if i % 3 == 1:
            config["max.message.bytes"] = str(200_000 + i)
        if rf >= 2 and i % 2 == 1:
            config["min.insync.replicas"] = "2"
        specs.append((f"ctrl-t{r}-{i}", nparts, rf, config))
    return specs


def create_async(admin, spec):
    name, nparts, rf, config = spec
    return admin.create_topics([NewTopic(name, nparts, rf, config=config)], operation_timeout=25,
                               request_timeout=30)[name]


def create_raw(via, spec):
    """CreateTopics v4 sent to broker `via` itself: None when created, else the error's name."""
    try:
        code, msg = common.create_topics_raw(cluster.bootstrap(via), [spec])[spec[0]]
    except (OSError, RuntimeError, struct.error) as e:
        return f"raw: {type(e).__name__}: {e}"
    return None if code == "NONE" else (code if not msg else f"{code} ({msg})")


def outcome(fut, timeout):
    """"created", or what the request's answer (librdkafka's future or create_raw's) says."""
    try:
        got = fut.result(timeout=timeout)
        return "created" if got is None else got
    except KafkaException as e:
        return e.args[0].name() if e.args and hasattr(e.args[0], "name") else str(e)
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def phase_topics(all_specs):
    for r, kind, c, term in rounds("topics"):
        other = rng.choice([n for n in NODES if n != c])
        specs = topic_specs(r)
        all_specs.extend(specs)
        # librdkafka's admin client sends CreateTopics to the node Metadata names controller, C;
        # a raw request to the other node makes that broker forward it to the controller.
        admin = cluster.admin(other, **{"socket.timeout.ms": 10000})
        raw = concurrent.futures.ThreadPoolExecutor(max_workers=len(specs))
        futs = {}
        delay = rng.uniform(0.0, 0.25)
        t_first = time.monotonic()
        faulted = False
        for i, spec in enumerate(specs):
            if i % 2 == 0:
                futs[spec[0]] = (f"librdkafka to {c}", create_async(admin, spec))
            else:
                futs[spec[0]] = (f"raw to {other}", raw.submit(create_raw, other, spec))
            if not faulted and time.monotonic() - t_first >= delay:
                fault(c, kind)
                faulted = True
            time.sleep(0.03)
        if not faulted:
            fault(c, kind)
        t_c = time.monotonic()
        down = rng.uniform(*DOWN_S)
        new, new_at = watch_controller(down, c, t_c)
        held = round(time.monotonic() - t_c, 1)
        heal(c)
        rep.check(new is not None, f"topics round {r + 1}: a new controller while the old one ({c}) was {DONE[kind]}",
                  "none")
        first = {name: (via, outcome(f, 45)) for name, (via, f) in futs.items()}
        raw.shutdown(wait=False)
        # A request that failed is retried through a healthy node until it is created or exists.
        final = {}
        for spec in specs:
            name = spec[0]
            if first[name][1] == "created":
                final[name] = "created"
                continue
            got = None
            for attempt in range(6):
                up = cluster.healthy()
                if not up:
                    time.sleep(1)
                    continue
                admin = cluster.admin(up[0], **{"socket.timeout.ms": 10000})  # alive until answered
                got = outcome(create_async(admin, spec), 40)
                if got in ("created", "TOPIC_ALREADY_EXISTS"):
                    break
                time.sleep(1.0)
            final[name] = f"retried: {got}"
        bad = {n: (first[n], final[n]) for n in final
               if final[n] not in ("created", "retried: created", "retried: TOPIC_ALREADY_EXISTS")}
        rep.check(not bad, f"topics round {r + 1}: every CreateTopics request succeeds, or its retry creates the "
                           f"topic or finds it", bad)
        log(f"topics round {r + 1}: controller {c} (term {term}) {SIGNAL[kind]} "
            f"{delay:.2f}s after the first request, for {held}s (new controller {new} after {new_at}s); first answers "
            f"{ {n: f'{v}: {o}' for n, (v, o) in first.items()} }; after retries {final}")
        check_topics(specs, f"topics round {r + 1}")


def topic_view(n, names):
    """Broker n's view of `names`: {name: (partitions, {p: (leader, replicas, isr, err)}) or None}."""
    md = cluster.admin(n, **{"socket.timeout.ms": 10000}).list_topics(timeout=10)
    out = {}
    for name in names:
        t = md.topics.get(name)
        if t is None or t.error is not None:
            out[name] = None
            continue
        out[name] = {p: (m.leader, list(m.replicas), sorted(m.isrs), m.error.code() if m.error else 0)
                     for p, m in t.partitions.items()}
    return out, sorted(md.topics)


def spec_problems(specs):
    """What every broker's metadata gets wrong about `specs` (empty when all is as requested)."""
    problems = []
    names = [s[0] for s in specs]
    for n in NODES:
        try:
            view, listed = topic_view(n, names)
        except Exception as e:  # noqa: BLE001
            problems.append(f"broker {n}: metadata: {e}")
            continue
        for name, nparts, rf, _ in specs:
            parts = view[name]
            if parts is None:
                problems.append(f"broker {n}: {name} missing")
                continue
            if sorted(parts) != list(range(nparts)):
                problems.append(f"broker {n}: {name} has partitions {sorted(parts)}, want {nparts}")
            for p, (leader, replicas, isr, err) in parts.items():
                if len(replicas) != rf or len(set(replicas)) != rf or leader < 0 or err or sorted(isr) != sorted(replicas):
                    problems.append(f"broker {n}: {name}-{p} leader {leader} replicas {replicas} isr {isr} err {err}")
        prefix = names[0].rsplit("-", 1)[0] + "-"
        stray = [t for t in listed if t.startswith(prefix) and t not in names]
        if stray:
            problems.append(f"broker {n}: topics nobody asked for {stray}")
    return problems


def check_topics(specs, what):
    ok = common.wait_until(lambda: not spec_problems(specs), REJOIN_S, interval=0.5)
    problems = [] if ok else spec_problems(specs)
    rep.check(not problems, f"{what}: every broker lists all {len(specs)} topics with their partitions, RF, a "
                            f"leader and a full ISR per partition", "; ".join(problems[:6]))
    # Configs as requested, as each broker describes them.
    wrong = []
    for n in NODES:
        admin = cluster.admin(n, **{"socket.timeout.ms": 10000})
        for name, _, _, config in specs:
            if not config:
                continue
            try:
                got = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)], request_timeout=15)
                entries = list(got.values())[0].result(timeout=20)
            except Exception as e:  # noqa: BLE001
                wrong.append(f"broker {n}: {name}: {e}")
                continue
            for k, v in config.items():
                have = entries.get(k)
                if have is None or have.value != v:
                    wrong.append(f"broker {n}: {name} {k}={have.value if have else None}, want {v}")
    rep.check(not wrong, f"{what}: every broker describes the requested configs", "; ".join(wrong[:6]))


def check_topic_ids(names):
    """One topic id per topic on every broker, no id shared by two topics."""
    ids = {}  # name -> {broker: id}
    errors = []
    for n in NODES:
        admin = cluster.admin(n, **{"socket.timeout.ms": 10000})
        try:
            fs = admin.describe_topics(TopicCollection(names), request_timeout=20)
        except Exception as e:  # noqa: BLE001
            errors.append(f"broker {n}: {e}")
            continue
        for name, f in fs.items():
            try:
                ids.setdefault(name, {})[n] = str(f.result(timeout=25).topic_id)
            except Exception as e:  # noqa: BLE001
                errors.append(f"broker {n}: {name}: {e}")
    rep.check(not errors, f"every broker describes all {len(names)} topics (DescribeTopics)", "; ".join(errors[:5]))
    split = {name: by for name, by in ids.items() if len(set(by.values())) != 1}
    rep.check(not split, "every broker tells the same topic id for each topic", split)
    owners = {}
    for name, by in ids.items():
        for tid in set(by.values()):
            owners.setdefault(tid, set()).add(name)
    shared = {tid: sorted(ns) for tid, ns in owners.items() if len(ns) > 1}
    rep.check(not shared and len(owners) >= len(names),
              f"no topic id appears for two topics ({len(owners)} ids for {len(names)} topics)", shared)


# ---------------------------------------------------------------- the test

def history_check(label, producers, reads):
    history = {"acks": [a for p in producers for a in p.acks], "failed": [f for p in producers for f in p.failed],
               "unknown": [v for p in producers for v in p.unknown], "reads": reads}
    path = os.path.join(args.work, f"controller-fault-{label}-history.json")
    with open(path, "w") as f:
        json.dump(history, f)
    res = jepsen_checker.check(history)
    c = res["counts"]
    log(f"{label}: acknowledged {c['acknowledged']}, failed {c['failed']}, unknown {c['unknown']}, lost {c['lost']}, "
        f"duplicated {c['duplicated']}, reordered {c['reordered']}, two-valued {c['two_valued']}, skipped "
        f"{c['skipped']}, went back {c['went_back']}, unexpected {c['unexpected']}; failed but present "
        f"{c['failed_but_present']}; history {path}")
    rep.check(c["reads"] >= 1 and any(r["complete"] for r in res["per_reader"].values()),
              f"{label}: at least one read of the whole topic completed", res["per_reader"])
    rep.check(c["acknowledged"] >= 100, f"{label}: {c['acknowledged']} records acknowledged", "fewer than 100")
    bumps = epoch_bumps()
    if bumps:
        log(f"librdkafka bumped an idempotent producer's epoch {len(bumps)} times: {bumps[:4]}")
    for kind in jepsen_checker.ANOMALIES:
        rep.check(c[kind] == 0, f"{label}: no record {kind.replace('_', '-')} ({c[kind]})",
                  f"{res['examples'].get(kind, '')}; librdkafka's epoch bumps (records it sent again under new "
                  f"sequence numbers): {bumps[:4]}")


def epoch_bumps():
    """librdkafka's idempotent epoch bumps (`Beginning partition drain ... epoch bump ...: <why>`
    lines of the clients' log): [(client, why)]."""
    out = []
    pat = re.compile(r"\[([^\]#]+)#producer-\d+\] .*Beginning partition drain .*epoch bump .*?: (.*)$")
    with open(CLIENT_LOG) as f:
        for line in f:
            m = pat.search(line)
            if m:
                out.append((m[1], m[2].strip()))
    return out


def main():
    prop = f"replica.lag.time.max.ms={LAG_MS}"
    if cluster.knows_property(prop):
        cluster.optional_settings.append(prop)
    else:
        rep.skip(f"--set {prop}", "this binary does not know the property: started without it")
    log(f"seed {args.seed}; {args.rounds} rounds per phase; brokers {cluster.ports}, controllers {cluster.cports}")
    ready = cluster.start_all()
    if not rep.check(all(ready.values()), "3 nodes (voters + brokers) start and listen",
                     {n: common.tail(b.base + ".err") for n, b in brokers.items() if not ready[n]}):
        return
    formed = common.wait_until(lambda: (m := cluster.metadata(ISR_TOPIC)) and m[0] == NODES, 30)
    if not rep.check(bool(formed), "every broker is registered (metadata lists 1, 2, 3)", cluster.describe(ISR_TOPIC)):
        return
    c, term = active_controller()
    if not rep.check(c is not None, "`ringbroker cluster status` names the Raft leader, answered by the leader", "none"):
        return

    def controller_ids():
        return {n: cluster.admin(n).list_topics(timeout=5).controller_id for n in NODES}

    agree = common.wait_until(lambda: set((ids := controller_ids()).values()) == {c} and ids, 10, interval=0.3)
    rep.check(bool(agree), f"every broker's Metadata controller_id is the Raft leader {c} (term {term})",
              controller_ids())
    isr_producers = phase_isr()
    pid_producers = phase_pids()
    cluster_nodes.stop_producers(isr_producers, ISR_FLUSH_S)
    cluster_nodes.check_producers(isr_producers, rep, log, ISR_FLUSH_S)
    specs = []
    phase_topics(specs)
    check_unexpected_exits()
    heal_all = cluster.heal()
    rep.check(all(ok for ok, _ in heal_all.values()), "every node is up again", heal_all)
    wait_isr(ISR_TOPIC, NPARTS, RF, "at the end")
    wait_isr(PID_TOPIC, NPARTS, RF, "at the end")
    ids = cluster.cluster_ids()
    rep.check(len(ids) == len(NODES) and len(set(ids.values())) == 1, "every broker reports one ClusterId", ids)
    if specs:
        check_topic_ids([s[0] for s in specs] + [ISR_TOPIC, PID_TOPIC])
    reads = {}
    for topic, label, producers in ((ISR_TOPIC, "isr", isr_producers), (PID_TOPIC, "pids", pid_producers)):
        reads[topic] = cluster_nodes.read_all(cluster, topic, NPARTS, rep, log, READ_S)
        history_check(label, producers, reads[topic])
    return reads, pid_producers


def on_term(*_):
    raise SystemExit(143)


signal.signal(signal.SIGTERM, on_term)
result = None
try:
    result = rep.run(rep.name, main)
finally:
    for p in PRODUCERS:
        p.stop_at.set()
    rcs = cluster.stop_all()
    if rcs:
        rep.check(all(rc == 0 for rc in rcs.values()), "every broker exits 0 on SIGTERM at the end", rcs)
if result:
    try:
        check_producer_ids(*result)
    except Exception as e:  # noqa: BLE001
        rep.fail("checking the producer ids", f"{type(e).__name__}: {e}")
rep.finish()
