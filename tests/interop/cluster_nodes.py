"""A three-voter ringbroker cluster of real processes, for the fault tests (replication_test.py,
controller_fault_test.py): starting, killing, pausing and stopping brokers, the metadata as the
brokers serve it, the active controller as the quorum reports it, idempotent producers that
record every delivery report, and full reads of a topic for jepsen_checker.

Every node is a controller voter and a broker (process.roles=broker,controller) on 127.0.0.1
ports, with one unpinned shard and the short timeouts the caller gives; its data is
WORK/NAME-N, its logs WORK/broker-NAME-N-K.{out,err} (K counts its starts), so run.sh's panic
check sees them. Every wait here is bounded.
"""

import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
import traceback

import common

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient


def distinct_ports(n):
    for _ in range(20):
        ports = [common.free_port() for _ in range(n)]
        if len(set(ports)) == n:
            return ports
    raise RuntimeError("no distinct free ports")


tail = common.tail


class Broker:
    """One ringbroker process: state is `up`, `down` (killed or stopped) or `paused` (SIGSTOP)."""

    def __init__(self, cluster, n):
        self.cluster = cluster
        self.n = n
        self.proc = None
        self.starts = 0
        self.state = "down"
        self.base = None

    def spawn(self):
        c = self.cluster
        self.starts += 1
        data = c.data_dir(self.n)
        os.makedirs(data, exist_ok=True)
        adv = c.advertised.get(self.n, f"127.0.0.1:{c.ports[self.n]}")
        settings = [
            f"node.id={self.n}",
            "process.roles=broker,controller",
            f"controller.quorum.voters={c.voters}",
            f"controller.quorum.election.timeout.ms={c.election_ms}",
            f"broker.heartbeat.interval.ms={c.heartbeat_ms}",
            f"broker.session.timeout.ms={c.session_ms}",
            f"listeners=PLAINTEXT://127.0.0.1:{c.ports[self.n]},CONTROLLER://127.0.0.1:{c.cports[self.n]}",
            f"advertised.listeners=PLAINTEXT://{adv}",
            "ringbroker.pin.shards=false",
            "ringbroker.metrics.listen=none",
        ] + c.optional_settings
        cmd = [c.bin, "serve", "--data-dir", data, "--shards", "1"]
        for s in settings:
            cmd += ["--set", s]
        self.base = os.path.join(c.work, f"broker-{c.name}-{self.n}-{self.starts}")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info,openraft=warn"))
        with open(self.base + ".out", "w") as out, open(self.base + ".err", "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        self.state = "up"

    def wait_ready(self, timeout=20.0):
        """True once the broker printed `listening on` and accepts connections; False if it
        exited or the time ran out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with open(self.base + ".out") as f:
                    listening = "listening on" in f.read()
            except OSError:
                listening = False
            if listening:
                try:
                    socket.create_connection(("127.0.0.1", self.cluster.ports[self.n]), timeout=1).close()
                    return True
                except OSError:
                    pass
            time.sleep(0.05)
        return False

    def start(self, rebind_s=30.0):
        """Spawns and waits until ready; while a killed predecessor's ports are still held
        ("in use") retries for up to `rebind_s`. Returns (ok, detail)."""
        t0 = time.monotonic()
        io0 = common.io_stall_ms()
        while True:
            self.spawn()
            if self.wait_ready():
                return True, f"ready in {time.monotonic() - t0:.1f}s"
            err = tail(self.base + ".err")
            if self.proc.poll() is None:
                return False, f"not listening after 20 s{common.io_stall_since(io0)}: {err}"
            self.state = "down"
            if "in use" not in err or time.monotonic() - t0 > rebind_s:
                return False, f"exited {self.proc.returncode}: {err}"
            time.sleep(0.3)

    def kill(self):
        if self.state == "paused":
            self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait(10)
        self.state = "down"

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.state = "paused"

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)
        self.state = "up"

    def stop(self, timeout=20):
        """SIGTERM (SIGCONT first if paused); the exit code, or None if it had to be killed."""
        if self.proc is None or self.proc.poll() is not None:
            self.state = "down"
            return self.proc.returncode if self.proc else None
        if self.state == "paused":
            self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            rc = None
        self.state = "down"
        return rc


class Cluster:
    """The nodes' ports and settings, their Broker processes, and what they serve."""

    def __init__(self, bin, work, name, nodes, heartbeat_ms, session_ms, election_ms, logger,
                 extra_ports=0, seed=1):
        self.bin, self.work, self.name, self.nodes = bin, work, name, list(nodes)
        self.heartbeat_ms, self.session_ms, self.election_ms = heartbeat_ms, session_ms, election_ms
        self.logger = logger  # librdkafka's log lines go here, not into the test's output
        ps = distinct_ports(2 * len(self.nodes) + extra_ports)
        self.ports = {n: ps[i] for i, n in enumerate(self.nodes)}
        self.cports = {n: ps[len(self.nodes) + i] for i, n in enumerate(self.nodes)}
        self.extra_ports = ps[2 * len(self.nodes):]
        self.voters = ",".join(f"{n}@127.0.0.1:{self.cports[n]}" for n in self.nodes)
        self.advertised = {}  # node -> host:port it advertises instead of its listener (a proxy)
        self.optional_settings = []
        self.brokers = {n: Broker(self, n) for n in self.nodes}
        self._spread_rng = random.Random(seed + 1)  # which broker answers a metadata request

    def data_dir(self, n):
        return os.path.join(self.work, f"{self.name}-{n}")

    def bootstrap(self, n):
        return f"127.0.0.1:{self.ports[n]}"

    def client_address(self, n):
        """The address clients reach broker n at (its advertised one)."""
        return self.advertised.get(n, self.bootstrap(n))

    def all_bootstrap(self):
        return ",".join(self.client_address(n) for n in self.nodes)

    def knows_property(self, prop):
        """Whether this binary accepts `--set prop`: `serve` checks its --set properties in order
        and exits on the first bad one before binding anything (run.sh's probe)."""
        probe = os.path.join(self.work, f"{self.name}-probe")
        os.makedirs(probe, exist_ok=True)
        try:
            out = subprocess.run([self.bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", probe, "--set", prop,
                                  "--set", "probe-end"], capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return False
        return "probe-end" in out.stdout + out.stderr

    def start_all(self, timeout=30):
        """Spawns every node; {node: ready}."""
        for b in self.brokers.values():
            b.spawn()
        return {n: b.wait_ready(timeout) for n, b in self.brokers.items()}

    def stop_all(self):
        """SIGTERM to every started node (SIGCONT first if paused); {node: exit code}."""
        return {n: b.stop() for n, b in self.brokers.items() if b.proc is not None}

    def heal(self):
        """Resumes paused nodes and restarts killed ones; {node: (ok, detail)} of the restarts."""
        out = {}
        for n, b in self.brokers.items():
            if b.state == "paused":
                b.resume()
            elif b.state == "down":
                out[n] = b.start()
        return out

    def healthy(self):
        """Nodes that can answer now (not killed, not paused), in a random order."""
        ns = [n for n in self.nodes if self.brokers[n].state == "up" and self.brokers[n].proc.poll() is None]
        self._spread_rng.shuffle(ns)
        return ns

    def admin(self, n, **conf):
        return AdminClient(dict({"bootstrap.servers": self.bootstrap(n), "socket.timeout.ms": 3000, "log_level": 3,
                                 "log.connection.close": False, "logger": self.logger}, **conf))

    def metadata(self, topic, timeout=3.0, via=None):
        """(brokers, {partition: (leader, replicas, isr, error code)}) from the first healthy broker
        that answers (or from `via`), direct, not through a proxy; None if none answered; the
        partitions are None when the topic is not (yet) in that broker's metadata."""
        for n in ([via] if via is not None else self.healthy()):
            try:
                # All topics: a Metadata request naming the topic would auto-create it (librdkafka's
                # admin client is a producer handle, allow.auto.create.topics defaults to true there).
                md = self.admin(n).list_topics(timeout=timeout)
            except Exception:  # noqa: BLE001 - try the next broker
                continue
            t = md.topics.get(topic)
            if t is None or t.error is not None:
                return sorted(md.brokers), None
            parts = {p: (m.leader, list(m.replicas), sorted(m.isrs), m.error.code() if m.error else 0)
                     for p, m in t.partitions.items()}
            return sorted(md.brokers), parts
        return None

    def isr_full(self, topic, nparts, rf):
        """Every node live, every partition of `topic` led and with an ISR of `rf`."""
        md = self.metadata(topic)
        if md is None or md[1] is None or len(md[1]) != nparts:
            return False
        live, parts = md
        return live == self.nodes and all(len(isr) == rf and leader >= 0 for leader, _, isr, _ in parts.values())

    def describe(self, topic):
        md = self.metadata(topic)
        if md is None:
            return "no metadata"
        live, parts = md
        if parts is None:
            return f"brokers {live}, no topic {topic}"
        return f"brokers {live}; " + "; ".join(f"p{p} leader {l} isr {isr}" + (f" err {e}" if e else "")
                                               for p, (l, _, isr, e) in sorted(parts.items()))

    def cluster_ids(self):
        """{broker: the ClusterId its Metadata response carries}, asked of each healthy broker."""
        out = {}
        for n in sorted(self.healthy()):
            try:
                out[n] = self.admin(n, **{"socket.timeout.ms": 10000}).list_topics(timeout=5).cluster_id
            except Exception as e:  # noqa: BLE001
                out[n] = f"error: {e}"
        return out

    def unexpected_exits(self):
        """Nodes that exited although the test did not stop them (marked down): [(node, detail)]."""
        out = []
        for n, b in self.brokers.items():
            if b.state != "down" and b.proc.poll() is not None:
                out.append((n, f"exited {b.proc.returncode} on its own: {tail(b.base + '.err')}"))
                b.state = "down"
        return out

    def quorum_status(self, n, timeout_s=2):
        """`ringbroker cluster status` asked of node n's CONTROLLER listener (it asks the leader
        too when n is not the leader): the report as JSON, or None."""
        try:
            out = subprocess.run([self.bin, "cluster", "status", "--controller", f"127.0.0.1:{self.cports[n]}",
                                  "--format", "json", "--timeout", str(timeout_s)],
                                 capture_output=True, text=True, timeout=3 * timeout_s + 5)
        except subprocess.TimeoutExpired:
            return None
        if out.returncode != 0:
            return None
        try:
            return json.loads(out.stdout)
        except ValueError:
            return None

    def active_controller(self):
        """The Raft leader of the metadata quorum, as the leader itself reports it (a report
        answered by node L saying leader L), with its term; (None, None) when no healthy node's
        report is answered by the leader (an election, a lost quorum)."""
        for n in sorted(self.healthy()):
            s = self.quorum_status(n)
            if s and s.get("leader") is not None and s.get("node_id") == s.get("leader"):
                return s["leader"], s.get("term")
        return None, None


def delivery_recorder(producer, pending):
    """An on_delivery callback: each report goes to producer.acks or producer.failed (as
    jepsen_checker takes them) and its value leaves `pending`."""

    def on_delivery(err, msg):
        v = msg.value().decode()
        pending.discard(v)
        if err is None:
            producer.acks.append({"value": v, "partition": msg.partition(), "offset": msg.offset()})
        else:
            producer.failed.append({"value": v, "error": err.name()})

    return on_delivery


def stop_producers(producers, flush_s):
    """Tells every ProducerThread to stop and waits (bounded) for each to flush and end."""
    for p in producers:
        p.stop_at.set()
    for p in producers:
        p.join(flush_s + 15)


def check_producers(producers, rep, log, flush_s):
    """After stop_producers: each stopped cleanly and flushed everything; a summary line each."""
    for p in producers:
        rep.check(not p.is_alive() and p.crashed is None, f"producer {p.idx} stopped cleanly",
                  "still running after its flush bound" if p.is_alive() else p.crashed)
        rep.check(p.left_after_flush == 0, f"producer {p.idx} flushed every record",
                  f"{p.left_after_flush} still queued after {flush_s:.0f}s")
        log(f"producer {p.idx}: {p.sent} sent, {len(p.acks)} acknowledged, {len(p.failed)} failed "
            f"({sorted({f['error'] for f in p.failed})[:5]}), {len(p.unknown)} unknown; client errors {p.errors}; "
            f"fatal {p.fatal[:3]}")


class ProducerThread(threading.Thread):
    """An idempotent acks=all confluent-kafka producer in a thread: produces `<name>-<seq>` to
    `topic` at `rate` records/s, keyed over 32 keys, until told to stop, and records every
    delivery report. After a fatal error it goes on with a new client (`<prefix><idx>r<gen>`,
    so a new producer id); what the old one had not reported is `unknown`."""

    def __init__(self, idx, topic, rate, bootstrap, logger, log, flush_s, prefix="p", message_timeout_ms=30000):
        super().__init__(daemon=True, name=f"producer-{prefix}{idx}")
        self.idx = idx
        self.topic, self.rate, self.bootstrap, self.logger, self.log = topic, rate, bootstrap, logger, log
        self.flush_s, self.prefix, self.message_timeout_ms = flush_s, prefix, message_timeout_ms
        self.stop_at = threading.Event()
        self.acks, self.failed, self.unknown = [], [], []
        self.errors = {}  # non-fatal client errors by name (information)
        self.fatal = []
        self.left_after_flush = 0
        self.sent = 0
        self.crashed = None

    def conf(self):
        return {
            "bootstrap.servers": self.bootstrap,
            "client.id": f"jepsen-{self.prefix}{self.idx}",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": self.message_timeout_ms,
            "request.timeout.ms": 5000,
            "socket.timeout.ms": 10000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 5000,
            "log.connection.close": False,
            "logger": self.logger,
            "debug": "eos",  # producer ids and epochs, into the clients' log file
            "error_cb": self.on_error,
        }

    def on_error(self, err):
        name = err.name()
        self.errors[name] = self.errors.get(name, 0) + 1
        if err.fatal():
            self.fatal.append(f"error_cb: {err}")

    def run(self):
        try:
            self._run()
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            self.crashed = f"{type(e).__name__}: {e} :: {traceback.format_exc(limit=3)}"

    def _run(self):
        gen = 0
        while not self.stop_at.is_set():
            name = f"{self.prefix}{self.idx}" if gen == 0 else f"{self.prefix}{self.idx}r{gen}"
            pending = set()

            on_delivery = delivery_recorder(self, pending)
            p = Producer(self.conf())
            nfatal = len(self.fatal)
            seq = 0
            next_t = time.monotonic()
            # A fatal error (error_cb, or KafkaException from produce/poll/flush) ends this client:
            # what it has not reported is `unknown`, and a new client (a new producer id) goes on.
            try:
                while not self.stop_at.is_set() and len(self.fatal) == nfatal:
                    now = time.monotonic()
                    if now < next_t:
                        p.poll(min(next_t - now, 0.05))
                        continue
                    next_t = max(next_t + 1.0 / self.rate, now - 1.0)  # no catch-up burst after a stall
                    v = f"{name}-{seq:06d}"
                    try:
                        p.produce(self.topic, key=f"k{seq % 32}".encode(), value=v.encode(), on_delivery=on_delivery)
                    except BufferError:
                        p.poll(0.1)
                        continue
                    pending.add(v)
                    seq += 1
                    self.sent += 1
                    p.poll(0)
            except KafkaException as e:
                self.fatal.append(f"{name}: {e}")
            try:
                left = p.flush(self.flush_s if len(self.fatal) == nfatal else 10)
            except KafkaException as e:
                if len(self.fatal) == nfatal:
                    self.fatal.append(f"{name}: {e}")
                left = len(pending)
            self.left_after_flush += left if len(self.fatal) == nfatal else 0
            self.unknown.extend(sorted(pending))
            if len(self.fatal) != nfatal:
                self.log(f"producer {name}: fatal error after {seq} records ({len(pending)} unreported): "
                         f"{self.fatal[-1]}; going on with a new client")
            gen += 1


def read_confluent(via, topic, parts, logger, read_s):
    """One read of every partition of `topic`, low to high watermark, via bootstrap `via`
    (assign, no group): ({partition: {start, end, complete, records [[offset, value]]}}, errors)."""
    c = Consumer({"bootstrap.servers": via, "group.id": "jepsen-read", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
                  "fetch.wait.max.ms": 100, "socket.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 2000,
                  "allow.auto.create.topics": False, "log.connection.close": False, "logger": logger})
    out = {p: {"start": 0, "end": 0, "complete": False, "records": []} for p in parts}
    errors = []
    try:
        for p in parts:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            out[p]["start"], out[p]["end"] = lo, hi
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        nxt = {p: out[p]["start"] for p in parts}
        deadline = time.monotonic() + read_s
        while any(nxt[p] < out[p]["end"] for p in parts) and time.monotonic() < deadline:
            for m in c.consume(1000, 0.3):
                if m.error():
                    errors.append(m.error().name())
                    continue
                out[m.partition()]["records"].append([m.offset(), m.value().decode()])
                nxt[m.partition()] = max(nxt[m.partition()], m.offset() + 1)
        for p in parts:
            out[p]["complete"] = nxt[p] >= out[p]["end"]
    finally:
        c.close()
    return out, errors


def read_kafka_python(bootstrap, topic, parts, read_s):
    """read_confluent's read with a kafka-python consumer."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KpTp

    c = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", request_timeout_ms=20000, fetch_max_wait_ms=100,
                      client_id="jepsen-read-kp")
    out = {p: {"start": 0, "end": 0, "complete": False, "records": []} for p in parts}
    try:
        tps = [KpTp(topic, p) for p in parts]
        c.assign(tps)
        lows = c.beginning_offsets(tps, timeout_ms=10000)
        highs = c.end_offsets(tps, timeout_ms=10000)
        for tp in tps:
            out[tp.partition]["start"], out[tp.partition]["end"] = lows[tp], highs[tp]
        c.seek_to_beginning(*tps)
        nxt = {p: out[p]["start"] for p in parts}
        deadline = time.monotonic() + read_s
        while any(nxt[p] < out[p]["end"] for p in parts) and time.monotonic() < deadline:
            for tp, records in c.poll(timeout_ms=500, max_records=2000).items():
                for r in records:
                    out[tp.partition]["records"].append([r.offset, r.value.decode()])
                    nxt[tp.partition] = max(nxt[tp.partition], r.offset + 1)
        for p in parts:
            out[p]["complete"] = nxt[p] >= out[p]["end"]
    finally:
        c.close()
    return out, []


def read_all(cluster, topic, nparts, rep, log, read_s):
    """Every partition of `topic` read by a confluent-kafka consumer bootstrapped at each node in
    turn (at its advertised address) and by a kafka-python one; a PASS/FAIL line per read. The
    reads, as jepsen_checker takes them."""
    reads = []
    parts = list(range(nparts))
    readers = [(f"confluent-kafka via broker {n}",
                lambda n=n: read_confluent(cluster.client_address(n), topic, parts, cluster.logger, read_s))
               for n in cluster.nodes]
    readers.append(("kafka-python", lambda: read_kafka_python(cluster.all_bootstrap(), topic, parts, read_s)))
    for name, fn in readers:
        t0 = time.monotonic()
        try:
            out, errors = fn()
        except Exception as e:  # noqa: BLE001
            rep.fail(f"{topic}: read by {name}", f"{type(e).__name__}: {e}")
            continue
        got = sum(len(pr["records"]) for pr in out.values())
        short = {p: (pr["records"][-1][0] + 1 if pr["records"] else pr["start"], pr["end"])
                 for p, pr in out.items() if not pr["complete"]}
        rep.check(not short, f"{name} reads every partition of {topic} to its high watermark ({got} records, "
                             f"{time.monotonic() - t0:.1f}s)",
                  f"stopped short (next, high) {short} within {read_s:.0f}s; errors {sorted(set(errors))[:5]}")
        if errors:
            log(f"{name}: consumer errors {sorted(set(errors))[:5]} ({len(errors)} in all)")
        log(f"{name}: watermarks " + ", ".join(f"p{p} [{pr['start']}, {pr['end']})" for p, pr in out.items()))
        reads.append({"reader": name, "partitions": out})
    return reads


def replica_batches(bin, data_dir, topic, p):
    """(base offset, last offset, CRC, producer id) of every batch in partition p's replica under
    `data_dir`, read with `ringbroker log dump --batches` from a stopped broker's data directory;
    None if it could not be read."""
    import re

    d = os.path.join(data_dir, f"{topic}-{p}")
    if not os.path.isdir(d):
        return None
    out = subprocess.run([bin, "log", "dump", "--batches", d], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return None
    batches = []
    for line in out.stdout.splitlines():
        m = re.match(r"\s+position \d+ base_offset (\d+) last_offset (\d+) .* producer_id (-?\d+) crc (\d+)$", line)
        if m:
            batches.append((int(m[1]), int(m[2]), int(m[4]), int(m[3])))
    return batches


def compare_replica_logs(rep, bin, topic, high, data_dirs):
    """After the last stop: every replica (`data_dirs`: {broker: its data directory}) holds the
    same batches (offsets and CRC) below the partition's high watermark (`high`: {partition: HW}),
    with no gap from its first offset. A replica that was elected without an acknowledged batch, or
    kept one the others truncated, shows here even when the consumers read back every record."""
    problems = []
    for p, hw in sorted(high.items()):
        views = {}
        for n, data in sorted(data_dirs.items()):
            batches = replica_batches(bin, data, topic, p)
            if batches is None:
                problems.append(f"p{p}: broker {n}'s replica cannot be read")
                continue
            below = sorted(b for b in batches if b[0] < hw)
            if hw > 0 and not below:
                problems.append(f"p{p}: no batch below the HW {hw} read from broker {n}'s replica")
            gaps = [(a[1], b[0]) for a, b in zip(below, below[1:]) if b[0] != a[1] + 1]
            if gaps or (below and below[-1][1] + 1 < hw):
                problems.append(f"p{p}: broker {n}'s replica has gaps below the HW {hw}: "
                                f"{gaps[:3]} ends {below[-1][1] if below else None}")
            views[n] = below
        distinct = {tuple(v) for v in views.values()}
        if len(distinct) > 1:
            first = {n: next((b for b in v if any(b not in w for w in views.values())), None)
                     for n, v in views.items()}
            problems.append(f"p{p}: replicas differ below the HW {hw}; first differing batch "
                            f"(base, last, crc, producer id) per broker {first}")
    rep.check(not problems, f"the replicas of all {len(high)} partitions hold the same batches "
                            f"(offsets and CRCs) below the high watermark, without gaps",
              "; ".join(problems[:5]))
