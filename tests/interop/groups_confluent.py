#!/usr/bin/env python3
"""Consumer groups with confluent-kafka (librdkafka) against ringbroker.

    groups_confluent.py --bootstrap 127.0.0.1:PORT --phase before --state DIR/gcf.json [--session-timeout-ms 6000]
    (restart the broker on the same data dir)
    groups_confluent.py --bootstrap 127.0.0.1:PORT --phase after --state DIR/gcf.json

`before`:
  - a 6-partition topic with 3000 numbered records (record i -> partition i % 6);
  - rebalance group (G1): 3 consumer PROCESSES (this script's `worker` mode) subscribe with
    enable.auto.commit=false and commit synchronously after every record. Each writes what it
    does (assign/revoke/lost, every record, every commit) to a JSON-lines file. A cap file lets
    the controller keep work in reserve (workers pause a partition at the cap), so each step
    happens while records remain. Checks: the 6 partitions assigned disjointly over the 3
    members (on_assign and DescribeGroups agree); A leaves cleanly (SIGTERM -> close()) and its
    partitions move to B and C; B is SIGKILLed and after the session timeout C owns all 6;
    every record consumed; the only records consumed twice are ones B had consumed but not
    committed when it was killed (computed exactly from B's log);
  - restart group (G2): one consumer takes target_p = 40 + 30*p records of partition p and
    commits exactly those offsets with metadata; committed() and list_consumer_group_offsets
    agree; list/describe while active (Stable, 1 member, 6 partitions); delete_consumer_groups
    on it fails with NON_EMPTY_GROUP; after close it is Empty;
  - delete group (G3): commit, close, delete works; the group and its offsets are gone; deleting
    an unknown group -> GROUP_ID_NOT_FOUND.
`after` (broker restarted): G1 and G2 are listed (Empty) with their committed offsets, G3 stays
deleted; a new G2 consumer resumes exactly at target_p on every partition (first offsets, and
committed() before it commits) and reads to the end; after it commits, the offsets are the ends;
G1 can be deleted once empty.

Group APIs missing from ApiVersions -> one FAIL line per check group (no client hangs).
INTEROP_FORCE_GROUPS=1 runs the clients anyway (every wait is bounded).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import Reporter, State  # noqa: E402

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

NPARTS = 6
NREC = 3000
T = 15.0
NO_CAP = 1 << 40


def consumer_conf(bootstrap, group, session_ms, client_id):
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": max(100, session_ms // 6),
        "max.poll.interval.ms": max(session_ms, 60000),
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
        "socket.timeout.ms": 10000,
        "partition.assignment.strategy": "range",
    }


# ---------------------------------------------------------------- worker process (group G1)

def worker(argv):
    ap = argparse.ArgumentParser()
    for a in ("--bootstrap", "--group", "--topic", "--out", "--cap", "--name"):
        ap.add_argument(a, required=True)
    ap.add_argument("--session-timeout-ms", type=int, required=True)
    ap.add_argument("--delay-ms", type=float, default=5)
    ap.add_argument("--assign-all", action="store_true",
                    help="self-test of the cap/pause logic without a group: assign() every partition, no commits")
    a = ap.parse_args(argv)
    out = open(a.out, "a", buffering=1)

    def emit(**kw):
        kw["t"] = round(time.monotonic(), 3)
        out.write(json.dumps(kw) + "\n")

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    parent = os.getppid()
    c = Consumer(consumer_conf(a.bootstrap, a.group, a.session_timeout_ms, a.name))
    held = {}  # partition -> the first record at or past the cap, paused there

    def on_assign(cons, parts):
        held.clear()
        emit(ev="assign", parts=sorted(p.partition for p in parts), member=cons.memberid())
        # Assign here (not after the callback) so the resume below applies to the new assignment:
        # nothing paused at the cap in an earlier generation stays paused.
        cons.assign(parts)
        if parts:
            cons.resume(parts)

    def on_revoke(cons, parts):
        held.clear()
        emit(ev="revoke", parts=sorted(p.partition for p in parts))

    def on_lost(cons, parts):
        held.clear()
        emit(ev="lost", parts=sorted(p.partition for p in parts))

    def cap():
        try:
            with open(a.cap) as f:
                return int(f.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def process(m):
        emit(ev="msg", p=m.partition(), o=m.offset(), v=m.value().decode())
        if a.delay_ms and cap() < NO_CAP:  # slow while the controller holds work back
            time.sleep(a.delay_ms / 1000)
        if a.assign_all:
            return
        try:
            c.commit(message=m, asynchronous=False)
            emit(ev="commit", p=m.partition(), o=m.offset() + 1)
        except KafkaException as e:
            emit(ev="commit-error", p=m.partition(), o=m.offset() + 1, e=str(e))

    if a.assign_all:
        n = len(c.list_topics(a.topic, timeout=15).topics[a.topic].partitions)
        on_assign(c, [TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in range(n)])
    else:
        c.subscribe([a.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    emit(ev="start")
    while not stop and os.getppid() == parent:
        limit = cap()
        for p, m in list(held.items()):
            if m.offset() < limit:
                del held[p]
                process(m)
                tp = TopicPartition(a.topic, p, m.offset() + 1)
                c.resume([TopicPartition(a.topic, p)])
                try:
                    c.seek(tp)
                except KafkaException as e:
                    emit(ev="seek-error", p=p, e=str(e))
        m = c.poll(0.1)
        if m is None:
            continue
        if m.error():
            emit(ev="error", e=str(m.error()))
            continue
        if m.partition() in held:
            continue  # fetched before the pause took effect; the seek on resume re-reads it
        if m.offset() >= limit:
            held[m.partition()] = m
            c.pause([TopicPartition(a.topic, m.partition())])
            continue
        process(m)
    emit(ev="closing")
    c.close()
    emit(ev="closed")


# ---------------------------------------------------------------- helpers for the controller

def read_events(path):
    evs = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    evs.append(json.loads(line))
                except ValueError:
                    break  # a line being written
    except OSError:
        pass
    return evs


def assignment_of(evs):
    """(current partitions, index of the event that set them) from a worker's events."""
    cur, at = set(), -1
    for i, e in enumerate(evs):
        if e["ev"] == "assign":
            cur, at = set(e["parts"]), i
        elif e["ev"] in ("revoke", "lost", "closing"):
            cur, at = set(), i
    return cur, at


