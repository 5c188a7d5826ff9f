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
