"""Helpers shared by the interop scripts: PASS/FAIL reporting, a raw ApiVersions probe (so a
script can tell which APIs the broker advertises without trusting a client library's guess),
bounded waits, and the state file that carries expectations across a broker restart.

Every check prints one line, `PASS <script>: <what>`, `FAIL <script>: <what>: <detail>`,
`SKIP <script>: <what>: <why>` or `KNOWN-FAIL <script>: <what>: <why>` (a feature the broker does
not have yet); tests/interop/run.sh counts PASS and FAIL lines.
"""

import json
import os
import socket
import struct
import sys
import threading
import time
import traceback

# Kafka API keys used by the scripts.
API_PRODUCE = 0
API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3
API_CREATE_TOPICS = 19
API_DELETE_TOPICS = 20
API_DELETE_RECORDS = 21
API_INIT_PRODUCER_ID = 22
API_DESCRIBE_CONFIGS = 32
API_ALTER_CONFIGS = 33
API_CREATE_PARTITIONS = 37
API_INCREMENTAL_ALTER_CONFIGS = 44
API_DESCRIBE_CLUSTER = 60
# Consumer groups (groups_confluent.py, groups_kafka_python.py).
API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10
API_JOIN_GROUP = 11
API_HEARTBEAT = 12
API_LEAVE_GROUP = 13
API_SYNC_GROUP = 14
API_DESCRIBE_GROUPS = 15
API_LIST_GROUPS = 16
API_DELETE_GROUPS = 42
API_OFFSET_DELETE = 47
GROUP_APIS = {
    API_OFFSET_COMMIT: "OffsetCommit",
    API_OFFSET_FETCH: "OffsetFetch",
    API_FIND_COORDINATOR: "FindCoordinator",
    API_JOIN_GROUP: "JoinGroup",
    API_HEARTBEAT: "Heartbeat",
    API_LEAVE_GROUP: "LeaveGroup",
    API_SYNC_GROUP: "SyncGroup",
    API_DESCRIBE_GROUPS: "DescribeGroups",
    API_LIST_GROUPS: "ListGroups",
    API_DELETE_GROUPS: "DeleteGroups",
    API_OFFSET_DELETE: "OffsetDelete",
}

API_NAMES = {
    API_DELETE_TOPICS: "DeleteTopics",
    API_DELETE_RECORDS: "DeleteRecords",
    API_INIT_PRODUCER_ID: "InitProducerId",
    API_DESCRIBE_CONFIGS: "DescribeConfigs",
    API_ALTER_CONFIGS: "AlterConfigs",
    API_CREATE_PARTITIONS: "CreatePartitions",
    API_INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    API_DESCRIBE_CLUSTER: "DescribeCluster",
}