def kerr(exc):
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def wait_for(fn, timeout, interval=0.1):
    return common.wait_until(fn, timeout, interval)


class Ctl:
    """The controller's view of the G1 workers."""

    def __init__(self, workdir, bootstrap, group, topic, session_ms):
        self.dir = workdir
        self.bootstrap, self.group, self.topic, self.session_ms = bootstrap, group, topic, session_ms
        self.cap_file = os.path.join(workdir, "cap")
        self.procs = {}
        self.set_cap(0)

    def set_cap(self, v):
        tmp = self.cap_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(v))
        os.replace(tmp, self.cap_file)

    def out(self, name):
        return os.path.join(self.dir, f"{name}.jsonl")

    def start(self, name):
        log = open(os.path.join(self.dir, f"{name}.log"), "w")
        self.procs[name] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "worker", "--bootstrap", self.bootstrap, "--group", self.group,
             "--topic", self.topic, "--out", self.out(name), "--cap", self.cap_file, "--name", name,
             "--session-timeout-ms", str(self.session_ms)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def events(self, name):
        return read_events(self.out(name))

    def assignment(self, name):
        return assignment_of(self.events(name))

    def msgs(self, name, since=0):
        return [e for e in self.events(name)[since:] if e["ev"] == "msg"]

    def kill_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(5)


# ---------------------------------------------------------------- the script

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--phase", choices=["before", "after"], required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--run-id", default=str(int(time.time())))
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    global args, rep, state, B
    args = ap.parse_args()
    rep = Reporter("groups_confluent")
    state = State(args.state)
    B = args.bootstrap

    try:
        versions = common.api_versions(B)
    except Exception as e:  # noqa: BLE001
        rep.fail("ApiVersions probe", f"{type(e).__name__}: {e}")
        rep.finish()
    needed = {k: v for k, v in common.GROUP_APIS.items() if k != common.API_OFFSET_DELETE}  # not used here
    missing = common.missing_apis(versions, needed)
    force = bool(os.environ.get("INTEROP_FORCE_GROUPS"))
    checks = BEFORE_CHECKS if args.phase == "before" else AFTER_CHECKS
    if missing and not force:
        for what in checks:
            rep.fail(what, f"group APIs not in ApiVersions: {', '.join(missing)}")
        if args.phase == "before":
            state.data = {"missing": missing}
            state.save()
        rep.finish()
    if missing:
        print(f"== groups_confluent: INTEROP_FORCE_GROUPS: running without {', '.join(missing)}", flush=True)
    elif not coordinator_ready():
        for what in checks:
            rep.fail(what, "skipped: the group coordinator did not answer (see the preflight FAIL)")
        rep.finish()
    if args.phase == "before":
        rep.run("before", before)
    else:
        rep.run("after", after)
    rep.finish()


