#!/usr/bin/env python3
"""Replication under faults with real processes and real clients, checked Jepsen-style.

    replication_test.py --bin path/to/ringbroker --work DIR [--seed 1] [--soak-secs N]
                        [--fault-secs 100] [--producers 2] [--rate 100] [--proxy-node 3|0]
    replication_test.py --bin ... --work DIR --client kafkajs|rskafka [--client-bin PATH]
                        [--client-faults 4] [--rate 50]

Starts its OWN three brokers, each a controller voter and a broker (process.roles=broker,
controller), on 127.0.0.1 ports with 1 unpinned shard and short heartbeat / session / election /
replica-lag timeouts (data DIR/repl-N, logs DIR/broker-repl-N-K.{out,err}, so run.sh's panic check
sees them; librdkafka's log, with producer ids and epochs, in DIR/replication-clients.log).
`replica.lag.time.max.ms` is passed only if the binary knows it (SKIP line otherwise).
One broker (--proxy-node, default 3; 0 for none) advertises a tcp_proxy.TcpProxy in front of its
client listener: clients, and the other brokers' replica fetchers (they follow the advertised
address), reach it through the proxy, which the fault loop can cut. Its own fetches from the
others and its controller traffic go direct, so a cut isolates it as a leader without fencing it.

  topic     `jepsen`: 3 partitions, RF 3, min.insync.replicas=2 (confluent-kafka AdminClient);
            the ISR of every partition reaches 3 (bounded); every broker reports one ClusterId
  produce   --producers confluent-kafka producers (enable.idempotence, acks=all, the client's own
            retries), each in a thread at --rate records/s, values `p<producer>-<seq>` unique over
            the run, keyed over 32 keys so they spread over the partitions; every delivery report
            is recorded (after a fatal error a producer goes on with a new client, `p<i>r<gen>`)
  faults    while producing, in turn: kill -9 of a partition leader; SIGSTOP of a leader, then
            SIGCONT (a zombie); kill -9 of a follower; cutting the proxied broker's links. Each
            lasts 1.5-3 session timeouts (a killed broker is restarted after it), meanwhile the
            metadata is watched: when the partition got a new leader, when an ISR shrank. After
            every fault the test waits (bounded) until every ISR is full again and reports how long
            it took. One broker at a time, so the controller quorum keeps its majority.
  read      producers stop and flush (bounded), the ISR heals (bounded), every broker reports the
            same ClusterId, then every partition is read from the low to the high watermark by a
            confluent-kafka consumer (assign, no group) bootstrapped at each broker in turn, and by
            a kafka-python consumer
  check     jepsen_checker.check over the history: lost, duplicated, reordered, two-valued,
            skipped, went back, unexpected all 0; enough acknowledged; every killed or paused
            leader's partition got a new leader during the fault; every faulted broker rejoined the
            ISR. The history is written to DIR/replication-history.json (`jepsen_checker.py
            DIR/replication-history.json` checks it again).

The CI variant runs its fault loop for 100 s (about 3 minutes in all); with --soak-secs N (or env
RINGBROKER_REPLICATION_SOAK_SECS=N) it runs for N seconds and needs at least 10 faults. Every
wait and loop is bounded; every process is stopped at the end (SIGCONT first if paused).

--client kafkajs / rskafka: the same cluster, topic, reads and checker, but the producing client is
another library, run as a child process that prints every outcome as a JSON line (ClientProcess):
tests/interop/kafkajs/failover.js (one idempotent kafkajs producer per partition, acks -1,
maxInFlightRequests 1, kafkajs's own retries) or examples/rskafka_failover.rs (one rskafka
PartitionClient per partition, acks=all, rskafka's own retries off: the program retries each failed
call, and rskafka re-resolves the leader). No proxy; the fault loop only kill -9s the leader of a
partition, --client-faults times (about 10 s each), then the client stops, the cluster heals and
the client reads every partition back itself (kafkajs: a consumer group from the beginning;
rskafka: fetches from the low watermark), next to the confluent-kafka and kafka-python reads.
Checked as above (files DIR/repl-<client>-N, DIR/broker-repl-<client>-*, DIR/replication-<client>-*),
plus: after every kill every partition has acknowledged records again before the next fault (the
client recovered by itself; the log says how long the faulted partition took and whether it was
while the killed leader was still down). rskafka has no idempotent producer, so a retried write
whose acknowledgement was lost can be in the log twice: its duplicates are counted and reported,
and each must be a value the program retried (a duplicate of a value never retried fails).
"""