class Reporter:
    """Prints one line per check and remembers the counts."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.known = 0

    def ok(self, what):
        self.passed += 1
        print(f"PASS {self.name}: {what}", flush=True)

    def fail(self, what, detail=""):
        self.failed += 1
        detail = str(detail).replace("\n", " | ")
        if len(detail) > 600:
            detail = detail[:600] + "..."
        print(f"FAIL {self.name}: {what}: {detail}", flush=True)

    def skip(self, what, why):
        self.skipped += 1
        print(f"SKIP {self.name}: {what}: {why}", flush=True)

    def known_failure(self, what, why):
        """A check that cannot pass because the broker lacks a feature (not a bug)."""
        self.known += 1
        print(f"KNOWN-FAIL {self.name}: {what}: {why}", flush=True)

    def check(self, cond, what, detail=""):
        if cond:
            self.ok(what)
        else:
            self.fail(what, detail)
        return cond

    def equal(self, got, want, what):
        return self.check(got == want, what, f"got {short(got)}, want {short(want)}")

    def run(self, what, fn, *args, **kwargs):
        """Runs fn; an exception is a FAIL of `what` (fn reports its own PASS lines)."""
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - any client error is a failed check
            tb = traceback.format_exc(limit=4)
            self.fail(what, f"{type(e).__name__}: {e} :: {tb}")
            return None

    def finish(self):
        print(
            f"== {self.name} done: pass={self.passed} fail={self.failed} "
            f"skip={self.skipped} known-fail={self.known}",
            flush=True,
        )
        sys.exit(1 if self.failed else 0)


def short(v, limit=300):
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + "..."


def parse_bootstrap(bootstrap):
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return buf


def api_versions(bootstrap, timeout=10.0):
    """Sends ApiVersions v0 over a raw socket; returns {api_key: (min, max)}."""
    host, port = parse_bootstrap(bootstrap)
    client_id = b"interop-probe"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        resp = _recv_exact(s, size)
    corr, err, n = struct.unpack(">ihi", resp[:10])
    if corr != 1 or err != 0:
        raise RuntimeError(f"ApiVersions: correlation {corr}, error {err}")
    out = {}
    for i in range(n):
        k, lo, hi = struct.unpack(">hhh", resp[10 + 6 * i : 16 + 6 * i])
        out[k] = (lo, hi)
    return out


def raw_request(bootstrap, api_key, version, body, timeout=10.0, correlation=7):
    """Sends one request (header v1, a non-flexible version) to exactly this broker over a raw
    socket and returns the response body after the correlation id. Client libraries pick the
    broker themselves (librdkafka's admin client sends CreateTopics to the node Metadata names
    controller); this does not."""
    host, port = parse_bootstrap(bootstrap)
    client_id = b"interop-raw"
    req = struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(req)) + req)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        resp = _recv_exact(s, size)
    (corr,) = struct.unpack(">i", resp[:4])
    if corr != correlation:
        raise RuntimeError(f"correlation {corr}, sent {correlation}")
    return resp[4:]


def _str(v):
    b = v.encode()
    return struct.pack(">h", len(b)) + b


ERROR_NAMES = {0: "NONE", 7: "REQUEST_TIMED_OUT", 36: "TOPIC_ALREADY_EXISTS", 37: "INVALID_PARTITIONS",
               38: "INVALID_REPLICATION_FACTOR", 41: "NOT_CONTROLLER", 40: "INVALID_CONFIG"}


def create_topics_raw(bootstrap, specs, timeout_ms=25000, timeout=35.0):
    """CreateTopics v4 with `specs` [(name, partitions, RF, {config: value})] sent to this broker
    itself; {name: (error name, message)} (NONE when created)."""
    body = struct.pack(">i", len(specs))
    for name, nparts, rf, config in specs:
        body += _str(name) + struct.pack(">ihi", nparts, rf, 0) + struct.pack(">i", len(config))
        for k, v in config.items():
            body += _str(k) + _str(v)
    body += struct.pack(">i?", timeout_ms, False)
    resp = raw_request(bootstrap, API_CREATE_TOPICS, 4, body, timeout)
    pos = 4  # throttle_time_ms
    (n,) = struct.unpack(">i", resp[pos:pos + 4])
    pos += 4
    out = {}
    for _ in range(n):
        (ln,) = struct.unpack(">h", resp[pos:pos + 2])
        name = resp[pos + 2:pos + 2 + ln].decode()
        pos += 2 + ln
        code, mlen = struct.unpack(">hh", resp[pos:pos + 4])
        pos += 4
        msg = None
        if mlen >= 0:
            msg = resp[pos:pos + mlen].decode(errors="replace")
            pos += mlen
        out[name] = (ERROR_NAMES.get(code, f"error {code}"), msg)
    return out


def missing_apis(versions, keys):
    """`Name (key)` for each of `keys` (a {key: name} dict) that ApiVersions did not list."""
    return [f"{name} ({k})" for k, name in sorted(keys.items()) if k not in versions]


def tail(path, n=3):
    """The last n lines of a file (a broker's log), joined with ` | `; empty if unreadable."""
    try:
        with open(path) as f:
            return " | ".join(f.read().splitlines()[-n:])
    except OSError:
        return ""


def io_stall_ms():
    """Milliseconds some task on this machine has waited for I/O since boot (the `some` total of
    /proc/pressure/io), or None where the kernel does not report it. The difference over a span
    tells a broker that was slow because the machine's disk stalled (other jobs) from one that was
    slow by itself."""
    try:
        with open("/proc/pressure/io") as f:
            for line in f:
                if line.startswith("some "):
                    return int(line.split("total=", 1)[1]) // 1000
    except (OSError, ValueError, IndexError):
        return None
    return None


def io_stall_since(before):
    """` (the machine's I/O stalled N ms meanwhile)` since io_stall_ms() gave `before`, or ``."""
    now = io_stall_ms()
    return "" if before is None or now is None else f" (the machine's I/O stalled {now - before} ms meanwhile)"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(fn, timeout, interval=0.1):
    """Calls fn until it returns a truthy value or `timeout` seconds pass; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def value_for(prefix, i, size=0):
    """A record value that encodes its sequence number, padded (compressibly) to `size` bytes."""
    v = f"{prefix}-{i:06d}"
    if len(v) < size:
        v += ";" + ("abcdefgh" * ((size // 8) + 1))[: size - len(v) - 1]
    return v


def seq_of(value):
    """The sequence number value_for encoded, or None."""
    try:
        return int(value.split(";", 1)[0].rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return None


def check_partitioned(rep, what, records, expected_values, nparts):
    """records: [(partition, offset, key, value)] as consumed from a topic written by one
    producer in order `expected_values`. Checks content, per-partition order, offsets dense from
    the first one, and that each key went to a single partition."""
    got_values = sorted(r[3] for r in records)
    ok = rep.check(
        got_values == sorted(expected_values),
        f"{what}: all {len(expected_values)} records read back intact",
        f"got {len(got_values)} records; missing {short(sorted(set(expected_values) - set(got_values))[:5])}, "
        f"unexpected {short(sorted(set(got_values) - set(expected_values))[:5])}",
    )
    by_part = {}
    for p, o, k, v in records:
        by_part.setdefault(p, []).append((o, k, v))
    order_ok = True
    detail = ""
    for p, rows in by_part.items():
        rows.sort()
        offs = [o for o, _, _ in rows]
        if offs != list(range(offs[0], offs[0] + len(offs))):
            order_ok = False
            detail = f"partition {p}: offsets not dense: {short(offs[:20])}"
        seqs = [seq_of(v) for _, _, v in rows]
        if seqs != sorted(seqs):
            order_ok = False
            detail = f"partition {p}: production order broken: {short(seqs[:20])}"
    rep.check(order_ok, f"{what}: per-partition order matches production order", detail)
    key_parts = {}
    for p, _, k, _ in records:
        key_parts.setdefault(k, set()).add(p)
    spread = {k: sorted(ps) for k, ps in key_parts.items() if len(ps) > 1}
    rep.check(not spread, f"{what}: each key in exactly one partition", f"keys spread: {short(spread)}")
    used = set(by_part)
    rep.check(
        used.issubset(set(range(nparts))) and len(used) >= min(2, nparts),
        f"{what}: keys spread over {len(used)} of {nparts} partitions",
        f"partitions used: {sorted(used)}",
    )
    return ok


class State:
    """A JSON file of expectations written before the restart and checked after it."""

    def __init__(self, path):
        self.path = path
        self.data = {}
        if os.path.exists(path):
            with open(path) as f:
                self.data = json.load(f)

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=True)
        os.replace(tmp, self.path)


def parse_args(argv):
    """--bootstrap HOST:PORT --phase before|after --state FILE"""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--phase", choices=["before", "after"], required=True)
    ap.add_argument("--state", required=True, help="JSON file carrying expectations across the restart")
    ap.add_argument("--run-id", default=str(int(time.time())), help="suffix for topic names")
    return ap.parse_args(argv)


# ---------------------------------------------------------------- real-process clusters
# Shared by replication_test.py and partition_test.py: each starts its own three brokers, produces
# with idempotent acks=all confluent-kafka producers, reads every partition back for
# jepsen_checker and compares the replicas' logs after the last stop.


def client_logger(work, label):
    """A logger for librdkafka's own lines (connection refused while a broker is down, ...):
    into WORK/LABEL-clients.log, not into the test's output."""
    import logging

    os.makedirs(work, exist_ok=True)
    lg = logging.getLogger(f"{label}.rdkafka")
    lg.propagate = False
    lg.setLevel(logging.DEBUG)
    handler = logging.FileHandler(os.path.join(work, f"{label}-clients.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    lg.addHandler(handler)
    return lg


def spread(xs):
    import statistics

    return f"median {statistics.median(xs):.1f}s, max {max(xs):.1f}s" if xs else "none"


def knows_property(binary, probe_dir, prop):
    """Whether this binary accepts `--set prop`: `serve` checks its --set properties in order and
    exits on the first bad one before binding anything (run.sh's probe)."""
    import subprocess

    os.makedirs(probe_dir, exist_ok=True)
    try:
        out = subprocess.run([binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", probe_dir, "--set", prop,
                              "--set", "probe-end"], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return "probe-end" in out.stdout + out.stderr


class ProcessBroker:
    """One ringbroker process (`serve`, 1 shard, data WORK/NAME-N, logs
    WORK/broker-NAME-N-K.{out,err} so run.sh's panic check sees them): state is `up`, `down`
    (killed or stopped) or `paused` (SIGSTOP). `settings()` gives its --set list at each start;
    `addr` is the (host, port) its client listener is reached at; `prefix` goes before the command
    (`ip netns exec NS`, which execs it: the process is the broker itself)."""

    def __init__(self, n, binary, work, name, settings, addr, prefix=()):
        self.n = n
        self.binary = binary
        self.work = work
        self.name = name
        self.settings = settings
        self.addr = addr
        self.prefix = list(prefix)
        self.proc = None
        self.starts = 0
        self.state = "down"
        self.base = None
        self.data = os.path.join(work, f"{name}-{n}")

    def spawn(self):
        import subprocess

        self.starts += 1
        os.makedirs(self.data, exist_ok=True)
        cmd = self.prefix + [self.binary, "serve", "--data-dir", self.data, "--shards", "1"]
        for s in self.settings():
            cmd += ["--set", s]
        self.base = os.path.join(self.work, f"broker-{self.name}-{self.n}-{self.starts}")
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
                    socket.create_connection(self.addr, timeout=1).close()
                    return True
                except OSError:
                    pass
            time.sleep(0.05)
        return False

    def start(self, rebind_s=30.0):
        """Spawns and waits until ready; while a killed predecessor's ports are still held
        ("in use") retries for up to `rebind_s`. Returns (ok, detail)."""
        t0 = time.monotonic()
        while True:
            self.spawn()
            if self.wait_ready():
                return True, f"ready in {time.monotonic() - t0:.1f}s"
            err = tail(self.base + ".err")
            if self.proc.poll() is None:
                return False, f"not listening after 20 s: {err}"
            self.state = "down"
            if "in use" not in err or time.monotonic() - t0 > rebind_s:
                return False, f"exited {self.proc.returncode}: {err}"
            time.sleep(0.3)

    def kill(self):
        import signal

        if self.state == "paused":
            self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait(10)
        self.state = "down"

    def pause(self):
        import signal

        self.proc.send_signal(signal.SIGSTOP)
        self.state = "paused"

    def resume(self):
        import signal

        self.proc.send_signal(signal.SIGCONT)
        self.state = "up"

    def stop(self, timeout=20):
        """SIGTERM (SIGCONT first if paused); the exit code, or None if it had to be killed."""
        import signal
        import subprocess

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


def topic_metadata(bootstrap, topic, logger, timeout=3.0):
    """(sorted broker ids, {partition: (leader, replicas, sorted isr, error code)} or None when
    the topic is not there) as the broker at `bootstrap` answers with a fresh client (so it is
    that broker's view); raises when it does not answer."""
    from confluent_kafka.admin import AdminClient

    # All topics: a Metadata request naming the topic would auto-create it (librdkafka's admin
    # client is a producer handle, allow.auto.create.topics defaults to true there).
    md = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000, "log_level": 3,
                      "log.connection.close": False, "logger": logger}).list_topics(timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return sorted(md.brokers), None
    return sorted(md.brokers), {p: (m.leader, list(m.replicas), sorted(m.isrs), m.error.code() if m.error else 0)
                                for p, m in t.partitions.items()}


class ProducerThread(threading.Thread):
    """Produces `p<idx>-<seq>` (`p<idx>r<gen>-<seq>` after a fatal error made it start over with a
    new client) to `topic` at `rate` records/s, keyed over 32 keys, with an idempotent acks=all
    confluent-kafka producer (`conf`: bootstrap and logger at least) until told to stop; records
    every delivery report (an ack with `t`, seconds since `t0` when the report arrived)."""

    def __init__(self, idx, conf, topic, rate, flush_s, log, t0):
        super().__init__(daemon=True, name=f"producer-{idx}")
        self.idx = idx
        self.base_conf = conf
        self.topic = topic
        self.rate = rate
        self.flush_s = flush_s
        self.log = log
        self.t0 = t0
        self.stop_at = threading.Event()
        self.acks, self.failed, self.unknown = [], [], []
        self.errors = {}  # non-fatal client errors by name (information)
        self.fatal = []
        self.left_after_flush = 0
        self.sent = 0
        self.crashed = None

    def conf(self):
        return dict({
            "client.id": f"jepsen-p{self.idx}",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 30000,
            "request.timeout.ms": 5000,
            "socket.timeout.ms": 10000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 5000,
            "log.connection.close": False,
            "debug": "eos",  # producer ids and epochs, into the clients' log file
            "error_cb": self.on_error,
        }, **self.base_conf)

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
        from confluent_kafka import KafkaException, Producer

        gen = 0
        while not self.stop_at.is_set():
            name = f"p{self.idx}" if gen == 0 else f"p{self.idx}r{gen}"
            pending = set()

            def on_delivery(err, msg, pending=pending):
                v = msg.value().decode()
                pending.discard(v)
                if err is None:
                    self.acks.append({"value": v, "partition": msg.partition(), "offset": msg.offset(),
                                      "t": round(time.monotonic() - self.t0, 3)})
                else:
                    self.failed.append({"value": v, "error": err.name()})

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


def read_confluent(via, topic, parts, read_s, logger):
    """One read of every partition, low to high watermark, by a confluent-kafka consumer
    (assign, no group) bootstrapped at `via`: ({partition: a jepsen_checker read}, errors)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

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


def read_kafka_python(bootstraps, topic, parts, read_s):
    """The same read by a kafka-python consumer (`bootstraps`: a list of host:port)."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KpTp

    c = KafkaConsumer(bootstrap_servers=bootstraps, group_id=None, enable_auto_commit=False,
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


def read_all(rep, log, topic, nparts, vias, read_s, logger):
    """Every partition read by a confluent-kafka consumer bootstrapped at each of `vias`
    ({broker: host:port}) in turn and by a kafka-python one: the jepsen_checker reads."""
    reads = []
    parts = list(range(nparts))
    readers = [(f"confluent-kafka via broker {n}", lambda via=via: read_confluent(via, topic, parts, read_s, logger))
               for n, via in sorted(vias.items())]
    readers.append(("kafka-python", lambda: read_kafka_python(list(vias.values()), topic, parts, read_s)))
    for name, fn in readers:
        t0 = time.monotonic()
        try:
            out, errors = fn()
        except Exception as e:  # noqa: BLE001
            rep.fail(f"read by {name}", f"{type(e).__name__}: {e}")
            continue
        got = sum(len(pr["records"]) for pr in out.values())
        short_at = {p: (pr["records"][-1][0] + 1 if pr["records"] else pr["start"], pr["end"])
                    for p, pr in out.items() if not pr["complete"]}
        rep.check(not short_at, f"{name} reads every partition to its high watermark ({got} records, "
                                f"{time.monotonic() - t0:.1f}s)",
                  f"stopped short (next, high) {short_at} within {read_s:.0f}s; errors {sorted(set(errors))[:5]}")
        if errors:
            log(f"{name}: consumer errors {sorted(set(errors))[:5]} ({len(errors)} in all)")
        log(f"{name}: watermarks " + ", ".join(f"p{p} [{pr['start']}, {pr['end']})" for p, pr in out.items()))
        reads.append({"reader": name, "partitions": out})
    return reads


def stop_producers(rep, log, producers, flush_s):
    """Tells every producer to stop, joins it (bounded by its flush), checks it stopped cleanly
    with nothing left queued and logs what it did."""
    for p in producers:
        p.stop_at.set()
    for p in producers:
        p.join(flush_s + 15)
    for p in producers:
        rep.check(not p.is_alive() and p.crashed is None, f"producer {p.idx} stopped cleanly",
                  "still running after its flush bound" if p.is_alive() else p.crashed)
        rep.check(p.left_after_flush == 0, f"producer {p.idx} flushed every record",
                  f"{p.left_after_flush} still queued after {flush_s:.0f}s")
        log(f"producer {p.idx}: {p.sent} sent, {len(p.acks)} acknowledged, {len(p.failed)} failed "
            f"({sorted({f['error'] for f in p.failed})[:5]}), {len(p.unknown)} unknown; client errors {p.errors}; "
            f"fatal {p.fatal[:3]}")


def check_history(rep, log, history, path, min_acked, allowed=()):
    """Writes the history to `path` (`jepsen_checker.py PATH` checks it again), runs
    jepsen_checker over it and checks: enough acknowledged, a complete read, and every anomaly 0
    but those in `allowed` (counted and reported by the caller). Returns the checker's result."""
    import jepsen_checker

    with open(path, "w") as f:
        json.dump(history, f)
    res = jepsen_checker.check(history)
    c = res["counts"]
    log(f"records acknowledged {c['acknowledged']}, failed {c['failed']}, unknown {c['unknown']}, lost {c['lost']}, "
        f"duplicated {c['duplicated']}, reordered {c['reordered']}, two-valued {c['two_valued']}, skips "
        f"{c['skipped'] + c['went_back']} (skipped {c['skipped']}, went back {c['went_back']}), unexpected "
        f"{c['unexpected']}; failed but present {c['failed_but_present']}; history {path}")
    for kind, ex in res["examples"].items():
        log(f"{kind}: e.g. {ex}")
    rep.check(c["acknowledged"] >= min_acked, f"{c['acknowledged']} records acknowledged (at least {min_acked})",
              f"only {c['acknowledged']}")
    rep.check(c["reads"] >= 1 and any(r["complete"] for r in res["per_reader"].values()),
              "at least one read of the whole topic completed", res["per_reader"])
    for kind, label in (("lost", "no acknowledged record lost"), ("duplicated", "no record duplicated"),
                        ("reordered", "no record reordered within a producer and partition"),
                        ("two_valued", "no offset with two values"), ("skipped", "no consumer skipped an offset"),
                        ("went_back", "no consumer went back"), ("unexpected", "no record that nobody sent")):
        if kind not in allowed:
            rep.check(c[kind] == 0, f"{label} ({c[kind]})", res["examples"].get(kind, ""))
    return res


def _cli(argv):
    """Helpers for kcat.sh:
    common.py create-topics BOOTSTRAP NAME:PARTITIONS...   (CreateTopics through confluent-kafka)
    common.py partitioned [WHAT EXPECTED_FILE CONSUMED_FILE NPARTS]...
        EXPECTED_FILE: `key:value` lines in production order; CONSUMED_FILE: `%p %o %k %s` lines.
    Prints PASS/FAIL lines; exits 1 on any FAIL."""
    rep = Reporter("kcat")
    if argv[:1] == ["create-topics"]:
        from confluent_kafka.admin import AdminClient, NewTopic

        a = AdminClient({"bootstrap.servers": argv[1]})
        new = [NewTopic(n, num_partitions=int(p), replication_factor=1) for n, p in (s.rsplit(":", 1) for s in argv[2:])]
        errs = {}
        for t, f in a.create_topics(new, request_timeout=15).items():
            try:
                f.result(timeout=20)
            except Exception as e:  # noqa: BLE001
                errs[t] = str(e)
        rep.check(not errs, f"create {len(new)} topics ({', '.join(argv[2:4])}...)", short(errs))
    elif argv[:1] == ["partitioned"]:
        rest = argv[1:]
        while rest:
            what, expected_file, consumed_file, nparts = rest[0], rest[1], rest[2], int(rest[3])
            rest = rest[4:]
            with open(expected_file) as f:
                expected = [line.rstrip("\n").split(":", 1)[1] for line in f if line.strip()]
            records = []
            with open(consumed_file) as f:
                for line in f:
                    if line.strip():
                        p, o, k, v = line.rstrip("\n").split(" ", 3)
                        records.append((int(p), int(o), k, v))
            check_partitioned(rep, what, records, expected, nparts)
    else:
        print(_cli.__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(1 if rep.failed else 0)


if __name__ == "__main__":
    _cli(sys.argv[1:])