BEFORE_CHECKS = [
    "rebalance (3 consumer processes): assignment, clean leave, SIGKILL, exactly-allowed duplicates",
    "restart group: partial consumption committed with metadata, describe/list while active, NON_EMPTY_GROUP",
    "delete group: works once empty, GROUP_ID_NOT_FOUND for an unknown group",
]
AFTER_CHECKS = [
    "after restart: groups listed with their committed offsets, deleted group stays deleted",
    "after restart: a new consumer resumes exactly at the committed offsets",
    "after restart: delete a group once empty",
]


def admin():
    return AdminClient({"bootstrap.servers": B, "socket.timeout.ms": 10000})


def preflight(argv):
    """`preflight BOOTSTRAP SECONDS`: FindCoordinator + OffsetFetch for an unknown group through
    list_consumer_group_offsets, retried while it fails; prints `ok` or the last error."""
    global B
    B, timeout = argv[0], float(argv[1])
    a = admin()
    last = "no answer"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            group_offsets(a, "interop-preflight-group", "none")
            print("ok", flush=True)
            return
        except Exception as e:  # noqa: BLE001
            last = f"{type(e).__name__}: {e}"
            time.sleep(0.5)
    print(last, flush=True)


def coordinator_ready(timeout=30):
    """Preflight, in a child process (a client crash on a malformed answer becomes a FAIL line,
    not a dead script): the group coordinator must answer, so a broken coordinator costs one
    bounded wait instead of one per check."""
    what = "preflight: the group coordinator answers OffsetFetch for a new group (list_consumer_group_offsets)"
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "preflight", B, str(timeout)],
                           capture_output=True, text=True, timeout=timeout + 20)
    except subprocess.TimeoutExpired:
        return rep.check(False, what, f"the probe hung for {timeout + 20}s")
    out = [line for line in r.stdout.splitlines() if line.strip()]
    if r.returncode < 0:
        return rep.check(False, what, f"confluent-kafka crashed ({signal.Signals(-r.returncode).name}) on the broker's "
                                      f"answer; last lines of its log: {r.stderr.splitlines()[-2:]}")
    return rep.check(out[-1:] == ["ok"], what, f"not within {timeout}s: {out[-1:] or r.stderr[-300:]}")


def group_offsets(a, group, topic):
    """{partition: (offset, metadata)} from list_consumer_group_offsets (offset < 0: none)."""
    fs = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=T)
    r = fs[group].result(timeout=T)
    return {tp.partition: (tp.offset, tp.metadata) for tp in r.topic_partitions if tp.topic == topic and tp.offset >= 0}


def listed_groups(a):
    r = a.list_consumer_groups(request_timeout=T).result(timeout=T)
    if r.errors:
        raise RuntimeError(f"list_consumer_groups errors: {r.errors}")
    return {g.group_id: g.state for g in r.valid}


def describe(a, group):
    return a.describe_consumer_groups([group], request_timeout=T)[group].result(timeout=T)


def member_parts(m, topic):
    return sorted(tp.partition for tp in m.assignment.topic_partitions if tp.topic == topic)


def wait_described(a, group, state_, nmembers, timeout=20):
    """Polls describe_consumer_groups until the group is in `state_` with `nmembers` members;
    returns the last description (or the exception text)."""
    last = [None]

    def probe():
        try:
            d = describe(a, group)
        except Exception as e:  # noqa: BLE001
            last[0] = f"{type(e).__name__}: {e}"
            return None
        last[0] = d
        return d if d.state == state_ and len(d.members) == nmembers else None

    return wait_for(probe, timeout, 0.3) or last[0]