import argparse
import json
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_nodes  # noqa: E402
import common  # noqa: E402
import jepsen_checker  # noqa: E402
from common import Reporter  # noqa: E402
from tcp_proxy import TcpProxy  # noqa: E402

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--soak-secs", type=float, default=float(os.environ.get("RINGBROKER_REPLICATION_SOAK_SECS") or 0))
ap.add_argument("--fault-secs", type=float, default=100.0, help="length of the CI variant's fault loop")
ap.add_argument("--producers", type=int, default=2)
ap.add_argument("--rate", type=float, default=None,
                help="records per second per producer (100; 50 per partition for --client kafkajs/rskafka)")
ap.add_argument("--proxy-node", type=int, default=None,
                help="broker whose client listener is behind a proxy (0: none; default 3, 0 with --client)")
ap.add_argument("--client", choices=["confluent-kafka", "kafkajs", "rskafka"], default="confluent-kafka",
                help="the producing client: kafkajs or rskafka make it a leader-kill failover test of that client")
ap.add_argument("--client-bin", default=os.environ.get("RSKAFKA_FAILOVER_BIN"),
                help="--client rskafka: the examples/rskafka_failover binary")
ap.add_argument("--client-faults", type=int, default=4, help="--client kafkajs/rskafka: leader kills")
args = ap.parse_args()
# --client kafkajs / rskafka: the client runs as a child process (tests/interop/kafkajs/failover.js,
# examples/rskafka_failover.rs) printing its acknowledgements as JSON lines; the fault loop only
# kill -9s partition leaders, --client-faults times.
CLIENT = None if args.client == "confluent-kafka" else args.client
if args.rate is None:
    args.rate = 50.0 if CLIENT else 100.0
if args.proxy_node is None:
    args.proxy_node = 0 if CLIENT else 3
HERE = os.path.dirname(os.path.abspath(__file__))
rep = Reporter("replication" if not CLIENT else f"failover-{CLIENT}")

HEARTBEAT_MS = 200
SESSION_MS = 2000
ELECTION_MS = 300
LAG_MS = 3000
TOPIC = "jepsen"
NPARTS = 3
RF = 3
MIN_ISR = 2
NODES = [1, 2, 3]
SOAK = args.soak_secs > 0 and not CLIENT
FAULT_SECS = args.soak_secs if SOAK else args.fault_secs
MAX_FAULTS = 2000 if SOAK else 40
MIN_FAULTS = 10 if SOAK else (3 if FAULT_SECS >= 60 else 1)
if CLIENT:
    # A fault takes about 10 s (down, restart, rejoin, quiet); the loop's time is only a bound.
    MAX_FAULTS = MIN_FAULTS = max(1, args.client_faults)
    FAULT_SECS = 25.0 * MAX_FAULTS
# How long a fault lasts: a killed broker stays down, a paused one (a zombie) stopped, the proxied
# one cut off, for 2.5 to 3.5 session timeouts: long enough to be fenced and to lose its
# leadership even when it was the active controller (a new controller gives every broker a full
# session of grace first: a 3.3 s pause of the controller once ended before its partitions had a
# new leader), and longer than replica.lag.time.max.ms, so followers fall out of the ISR.
DOWN_S = (2.5 * SESSION_MS / 1000, 3.5 * SESSION_MS / 1000)
REJOIN_S = 20.0  # bound for a faulted broker to be back in every ISR
FLUSH_S = 45.0  # bound for a producer's flush (message.timeout.ms is 30 s)
READ_S = 40.0  # bound for one full read of the topic
MIN_ACKED = max(1000, int(FAULT_SECS * args.producers * args.rate * 0.1))
if CLIENT:
    MIN_ACKED = max(300, int(MAX_FAULTS * 10 * NPARTS * args.rate * 0.1))
# This run's files under --work: data NAME-N, logs broker-NAME-N-K.*, LABEL-history.json,
# LABEL-clients.log (repl and replication; repl-kafkajs and replication-kafkajs, ...).
NAME = "repl" if not CLIENT else f"repl-{CLIENT}"
LABEL = "replication" if not CLIENT else f"replication-{CLIENT}"
rng = random.Random(args.seed)  # the fault schedule
T0 = time.monotonic()
# librdkafka's own log lines (connection refused while a broker is down, ...) go to a file under
# --work, not into the test's output.
os.makedirs(args.work, exist_ok=True)
client_log = logging.getLogger("replication.rdkafka")
client_log.propagate = False
client_log.setLevel(logging.DEBUG)
_handler = logging.FileHandler(os.path.join(args.work, f"{LABEL}-clients.log"))
_handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
client_log.addHandler(_handler)