def fmt_desc(d):
    if not hasattr(d, "state"):
        return str(d)
    return f"state {d.state}, members {[(m.client_id, member_parts(m, state.data.get('topic', ''))) for m in d.members]}"


# ---------------------------------------------------------------- before

def before():
    prefix = f"gcf{args.run_id}"
    topic = f"{prefix}-t6"
    state.data = {"topic": topic, "g1": f"{prefix}-rebalance", "g2": f"{prefix}-restart", "g3": f"{prefix}-delete"}
    a = admin()

    for f in a.create_topics([NewTopic(topic, num_partitions=NPARTS, replication_factor=1)], request_timeout=T).values():
        f.result(timeout=T)
    wait_for(lambda: topic in a.list_topics(timeout=T).topics, 10)
    p = Producer({"bootstrap.servers": B, "acks": "all", "linger.ms": 5, "enable.idempotence": False,
                  "message.timeout.ms": 30000})
    errors = []
    for i in range(NREC):
        p.produce(topic, key=f"k{i % 60}", value=common.value_for("g", i), partition=i % NPARTS,
                  on_delivery=lambda err, msg: err and errors.append(str(err)))
        p.poll(0)
    left = p.flush(30)
    rep.check(left == 0 and not errors, f"setup: {NREC} records produced to {topic} ({NPARTS} partitions)",
              f"{left} left, errors {errors[:3]}")
    state.save()

    rep.run(BEFORE_CHECKS[0], rebalance, a, topic, state.data["g1"])
    rep.run(BEFORE_CHECKS[1], restart_group, a, topic, state.data["g2"])
    rep.run(BEFORE_CHECKS[2], delete_group, a, topic, state.data["g3"])
    state.save()


def rebalance(a, topic, group):
    s_ms = args.session_timeout_ms
    wdir = os.path.join(os.path.dirname(os.path.abspath(args.state)), "groups_confluent-workers")
    os.makedirs(wdir, exist_ok=True)
    for f in os.listdir(wdir):
        os.remove(os.path.join(wdir, f))
    ctl = Ctl(wdir, B, group, topic, s_ms)
    per_part = NREC // NPARTS
    try:
        _rebalance(a, ctl, topic, group, per_part)
    finally:
        ctl.kill_all()


def _rebalance(a, ctl, topic, group, per_part):
    names = ["A", "B", "C"]
    ctl.set_cap(100)
    for n in names:
        ctl.start(n)

    # 1. three members, all six partitions, disjoint
    def spread(members):
        asg = {n: ctl.assignment(n)[0] for n in members}
        allp = [p for s in asg.values() for p in s]
        ok = all(asg.values()) and sorted(allp) == list(range(NPARTS))
        return asg if ok else None

    asg = wait_for(lambda: spread(names), 60, 0.2)
    if not rep.check(asg, "3 consumers: all 6 partitions assigned, disjoint, every member has some (on_assign)",
                     f"after 60 s: { {n: sorted(ctl.assignment(n)[0]) for n in names} }; worker logs in {ctl.dir}"):
        return
    d = wait_described(a, group, ConsumerGroupState.STABLE, 3)
    if rep.check(hasattr(d, "state"), "describe_consumer_groups: Stable with 3 members", fmt_desc(d)):
        by_client = {m.client_id: set(member_parts(m, topic)) for m in d.members}
        rep.equal(by_client, {n: asg[n] for n in names}, "describe_consumer_groups: member assignments = on_assign callbacks")
        rep.check(all(m.member_id for m in d.members) and len({m.member_id for m in d.members}) == 3,
                  "describe_consumer_groups: distinct member ids", fmt_desc(d))
    lg = listed_groups(a)
    rep.check(lg.get(group) == ConsumerGroupState.STABLE, "list_consumer_groups: the group is listed as Stable",
              f"{group}: {lg.get(group)} (listed: {sorted(lg)[:10]})")

    # 2. A leaves cleanly while consuming
    rep.check(wait_for(lambda: len(ctl.msgs("A")) >= 20, 30), "A consumed records before leaving",
              f"{len(ctl.msgs('A'))} records")
    a_parts = set(asg["A"])
    ctl.procs["A"].send_signal(signal.SIGTERM)
    try:
        rc = ctl.procs["A"].wait(30)
    except subprocess.TimeoutExpired:
        rc = None
    ev_a = ctl.events("A")
    rep.check(rc == 0 and ev_a and ev_a[-1]["ev"] == "closed", "A: close() returned and the process exited 0",
              f"exit {rc}, last events {ev_a[-3:]}")
    mark = {n: len(ctl.events(n)) for n in ("B", "C")}

    def moved():
        asg2 = {}
        for n in ("B", "C"):
            cur, at = ctl.assignment(n)
            if at < mark[n]:
                return None  # no new assignment since A left
            asg2[n] = cur
        allp = [p for s in asg2.values() for p in s]
        return asg2 if all(asg2.values()) and sorted(allp) == list(range(NPARTS)) else None

    asg2 = wait_for(moved, 60, 0.2)
    if not rep.check(asg2, f"A left cleanly: its partitions {sorted(a_parts)} moved to B and C (all 6, disjoint)",
                     f"after 60 s: { {n: ctl.assignment(n) for n in ('B', 'C')} }"):
        return
    d = wait_described(a, group, ConsumerGroupState.STABLE, 2)
    rep.check(hasattr(d, "state") and {m.client_id for m in d.members} == {"B", "C"},
              "describe_consumer_groups after the clean leave: Stable, members B and C", fmt_desc(d))

    # 3. B is killed while consuming
    ctl.set_cap(250)
    b_mark = len(ctl.events("B"))
    rep.check(wait_for(lambda: len(ctl.msgs("B", b_mark)) >= 20, 30), "B consumed records after the clean rebalance",
              f"{len(ctl.msgs('B', b_mark))} records")
    b_parts = set(asg2["B"])
    ctl.procs["B"].kill()
    ctl.procs["B"].wait(10)
    killed_at = time.monotonic()
    c_mark = len(ctl.events("C"))

    def c_owns_all():
        cur, at = ctl.assignment("C")
        return at >= c_mark and cur == set(range(NPARTS))

    took = wait_for(c_owns_all, args.session_timeout_ms / 1000 + 60, 0.2)
    rep.check(took, f"B SIGKILLed: after the session timeout its partitions {sorted(b_parts)} moved to C (C owns all 6)",
              f"C: {ctl.assignment('C')} {time.monotonic() - killed_at:.1f}s after the kill")
    if took:
        print(f"== groups_confluent: C took over B's partitions {time.monotonic() - killed_at:.1f}s after the kill "
              f"(session.timeout.ms={args.session_timeout_ms})", flush=True)

    # 4. everything consumed
    ctl.set_cap(NO_CAP)
    want = {common.value_for("g", i) for i in range(NREC)}

    def consumed_values():
        return {e["v"] for n in names for e in ctl.msgs(n)}

    def all_committed():
        try:
            offs = group_offsets(a, group, topic)
        except Exception:  # noqa: BLE001
            return None
        return offs if all(offs.get(p, (-1,))[0] == per_part for p in range(NPARTS)) else None

    wait_for(lambda: consumed_values() >= want, 60, 0.3)
    wait_for(all_committed, 20, 0.5)
    ctl.procs["C"].send_signal(signal.SIGTERM)
    try:
        rc_c = ctl.procs["C"].wait(30)
    except subprocess.TimeoutExpired:
        rc_c = None
    rep.check(rc_c == 0, "C: close() and exit 0 at the end", f"exit {rc_c}")

    # 5. analysis over the three logs
    evs = {n: ctl.events(n) for n in names}
    got = {}
    for n in names:
        for e in evs[n]:
            if e["ev"] == "msg":
                got.setdefault((e["p"], e["o"]), []).append((n, e["v"]))
    values = {v for recs in got.values() for _, v in recs}
    missing = sorted(want - values)
    rep.check(not missing, f"every one of the {NREC} records consumed by the group", f"{len(missing)} missing: {missing[:5]}")
    wrong = [(po, recs) for po, recs in got.items() if any(v != common.value_for("g", po[1] * NPARTS + po[0]) for _, v in recs)]
    rep.check(not wrong, "each record at its expected partition/offset", f"{wrong[:3]}")

    # Records B consumed but had not committed when it was killed: for each partition, B's
    # records at or past its last logged commit (a commit that reached the broker but was not
    # logged only makes the allowance larger than needed, never hides a real duplicate).
    last_commit = {}
    for e in evs["B"]:
        if e["ev"] == "commit":
            last_commit[e["p"]] = max(last_commit.get(e["p"], 0), e["o"])
    allowed = {(e["p"], e["o"]) for e in evs["B"] if e["ev"] == "msg" and e["o"] >= last_commit.get(e["p"], 0)}
    commit_errors = [(n, e) for n in names for e in evs[n] if e["ev"] == "commit-error"]
    rep.check(not commit_errors, "every synchronous commit succeeded", f"{commit_errors[:3]}")
    allowed |= {(e["p"], e["o"] - 1) for _, e in commit_errors}
    dups = {po: recs for po, recs in got.items() if len(recs) > 1}
    bad = {po: recs for po, recs in dups.items() if po not in allowed or len(recs) > 2}
    rep.check(not bad, f"no record consumed twice except ones B consumed but had not committed when killed "
                       f"({len(dups)} such duplicates seen, {len(allowed)} allowed: {sorted(allowed)})",
              f"unexpected duplicates (partition, offset) -> consumers: { {po: [n for n, _ in r] for po, r in list(bad.items())[:5]} }")
    a_recs = {(e["p"], e["o"]) for e in evs["A"] if e["ev"] == "msg"}
    again = sorted(po for po in a_recs if len(got[po]) > 1)
    rep.check(not again, f"clean leave: none of A's {len(a_recs)} records was consumed again", f"{again[:5]}")
    # Each consumer read each of its partitions in offset order within one assignment.
    order_bad = []
    for n in names:
        seen = {}
        for e in evs[n]:
            if e["ev"] in ("assign", "revoke", "lost"):
                seen = {}
            elif e["ev"] == "msg":
                if e["p"] in seen and e["o"] != seen[e["p"]] + 1:
                    order_bad.append((n, e["p"], seen[e["p"]], e["o"]))
                seen[e["p"]] = e["o"]
    rep.check(not order_bad, "within an assignment, each consumer read each partition contiguously in offset order",
              f"(consumer, partition, previous, next): {order_bad[:5]}")
    errs = [(n, e["e"]) for n in names for e in evs[n] if e["ev"] in ("error", "seek-error")]
    rep.check(not errs, "no consumer errors", f"{errs[:3]}")

    offs = all_committed()
    rep.check(offs, f"list_consumer_group_offsets: all {NPARTS} partitions committed at their end ({per_part})",
              f"{group_offsets(a, group, topic)}")
    d = wait_described(a, group, ConsumerGroupState.EMPTY, 0)
    rep.check(hasattr(d, "state"), "describe_consumer_groups after every member left: Empty, no members", fmt_desc(d))
    state.data["g1_offsets"] = {str(p): per_part for p in range(NPARTS)}