def log(msg):
    print(f"== {rep.name}: [{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


# ---------------------------------------------------------------- brokers

cluster = cluster_nodes.Cluster(args.bin, args.work, NAME, NODES, HEARTBEAT_MS, SESSION_MS, ELECTION_MS,
                                client_log, extra_ports=1, seed=args.seed)
ports, cports, brokers = cluster.ports, cluster.cports, cluster.brokers
proxy_port = cluster.extra_ports[0]
PROXIED = args.proxy_node if args.proxy_node in NODES else None
if PROXIED:
    cluster.advertised[PROXIED] = f"127.0.0.1:{proxy_port}"
proxy = None
OPTIONAL_SETTINGS = cluster.optional_settings
tail = cluster_nodes.tail
bootstrap = cluster.bootstrap
all_bootstrap = cluster.all_bootstrap
healthy = cluster.healthy
cluster_ids = cluster.cluster_ids


def metadata(timeout=3.0):
    """(brokers, {partition: (leader, replicas, isr, error code)}) of TOPIC, or None."""
    return cluster.metadata(TOPIC, timeout)


def isr_full():
    """Every broker live, every partition led and with an ISR of RF (all three brokers): a faulted
    broker has rejoined every ISR."""
    return cluster.isr_full(TOPIC, NPARTS, RF)


def describe():
    return cluster.describe(TOPIC)


def check_cluster_id(when):
    ids = cluster_ids()
    rep.check(len(ids) == len(NODES) and len(set(ids.values())) == 1,
              f"every broker reports the same ClusterId {when}", ids)


def check_unexpected_exits():
    for n, detail in cluster.unexpected_exits():
        rep.fail(f"broker {n} stays up unless the test stops it", detail)
        ok, detail = brokers[n].start()
        log(f"restarted broker {n} after its own exit: {ok} {detail}")


# ---------------------------------------------------------------- producers

def ProducerThread(idx):  # noqa: N802 - stands for the class it makes
    """cluster_nodes.ProducerThread on TOPIC at --rate, through every broker."""
    return cluster_nodes.ProducerThread(idx, TOPIC, args.rate, all_bootstrap(), client_log, log, FLUSH_S)



class ClientProcess(threading.Thread):
    """--client kafkajs / rskafka: the client as a child process (tests/interop/kafkajs/failover.js,
    examples/rskafka_failover.rs) that produces to every partition and prints each outcome as a
    JSON line (`ack`, `failed`, `retry`, `stopped`, `read`, `read_done`, `fatal`), stamped here on
    arrival (seconds since T0). The same attributes as ProducerThread, so the fault loop and the
    checks treat it as one; `stop_at` makes it send `stop` and wait (bounded) for `stopped`;
    read_back() sends `read` and returns the client's own read of the topic for the checker."""

    def __init__(self, client):
        super().__init__(daemon=True, name=f"client-{client}")
        self.idx = client
        self.stop_at = threading.Event()
        self.acks, self.failed, self.unknown = [], [], []
        self.retries = []  # rskafka: every failed attempt (the program retries it)
        self.errors = {}
        self.fatal = []
        self.left_after_flush = 0
        self.sent = 0
        self.crashed = None
        self.stopped = None
        self.read_parts = []
        self.read_done = None
        self._stopped = threading.Event()
        self._read = threading.Event()
        self._eof = threading.Event()
        self.err_path = os.path.join(args.work, f"{LABEL}-client.err")
        opts = ["--bootstrap", all_bootstrap(), "--topic", TOPIC, "--partitions", str(NPARTS),
                "--rate", str(args.rate), "--duration-ms", str(int((FAULT_SECS + 60) * 1000)),
                "--control", "stdin", "--read-timeout-ms", str(int(READ_S * 1000))]
        if client == "kafkajs":
            self.cmd = ["node", os.path.join(HERE, "kafkajs", "failover.js")] + opts
        else:
            if not args.client_bin:
                raise RuntimeError("--client rskafka needs --client-bin (or RSKAFKA_FAILOVER_BIN): "
                                   "the examples/rskafka_failover binary")
            self.cmd = [args.client_bin] + opts
        self.proc = None

    def run(self):
        try:
            self._run()
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.crashed = f"{type(e).__name__}: {e} :: {traceback.format_exc(limit=3)}"

    def _run(self):
        with open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         text=True, bufsize=1)
        threading.Thread(target=self._read_stdout, daemon=True, name=f"{self.name}-stdout").start()
        while not self.stop_at.wait(0.2):
            if self._eof.is_set():
                self.crashed = f"exited {self.proc.wait(10)} before it was told to stop: {tail(self.err_path)}"
                return
        self._send("stop")
        if not self._stopped.wait(FLUSH_S + 30) or self.stopped is None:
            self.crashed = f"no `stopped` line within {FLUSH_S + 30:.0f}s of `stop`: {tail(self.err_path)}"

    def _send(self, line):
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as e:
            self.errors[f"stdin: {type(e).__name__}"] = self.errors.get(f"stdin: {type(e).__name__}", 0) + 1

    def _read_stdout(self):
        try:
            for line in self.proc.stdout:
                t = round(time.monotonic() - T0, 2)
                try:
                    ev = json.loads(line)
                except ValueError:
                    self.errors["non-JSON line"] = self.errors.get("non-JSON line", 0) + 1
                    continue
                if "ack" in ev:
                    a = ev["ack"]
                    self.acks.append({"value": a["value"], "partition": int(a["partition"]),
                                      "offset": int(a["offset"]), "t": t})
                elif "failed" in ev:
                    self.failed.append({"value": ev["failed"]["value"], "error": ev["failed"]["error"], "t": t})
                elif "retry" in ev:
                    self.retries.append(dict(ev["retry"], t=t))
                elif "stopped" in ev:
                    st = self.stopped = ev["stopped"]
                    self.unknown.extend(st.get("unknown_values", []))
                    self.left_after_flush = len(st.get("unknown_values", []))
                    for k, n in (st.get("errors") or {}).items():
                        self.errors[k] = self.errors.get(k, 0) + n
                    self.fatal.extend(st.get("fatal", []))
                    self._stopped.set()
                elif "read" in ev:
                    self.read_parts.append(ev["read"])
                elif "read_done" in ev:
                    self.read_done = ev["read_done"]
                    self._read.set()
                elif "fatal" in ev:
                    self.fatal.append(ev["fatal"])
                self.sent = self.stopped["sent"] if self.stopped else len(self.acks) + len(self.failed)
        finally:
            self._eof.set()
            self._stopped.set()
            self._read.set()

    def read_back(self, timeout):
        """The client's own read of every partition, as a jepsen_checker read (None if it did not
        answer within `timeout`); the process is ended afterwards."""
        if self.proc is None:
            return None
        self._send("read")
        self._read.wait(timeout)
        self.close()
        if self.read_done is None:
            return None
        parts = {int(pr["partition"]): {"start": int(pr["start"]), "end": int(pr["end"]),
                                        "complete": bool(pr["complete"]), "records": pr["records"]}
                 for pr in self.read_parts}
        return {"reader": f"{self.idx} consumer", "partitions": parts}

    def close(self):
        """Closes its stdin (the program exits), then kills it if it did not within 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


# ---------------------------------------------------------------- faults

class Faults:
    """The fault loop. Every fault lasts DOWN_S (killed brokers are restarted after it), during
    which the metadata is watched: when a partition's ISR first shrank, and for a leader fault when
    the partition first had another leader (the clients' failover target)."""

    def __init__(self, producers):
        self.producers = producers
        self.done = []  # {"kind", "node", "partition", "at", "down_s", "failover_s", "shrink_s", ...}

    def acked(self):
        return sum(len(p.acks) for p in self.producers)

    def target(self, kind):
        """(node, partition) for a fault of `kind`, from the current metadata."""
        md = metadata()
        p = rng.randrange(NPARTS)
        if md is None or md[1] is None or p not in md[1]:
            return rng.choice(NODES), p
        parts = md[1]
        if kind == "cut-links":
            led = [q for q, (leader, _, _, _) in parts.items() if leader == PROXIED]
            return PROXIED, (rng.choice(led) if led else p)
        leader, replicas, _, _ = parts[p]
        if kind == "kill-follower":
            followers = [r for r in replicas if r != leader and r in NODES]
            return (rng.choice(followers) if followers else rng.choice(NODES)), p
        return (leader if leader in NODES else rng.choice(NODES)), p

    def watch(self, rec, seconds, isr_before):
        """Sleeps `seconds` while polling the metadata; fills rec's failover_s and shrink_s (when
        an ISR first got smaller than it was before the fault)."""
        t0 = time.monotonic()
        rec["failover_s"] = rec["shrink_s"] = None
        min_isr = RF
        while time.monotonic() - t0 < seconds:
            md = metadata(timeout=1.0)
            now = round(time.monotonic() - t0, 1)
            if md and md[1] and rec["partition"] in md[1]:
                leader, _, isr, _ = md[1][rec["partition"]]
                if rec["failover_s"] is None and leader >= 0 and leader != rec["node"]:
                    rec["failover_s"] = now
                min_isr = min([min_isr] + [len(i) for _, _, i, _ in md[1].values()])
                shrank = any(len(i) < isr_before.get(q, RF) for q, (_, _, i, _) in md[1].items())
                if rec["shrink_s"] is None and shrank:
                    rec["shrink_s"] = now
            time.sleep(max(0.0, min(0.25, seconds - (time.monotonic() - t0))))
        rec["min_isr"] = min_isr

    def run_one(self, kind, rejoin_s):
        node, p = self.target(kind)
        md = metadata()
        isr_before = {q: len(i) for q, (_, _, i, _) in md[1].items()} if md and md[1] else {}
        b = brokers[node]
        rec = {"kind": kind, "node": node, "partition": p, "at": round(time.monotonic() - T0, 1)}
        acked0 = self.acked()
        down = round(rng.uniform(*DOWN_S), 1)
        rec["down_s"] = down
        if kind in ("kill-leader", "kill-follower"):
            b.kill()
            self.watch(rec, down, isr_before)
            ok, detail = b.start()
            rec["restart"] = detail
            if not ok:
                rep.fail(f"broker {node} restarts after kill -9", detail)
        elif kind == "pause-leader":
            b.pause()
            self.watch(rec, down, isr_before)
            b.resume()
        elif kind == "cut-links":
            before = proxy.stats()
            proxy.cutting = True
            proxy.cut_all()
            self.watch(rec, down, isr_before)
            proxy.cutting = False
            after = proxy.stats()
            rec["cut_connections"] = after["cut_connections"] - before["cut_connections"]
        rec["acked_during"] = self.acked() - acked0
        t0 = time.monotonic()
        back = common.wait_until(isr_full, rejoin_s, interval=0.25)
        rec["rejoin_s"] = round(time.monotonic() - t0, 1) if back else None
        self.done.append(rec)
        what = {"kill-leader": "kill -9", "kill-follower": "kill -9", "pause-leader": "SIGSTOP",
                "cut-links": "links cut"}[kind]
        role = {"kill-leader": "leader", "pause-leader": "leader", "kill-follower": "follower",
                "cut-links": "proxied broker, partition"}[kind]
        extra = f", {rec['cut_connections']} connections cut" if kind == "cut-links" else ""
        failover = "" if not kind.endswith("leader") else (
            f"new leader after {rec['failover_s']}s" if rec["failover_s"] is not None else "no new leader")
        log(f"fault {len(self.done)}: {kind}: {what} broker {node} ({role} of p{p}) for {down}s{extra}: "
            f"{rec['acked_during']} acknowledged meanwhile; {failover + '; ' if failover else ''}"
            f"ISR {'shrank after ' + str(rec['shrink_s']) + 's' if rec['shrink_s'] is not None else 'never shrank'}"
            f" (min {rec['min_isr']}); "
            + (f"back in every ISR {rec['rejoin_s']}s after the fault ended" if back
               else f"NOT back in every ISR within {rejoin_s:.0f}s")
            + f"; {describe()}")

    def loop(self, rejoin_s):
        kinds = ["kill-leader", "pause-leader", "kill-follower"] + (["cut-links"] if PROXIED else [])
        if CLIENT:
            kinds = ["kill-leader"]
        deadline = time.monotonic() + FAULT_SECS
        last_status = time.monotonic()
        while time.monotonic() < deadline and len(self.done) < MAX_FAULTS:
            check_unexpected_exits()
            self.run_one(kinds[len(self.done) % len(kinds)], rejoin_s)
            quiet_until = time.monotonic() + rng.uniform(1.0, 3.0)
            while time.monotonic() < min(quiet_until, deadline):
                time.sleep(0.1)
            if time.monotonic() - last_status > 10:
                last_status = time.monotonic()
                log(f"progress: {sum(p.sent for p in self.producers)} sent, {self.acked()} acknowledged, "
                    f"{sum(len(p.failed) for p in self.producers)} failed, {len(self.done)} faults")


# ---------------------------------------------------------------- reads

def read_all():
    return cluster_nodes.read_all(cluster, TOPIC, NPARTS, rep, log, READ_S)



# ---------------------------------------------------------------- the test

def create_topic():
    admin = AdminClient({"bootstrap.servers": bootstrap(1), "socket.timeout.ms": 10000})
    fs = admin.create_topics([NewTopic(TOPIC, NPARTS, RF, config={"min.insync.replicas": str(MIN_ISR)})],
                             operation_timeout=20, request_timeout=30)
    fs[TOPIC].result(timeout=40)
    rep.ok(f"topic {TOPIC}: {NPARTS} partitions, RF {RF}, min.insync.replicas={MIN_ISR}")
    md = common.wait_until(lambda: (m := metadata()) and m[1] and len(m[1]) == NPARTS and m, 15)
    rep.check(bool(md), f"{TOPIC} is in the metadata with {NPARTS} partitions", describe())
    replicas_ok = bool(md) and all(len(r) == RF for _, r, _, _ in md[1].values())
    rep.check(replicas_ok, f"every partition has {RF} replicas", describe())
    t0 = time.monotonic()
    full = common.wait_until(isr_full, 15, interval=0.25)
    return rep.check(bool(full), f"the ISR of every partition reaches {RF} ({time.monotonic() - t0:.1f}s)",
                     describe())


def main():
    global proxy
    for prop in (f"replica.lag.time.max.ms={LAG_MS}",):
        if cluster.knows_property(prop):
            OPTIONAL_SETTINGS.append(prop)
        else:
            rep.skip(f"--set {prop}", "this binary does not know the property: started without it")
    log(f"seed {args.seed}; brokers {ports}, controllers {cports}"
        + (f", broker {PROXIED} advertised through the proxy on {proxy_port}" if PROXIED else "")
        + (f"; client {CLIENT}: {MAX_FAULTS} leader kills (at most {FAULT_SECS:.0f}s)" if CLIENT else
           f"; fault loop {FAULT_SECS:.0f}s" + (" (soak)" if SOAK else " (CI)")))
    if PROXIED:
        # Cutting: budget 0 closes a connection at its first byte, and every 50-100 ms all are
        # closed; off, the proxy forwards everything.
        proxy = TcpProxy(proxy_port, ("127.0.0.1", ports[PROXIED]), seed=args.seed, every_ms=(50, 100),
                         budget_bytes=(0, 0)).start()
    for b in brokers.values():
        b.spawn()
    ready = {n: b.wait_ready(30) for n, b in brokers.items()}
    if not rep.check(all(ready.values()), "3 brokers (voters + brokers) start and listen",
                     {n: tail(b.base + ".err") for n, b in brokers.items() if not ready[n]}):
        return
    formed = common.wait_until(lambda: (m := metadata()) and m[0] == NODES, 30)
    if not rep.check(bool(formed), "every broker is registered (metadata lists 1, 2, 3)", describe()):
        return
    if PROXIED:
        adv = {b.id: f"{b.host}:{b.port}" for b in AdminClient({"bootstrap.servers": bootstrap(1)})
               .list_topics(timeout=10).brokers.values()}
        rep.check(adv.get(PROXIED) == f"127.0.0.1:{proxy_port}",
                  f"broker {PROXIED} is advertised through the proxy", adv)
    check_cluster_id("at the start")
    isr_ok = create_topic()
    # When the ISR never got full the broker does not replicate (yet): shorter rejoin waits keep the
    # run within its time budget, and every fault is still reported as not rejoined.
    rejoin_s = REJOIN_S if isr_ok else 8.0

    producers = [ClientProcess(CLIENT)] if CLIENT else [ProducerThread(i) for i in range(args.producers)]
    CLIENT_PROCS.extend(p for p in producers if isinstance(p, ClientProcess))
    for p in producers:
        p.start()
    warm = common.wait_until(lambda: all(len(p.acks) >= 10 for p in producers), 30)
    rep.check(bool(warm), "every producer gets acknowledgements before the faults start",
              {p.idx: (p.sent, len(p.acks), len(p.failed), p.errors) for p in producers})
    faults = Faults(producers)
    try:
        faults.loop(rejoin_s)
    finally:
        stopped_at = round(time.monotonic() - T0, 2)
        cluster_nodes.stop_producers(producers, FLUSH_S)
    check_unexpected_exits()
    cluster_nodes.check_producers(producers, rep, log, FLUSH_S)

    # Heal: everything running, the ISR back to full, then read.
    for n, b in brokers.items():
        if b.state == "paused":
            b.resume()
        elif b.state == "down":
            b.start()
    if proxy is not None:
        proxy.cutting = False
    t0 = time.monotonic()
    healed = common.wait_until(isr_full, 30 if isr_ok else 8, interval=0.25)
    rep.check(bool(healed), f"the ISR of every partition is back to {RF} after the faults "
                            f"({time.monotonic() - t0:.1f}s)", describe())
    # librdkafka warns "a client must not be simultaneously connected to multiple clusters" if a
    # restarted broker comes back with another id.
    check_cluster_id("after the restarts")
    reads = read_all()
    for rd in reads:
        for part, pr in rd["partitions"].items():
            HIGH[int(part)] = max(HIGH.get(int(part), 0), pr["end"])
    if CLIENT:
        t0 = time.monotonic()
        own = producers[0].read_back(READ_S + 30)
        done = producers[0].read_done or {}
        complete = own is not None and all(pr["complete"] for pr in own["partitions"].values())
        got = sum(len(pr["records"]) for pr in own["partitions"].values()) if own else 0
        rep.check(complete and len(own["partitions"]) == NPARTS,
                  f"{CLIENT}'s own consumer reads every partition to its high watermark ({got} records, "
                  f"{time.monotonic() - t0:.1f}s)",
                  f"read {done or 'nothing'}; {tail(producers[0].err_path)}")
        if own is not None:
            log(f"{CLIENT} consumer: watermarks " + ", ".join(
                f"p{p} [{pr['start']}, {pr['end']})" for p, pr in sorted(own["partitions"].items())))
            reads.append(own)

    history = {"acks": [a for p in producers for a in p.acks], "failed": [f for p in producers for f in p.failed],
               "unknown": [v for p in producers for v in p.unknown], "reads": reads, "faults": faults.done}
    if CLIENT:
        history["retries"] = [r for p in producers for r in getattr(p, "retries", [])]
    path = os.path.join(args.work, f"{LABEL}-history.json")
    with open(path, "w") as f:
        json.dump(history, f)
    res = jepsen_checker.check(history)
    c = res["counts"]
    kinds = {}
    for fr in faults.done:
        kinds[fr["kind"]] = kinds.get(fr["kind"], 0) + 1
    rejoined = [fr["rejoin_s"] for fr in faults.done if fr["rejoin_s"] is not None]
    log(f"faults {len(faults.done)} {kinds}; records acknowledged {c['acknowledged']}, failed {c['failed']}, "
        f"unknown {c['unknown']}, lost {c['lost']}, duplicated {c['duplicated']}, reordered {c['reordered']}, "
        f"two-valued {c['two_valued']}, skips {c['skipped'] + c['went_back']} (skipped {c['skipped']}, went back "
        f"{c['went_back']}), unexpected {c['unexpected']}; failed but present {c['failed_but_present']}; "
        f"history {path}")
    for kind, ex in res["examples"].items():
        log(f"{kind}: e.g. {ex}")
    rep.check(len(faults.done) >= MIN_FAULTS, f"{len(faults.done)} faults injected {kinds}",
              f"fewer than {MIN_FAULTS}")
    rep.check(c["acknowledged"] >= MIN_ACKED, f"{c['acknowledged']} records acknowledged (at least {MIN_ACKED})",
              f"only {c['acknowledged']}")
    rep.check(c["reads"] >= 1 and any(r["complete"] for r in res["per_reader"].values()),
              "at least one read of the whole topic completed", res["per_reader"])
    if CLIENT == "rskafka":
        check_retry_duplicates(history, c["duplicated"])
    for kind, label in (("lost", "no acknowledged record lost"),
                        ("duplicated", "no record duplicated") if CLIENT != "rskafka" else (None, None),
                        ("reordered", "no record reordered within a producer and partition"),
                        ("two_valued", "no offset with two values"),
                        ("skipped", "no consumer skipped an offset"),
                        ("went_back", "no consumer went back"),
                        ("unexpected", "no record that nobody sent")):
        if kind is not None:
            rep.check(c[kind] == 0, f"{label} ({c[kind]})", res["examples"].get(kind, ""))
    if CLIENT:
        check_recovery(faults.done, producers[0], stopped_at)
    leader_faults = [fr for fr in faults.done if fr["kind"] in ("kill-leader", "pause-leader")]
    failovers = [fr["failover_s"] for fr in leader_faults if fr["failover_s"] is not None]
    rep.check(leader_faults and len(failovers) == len(leader_faults),
              f"a killed or paused leader's partition gets a new leader meanwhile ({len(failovers)} of "
              f"{len(leader_faults)}; {spread(failovers)})",
              f"no new leader within the fault for (kind, broker, partition, at s): "
              f"{[(fr['kind'], fr['node'], fr['partition'], fr['at']) for fr in leader_faults if fr['failover_s'] is None][:8]}")
    shrinks = [fr["shrink_s"] for fr in faults.done if fr["shrink_s"] is not None]
    log(f"ISR shrank during {len(shrinks)} of {len(faults.done)} faults ({spread(shrinks)}); acknowledged during "
        f"the faults: " + ", ".join(f"{fr['kind']} {fr['acked_during']}" for fr in faults.done[:12])
        + (" ..." if len(faults.done) > 12 else ""))
    times = spread(rejoined)
    missed = [(fr["kind"], fr["node"], fr["at"]) for fr in faults.done if fr["rejoin_s"] is None]
    rep.check(faults.done and not missed,
              f"every faulted broker rejoined the ISR ({len(rejoined)} of {len(faults.done)}; {times})",
              f"not back in every ISR within {rejoin_s:.0f}s after (kind, broker, at s): {missed[:8]}")


def check_recovery(done, client, stopped_at):
    """The client failed over by itself: after every leader kill, every partition has records
    acknowledged again before the next fault (or the stop). A partition's acknowledgements are
    counted from half a second after the kill (answers the dead leader sent before it died may
    still be arriving); `recovered` is the faulted partition's first one, and whether it came while
    the killed broker was still down (from a new leader) or only after its restart."""
    acks = sorted((a["t"], a["partition"]) for a in client.acks)
    missing, during, times = [], 0, []
    for i, fr in enumerate(done):
        start = fr["at"] + 0.5
        end = done[i + 1]["at"] if i + 1 < len(done) else stopped_at
        parts = {p for t, p in acks if start <= t < end}
        first = next((t for t, p in acks if p == fr["partition"] and t >= start), None)
        fr["recovered_s"] = round(first - fr["at"], 2) if first is not None and first < end else None
        if fr["recovered_s"] is not None:
            times.append(fr["recovered_s"])
            during += fr["recovered_s"] < fr["down_s"]
        if parts != set(range(NPARTS)):
            missing.append((fr["node"], fr["partition"], fr["at"], sorted(set(range(NPARTS)) - parts)))
        log(f"fault {i + 1}: kill -9 of broker {fr['node']} (leader of p{fr['partition']}) at {fr['at']}s: "
            f"p{fr['partition']} acknowledged again after "
            + (f"{fr['recovered_s']}s ({'while it was down' if fr['recovered_s'] < fr['down_s'] else 'after its restart'}, "
               f"down {fr['down_s']}s)" if fr["recovered_s"] is not None else "never (before the next fault)")
            + f"; {sum(1 for t, _ in acks if start <= t < end)} acknowledged until the next fault")
    rep.check(done and not missing,
              f"{CLIENT} recovers by itself after every leader kill: every partition has acknowledged records "
              f"after each of the {len(done)} kills ({during} of them while the killed leader was still down; "
              f"{spread(times)} to the faulted partition's first)",
              f"no acknowledgement before the next fault for (killed broker, partition, at s, partitions "
              f"without): {missing[:8]}; errors {client.errors}")


def check_retry_duplicates(history, counted):
    """rskafka has no idempotent producer: a write the program retried after an error whose
    outcome was unknown (the leader killed while it waited for the ISR) can be in the log twice.
    Every duplicate must be such a retried value; they are counted and reported, not hidden."""
    retried = {}
    for r in history.get("retries", []):
        retried.setdefault(r["value"], []).append(r.get("kind") or r.get("error"))
    dups = {}
    for rd in history["reads"]:
        seen = {}
        for p, pr in rd["partitions"].items():
            for o, v in pr["records"]:
                seen.setdefault(v, []).append((int(p), int(o)))
        for v, ps in seen.items():
            if len(ps) > 1:
                dups.setdefault(v, ps)
    unexplained = {v: ps for v, ps in dups.items() if v not in retried}
    kinds = {}
    for v in dups:
        for k in set(retried.get(v, [])):
            kinds[k] = kinds.get(k, 0) + 1
    log(f"rskafka: {len(history.get('retries', []))} failed attempts retried ({len(retried)} values); "
        f"{len(dups)} values in the log twice, every one a retried write: {not unexplained}; their retries' "
        f"errors {kinds}; e.g. {dict(list(dups.items())[:3])}")
    rep.check(not unexplained and len(dups) == counted,
              f"every duplicated record ({len(dups)}) is a write rskafka's program retried after an error "
              f"(expected without an idempotent producer: a retry of a write whose acknowledgement was lost)",
              f"duplicated but never retried: {dict(list(unexplained.items())[:5])} (checker counted {counted})")


def spread(xs):
    return f"median {statistics.median(xs):.1f}s, max {max(xs):.1f}s" if xs else "none"


def on_term(*_):
    raise SystemExit(143)


signal.signal(signal.SIGTERM, on_term)
CLIENT_PROCS = []
# The high watermark of each partition as the final reads saw it (for the replicas' comparison).
HIGH = {}
try:
    rep.run(rep.name, main)
finally:
    for cp in CLIENT_PROCS:
        cp.close()
    rcs = {}
    for n, b in brokers.items():
        if b.proc is not None:
            rcs[n] = b.stop()
    if proxy is not None:
        proxy.stop()
    if rcs:
        rep.check(all(rc == 0 for rc in rcs.values()), "every broker exits 0 on SIGTERM at the end", rcs)
    if HIGH and rcs and all(b.proc is None or b.proc.poll() is not None for b in brokers.values()):
        try:
            cluster_nodes.compare_replica_logs(rep, args.bin, TOPIC, HIGH, {n: cluster.data_dir(n) for n in NODES})
        except Exception as e:  # noqa: BLE001
            rep.fail("comparing the replicas' logs", f"{type(e).__name__}: {e}")
rep.finish()