def restart_group(a, topic, group):
    targets = {p: 40 + 30 * p for p in range(NPARTS)}
    c = Consumer(consumer_conf(B, group, args.session_timeout_ms, "restart-before"))
    assigned = []
    c.subscribe([topic], on_assign=lambda cons, parts: assigned.append(sorted(p.partition for p in parts)))
    try:
        taken = {p: [] for p in range(NPARTS)}
        deadline = time.monotonic() + 60
        while any(len(taken[p]) < targets[p] for p in taken) and time.monotonic() < deadline:
            for m in c.consume(200, 0.2):
                if m.error():
                    continue
                p = m.partition()
                if len(taken[p]) < targets[p]:
                    taken[p].append(m.offset())
        rep.check(assigned and assigned[-1] == list(range(NPARTS)), "restart group: one consumer assigned all 6 partitions",
                  f"assignments {assigned}")
        rep.check(all(taken[p] == list(range(targets[p])) for p in taken),
                  "restart group: first records of each partition consumed from offset 0 in order",
                  f"{ {p: (len(v), v[:3]) for p, v in taken.items()} }")
        offsets = [TopicPartition(topic, p, targets[p], f"gcf-meta-{p}") for p in range(NPARTS)]
        res = c.commit(offsets=offsets, asynchronous=False)
        rep.check(all(tp.error is None for tp in res), "restart group: synchronous commit of the consumed offsets",
                  f"{[(tp.partition, tp.error) for tp in res if tp.error]}")
        com = c.committed([TopicPartition(topic, p) for p in range(NPARTS)], timeout=T)
        rep.equal({tp.partition: (tp.offset, tp.metadata) for tp in com},
                  {p: (targets[p], f"gcf-meta-{p}") for p in range(NPARTS)},
                  "restart group: Consumer.committed() returns the offsets and metadata")
        d = wait_described(a, group, ConsumerGroupState.STABLE, 1)
        if rep.check(hasattr(d, "state"), "restart group: describe_consumer_groups while active: Stable, 1 member", fmt_desc(d)):
            m = d.members[0]
            rep.equal((m.client_id, member_parts(m, topic)), ("restart-before", list(range(NPARTS))),
                      "restart group: the member's client id and assignment (6 partitions)")
            rep.check(m.member_id == c.memberid(), "restart group: described member id = Consumer.memberid()",
                      f"{m.member_id} vs {c.memberid()}")
            rep.check(d.partition_assignor == "range", "restart group: assignor reported (range)", d.partition_assignor)
        lg = listed_groups(a)
        rep.check(lg.get(group) == ConsumerGroupState.STABLE, "restart group: list_consumer_groups shows it Stable",
                  f"{lg.get(group)}")
        try:
            a.delete_consumer_groups([group], request_timeout=T)[group].result(timeout=T)
            rep.fail("delete_consumer_groups on a group with a member fails with NON_EMPTY_GROUP", "deleted")
        except KafkaException as e:
            rep.check(kerr(e) is not None and kerr(e).code() == KafkaError.NON_EMPTY_GROUP,
                      "delete_consumer_groups on a group with a member fails with NON_EMPTY_GROUP", str(e))
    finally:
        c.close()
    d = wait_described(a, group, ConsumerGroupState.EMPTY, 0)
    rep.check(hasattr(d, "state"), "restart group: Empty after close()", fmt_desc(d))
    offs = group_offsets(a, group, topic)
    rep.equal(offs, {p: (targets[p], f"gcf-meta-{p}") for p in range(NPARTS)},
              "restart group: list_consumer_group_offsets = committed offsets and metadata")
    state.data["g2_offsets"] = {str(p): targets[p] for p in range(NPARTS)}


def delete_group(a, topic, group):
    c = Consumer(consumer_conf(B, group, args.session_timeout_ms, "delete-me"))
    try:
        c.subscribe([topic])
        got = None
        deadline = time.monotonic() + 60
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got = m
        rep.check(got is not None, "delete group: consumer got a record", "nothing within 60 s")
        if got is None:
            return
        c.commit(message=got, asynchronous=False)
    finally:
        c.close()
    rep.check(group_offsets(a, group, topic), "delete group: offset committed", "no offsets")
    a.delete_consumer_groups([group], request_timeout=T)[group].result(timeout=T)
    rep.ok("delete_consumer_groups on an empty group succeeds")
    lg = listed_groups(a)
    rep.check(group not in lg, "delete group: no longer in list_consumer_groups", f"{lg.get(group)}")
    rep.equal(group_offsets(a, group, topic), {}, "delete group: its committed offsets are gone")
    state.data["deleted"] = [group]
    unknown = f"{group}-never-existed"
    try:
        a.delete_consumer_groups([unknown], request_timeout=T)[unknown].result(timeout=T)
        rep.fail("delete_consumer_groups on an unknown group fails with GROUP_ID_NOT_FOUND", "no error")
    except KafkaException as e:
        rep.check(kerr(e) is not None and kerr(e).code() == KafkaError.GROUP_ID_NOT_FOUND,
                  "delete_consumer_groups on an unknown group fails with GROUP_ID_NOT_FOUND", str(e))


# ---------------------------------------------------------------- after

def after():
    if "topic" not in state.data:
        rep.fail(AFTER_CHECKS[0], f"no expectations in {args.state} (did the before phase run? {state.data})")
        return
    topic, g1, g2 = state.data["topic"], state.data["g1"], state.data["g2"]
    a = admin()
    fix = lambda d: {int(k): v for k, v in d.items()}  # noqa: E731

    def listed():
        lg = listed_groups(a)
        want = [g for g, k in ((g1, "g1_offsets"), (g2, "g2_offsets")) if k in state.data]
        rep.check(all(lg.get(g) == ConsumerGroupState.EMPTY for g in want),
                  f"after restart: list_consumer_groups shows {len(want)} groups with committed offsets as Empty",
                  f"{ {g: lg.get(g) for g in want} }")
        for g in state.data.get("deleted", []):
            rep.check(g not in lg, "after restart: the deleted group stays deleted", f"listed as {lg.get(g)}")
            rep.equal(group_offsets(a, g, topic), {}, "after restart: the deleted group has no offsets")
        if "g1_offsets" in state.data:
            rep.equal({p: o for p, (o, _) in group_offsets(a, g1, topic).items()}, fix(state.data["g1_offsets"]),
                      "after restart: rebalance group's committed offsets kept")
        if "g2_offsets" in state.data:
            rep.equal(group_offsets(a, g2, topic), {p: (o, f"gcf-meta-{p}") for p, o in fix(state.data["g2_offsets"]).items()},
                      "after restart: restart group's committed offsets and metadata kept")
            d = describe(a, g2)
            rep.check(d.state == ConsumerGroupState.EMPTY and not d.members,
                      "after restart: describe_consumer_groups: restart group Empty, no members", fmt_desc(d))
    rep.run(AFTER_CHECKS[0], listed)

    def resume():
        if "g2_offsets" not in state.data:
            rep.fail(AFTER_CHECKS[1], "the before phase did not commit offsets")
            return
        targets = fix(state.data["g2_offsets"])
        per_part = NREC // NPARTS
        c = Consumer(consumer_conf(B, g2, args.session_timeout_ms, "restart-after"))
        assigned = []
        c.subscribe([topic], on_assign=lambda cons, parts: assigned.append(sorted(p.partition for p in parts)))
        try:
            got = {p: [] for p in range(NPARTS)}
            first_committed = None
            deadline = time.monotonic() + 60
            while any(len(got[p]) < per_part - targets[p] for p in got) and time.monotonic() < deadline:
                for m in c.consume(500, 0.2):
                    if m.error():
                        continue
                    if first_committed is None:
                        # Before this consumer commits anything: what the group holds.
                        com = c.committed([TopicPartition(topic, p) for p in range(NPARTS)], timeout=T)
                        first_committed = {tp.partition: tp.offset for tp in com}
                    got[m.partition()].append((m.offset(), m.value().decode()))
            rep.equal(first_committed, targets, "after restart: Consumer.committed() = the offsets committed before the restart")
            firsts = {p: (v[0][0] if v else None) for p, v in got.items()}
            rep.equal(firsts, targets, "after restart: the new consumer starts every partition exactly at the committed offset")
            ok = all([o for o, _ in got[p]] == list(range(targets[p], per_part)) and
                     all(v == common.value_for("g", o * NPARTS + p) for o, v in got[p]) for p in got)
            rep.check(ok, "after restart: the rest of every partition read, in order, no gaps or repeats",
                      f"{ {p: (len(v), v[:1], v[-1:]) for p, v in got.items()} }")
            res = c.commit(asynchronous=False)
            rep.check(all(tp.error is None for tp in res), "after restart: commit of the final positions", f"{res}")
        finally:
            c.close()
        rep.equal({p: o for p, (o, _) in group_offsets(a, g2, topic).items()}, {p: per_part for p in range(NPARTS)},
                  "after restart: list_consumer_group_offsets = partition ends after the new consumer committed")
    rep.run(AFTER_CHECKS[1], resume)

    def delete():
        a.delete_consumer_groups([g1], request_timeout=T)[g1].result(timeout=T)
        rep.ok("after restart: delete_consumer_groups on the (empty) rebalance group succeeds")
        rep.check(g1 not in listed_groups(a), "after restart: deleted group no longer listed", "still listed")
    rep.run(AFTER_CHECKS[2], delete)


def on_term(*_):
    raise SystemExit(143)


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2:])
    elif sys.argv[1:2] == ["preflight"]:
        preflight(sys.argv[2:])
    else:
        signal.signal(signal.SIGTERM, on_term)
        main()
