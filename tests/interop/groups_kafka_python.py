#!/usr/bin/env python3
"""Consumer groups with kafka-python (pure-Python client) against ringbroker.

    groups_kafka_python.py --bootstrap 127.0.0.1:PORT --phase before --state DIR/gkp.json [--session-timeout-ms 6000]
    (restart the broker on the same data dir)
    groups_kafka_python.py --bootstrap 127.0.0.1:PORT --phase after --state DIR/gkp.json

`before`: a 4-partition topic with 800 numbered records (record i -> partition i % 4). Two
KafkaConsumer(group_id=G) in two threads subscribe (enable_auto_commit=False). Until both are
members, records they get are handed back (seek), so counting starts with the shared
assignment: partitions disjoint, all 4 covered, DescribeGroups agrees (Stable, 2 members).
OffsetDelete on the active group fails with GROUP_SUBSCRIBED_TO_TOPIC. Each consumer then
processes records and commits synchronously after every poll until it has 100, then closes:
nothing consumed twice, every partition read contiguously from 0, committed() = position.
After both left: listed, Empty, list_group_offsets = what was committed. A second group gets
offsets through the admin API (alter_group_offsets), one of them deleted with
delete_group_offsets (OffsetDelete), then the group is deleted (DeleteGroups).
`after` (broker restarted): the group and its offsets are still there; a new consumer in G
starts exactly at the committed offsets, reads to the end, commits; the offsets are the ends.

Group APIs missing from ApiVersions -> one FAIL line per check group (no client hangs).
INTEROP_FORCE_GROUPS=1 runs the clients anyway (every wait is bounded).
"""

import argparse
import logging
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import Reporter, State  # noqa: E402

import kafka.errors as Errors  # noqa: E402
from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

logging.basicConfig(level=logging.ERROR)

NPARTS = 4
NREC = 800
QUOTA = 100  # records each of the two consumers processes before the restart
T = 15.0

BEFORE_CHECKS = [
    "two consumers in one group: shared assignment, commits, describe/list, OffsetDelete refused while subscribed",
    "admin offsets: alter_group_offsets, delete_group_offsets (OffsetDelete), delete_groups",
]
AFTER_CHECKS = [
    "after restart: group listed with its committed offsets",
    "after restart: a new consumer resumes exactly at the committed offsets",
]


def admin():
    return KafkaAdminClient(bootstrap_servers=B, request_timeout_ms=10000, client_id="interop-gkp-admin")


def consumer(group, client_id, listener=None, topic=None, **extra):
    s = args.session_timeout_ms
    c = KafkaConsumer(
        bootstrap_servers=B,
        group_id=group,
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=s,
        heartbeat_interval_ms=max(100, s // 6),
        max_poll_interval_ms=max(s, 60000),
        request_timeout_ms=max(30000, s + 5000),
        fetch_max_wait_ms=100,
        **extra,
    )
    if topic:
        c.subscribe([topic], listener=listener)
    return c


# ---- admin API adapters: kafka-python 3 names (list_groups, ...), 2.x names as a fallback

def list_groups(a):
    if hasattr(a, "list_groups"):
        return {g["group_id"]: g for g in a.list_groups()}
    return {g[0]: {"group_id": g[0], "protocol_type": g[1]} for g in a.list_consumer_groups()}


def describe_group(a, group):
    """{'state': str, 'members': [(client_id, sorted partitions of `topic`)]} (raw kept too)."""
    if hasattr(a, "describe_groups"):
        d = a.describe_groups([group])[group]
        members = [(m.get("client_id"), m) for m in d.get("members", [])]
        return {"state": d.get("group_state"), "members": members, "error": d.get("error"), "raw": d}
    d = a.describe_consumer_groups([group])[0]
    return {"state": d.state, "members": [(m.client_id, m) for m in d.members], "error": None, "raw": d}


def parts_in(obj, topic):
    """The partitions of `topic` in a decoded member assignment, whatever its shape."""
    if hasattr(obj, "partitions") and callable(obj.partitions):
        return sorted(tp.partition for tp in obj.partitions() if tp.topic == topic)
    if isinstance(obj, dict):
        if obj.get("topic") == topic and isinstance(obj.get("partitions"), list):
            return sorted(obj["partitions"])
        for k in ("member_assignment", "assignment", "assigned_partitions"):
            if k in obj:
                return parts_in(obj[k], topic)
        return []
    if isinstance(obj, (list, tuple)):
        if len(obj) == 2 and obj[0] == topic and isinstance(obj[1], (list, tuple)):
            return sorted(obj[1])
        out = []
        for x in obj:
            out += parts_in(x, topic)
        return sorted(out)
    for k in ("member_assignment", "assignment", "assigned_partitions"):
        if hasattr(obj, k):
            return parts_in(getattr(obj, k), topic)
    return []


def group_offsets(a, group, topic):
    if hasattr(a, "list_group_offsets"):
        r = a.list_group_offsets({group: None}).get(group, {})
    else:
        r = a.list_consumer_group_offsets(group)
    return {tp.partition: o.offset for tp, o in r.items() if tp.topic == topic and o.offset >= 0}


def coordinator_ready(timeout=30):
    """Preflight: FindCoordinator + OffsetFetch for an unknown group must answer (retried), so a
    broken coordinator costs one bounded wait instead of one per check."""
    a = admin()
    last = [None]

    def probe():
        try:
            group_offsets(a, "interop-preflight-group", "none")
            return True
        except Exception as e:  # noqa: BLE001
            last[0] = f"{type(e).__name__}: {e}"
            time.sleep(0.5)
            return False

    try:
        return rep.check(common.wait_until(probe, timeout, 0.1),
                         "preflight: the group coordinator answers OffsetFetch for a new group",
                         f"not within {timeout}s: {last[0]}")
    finally:
        a.close()


# ---------------------------------------------------------------- before

class Member(threading.Thread):
    def __init__(self, name, group, topic, go, stop):
        super().__init__(daemon=True)
        self.name_, self.group, self.topic, self.go, self.stop = name, group, topic, go, stop
        self.assigned = set()
        self.generations = 0
        self.records = []  # (partition, offset, value)
        self.commits = 0
        self.committed = {}
        self.error = None
        self.closed = False
        self.done = threading.Event()

    def run(self):
        me = self

        class L(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                me.assigned = set()

            def on_partitions_assigned(self, assigned):
                me.assigned = {tp.partition for tp in assigned}
                me.generations += 1

        try:
            c = consumer(self.group, f"interop-gkp-{self.name_}", L(), self.topic, max_poll_records=10)
            try:
                deadline = time.monotonic() + 120
                while not self.stop.is_set() and time.monotonic() < deadline:
                    recs = c.poll(timeout_ms=200)
                    if not self.go.is_set():
                        # Not both members yet: hand the records back, nothing counts.
                        for tp, ms in recs.items():
                            if ms:
                                c.seek(tp, ms[0].offset)
                        time.sleep(0.05)
                        continue
                    if len(self.records) >= QUOTA:
                        self.done.set()
                        time.sleep(0.05)  # heartbeats run in the background: stay a member
                        continue
                    n = 0
                    for tp, ms in recs.items():
                        for m in ms:
                            self.records.append((m.partition, m.offset, m.value.decode()))
                            n += 1
                    if n:
                        c.commit()
                        self.commits += 1
                    time.sleep(0.02)
                self.committed = {p: c.committed(TopicPartition(self.topic, p)) for p in sorted(self.assigned)}
            finally:
                c.close()
                self.closed = True
        except Exception as e:  # noqa: BLE001
            self.error = f"{type(e).__name__}: {e}"
            self.done.set()


def before():
    prefix = f"gkp{args.run_id}"
    topic = f"{prefix}-t4"
    group = f"{prefix}-group"
    state.data = {"topic": topic, "group": group}
    a = admin()
    a.create_topics({topic: {"num_partitions": NPARTS, "replication_factor": 1}}, timeout_ms=10000)
    common.wait_until(lambda: topic in {t["name"] for t in a.describe_topics([topic]) if t["error_code"] == 0}, 10)
    p = KafkaProducer(bootstrap_servers=B, acks="all", enable_idempotence=False, linger_ms=5, request_timeout_ms=15000)
    try:
        futs = [p.send(topic, key=f"k{i % 40}".encode(), value=common.value_for("kp", i).encode(), partition=i % NPARTS)
                for i in range(NREC)]
        p.flush(timeout=30)
        [f.get(timeout=T) for f in futs]
    finally:
        p.close(timeout=5)
    rep.ok(f"setup: {NREC} records produced to {topic} ({NPARTS} partitions)")
    state.save()

    def shared():
        go, stop = threading.Event(), threading.Event()
        ms = [Member(n, group, topic, go, stop) for n in ("one", "two")]
        for m in ms:
            m.start()
        try:
            def both():
                s1, s2 = ms[0].assigned, ms[1].assigned
                return s1 and s2 and not (s1 & s2) and (s1 | s2) == set(range(NPARTS))
            if not rep.check(common.wait_until(both, 60, 0.1),
                             "two consumers: both assigned, partitions disjoint, all 4 covered",
                             f"{[sorted(m.assigned) for m in ms]}, errors {[m.error for m in ms]}"):
                return
            asg = {f"interop-gkp-{m.name_}": sorted(m.assigned) for m in ms}
            d = common.wait_until(lambda: (lambda x: x if x["state"] == "Stable" and len(x["members"]) == 2 else None)(
                describe_group(a, group)), 20, 0.3) or describe_group(a, group)
            rep.equal((d["state"], {c: parts_in(m, topic) for c, m in d["members"]}), ("Stable", asg),
                      "describe_groups: Stable, 2 members with the assignments the consumers got")
            lg = list_groups(a)
            rep.check(group in lg, "list_groups: the active group is listed", f"{sorted(lg)[:10]}")
            if common.API_OFFSET_DELETE in versions and hasattr(a, "delete_group_offsets"):
                try:
                    r = a.delete_group_offsets(group, [TopicPartition(topic, 0)])
                    errs = {tp.partition: e.__name__ for tp, e in r.items()}
                    rep.equal(errs, {0: "GroupSubscribedToTopicError"},
                              "delete_group_offsets (OffsetDelete) on a subscribed topic of an active group refused")
                except Errors.KafkaError as e:
                    rep.fail("delete_group_offsets (OffsetDelete) on a subscribed topic of an active group refused",
                             f"top-level {type(e).__name__}: {e}")
            go.set()
            rep.check(all(m.done.wait(60) for m in ms), f"both consumers processed {QUOTA} records",
                      f"{[len(m.records) for m in ms]}, errors {[m.error for m in ms]}")
        finally:
            stop.set()
            for m in ms:
                m.join(30)
        rep.check(all(m.closed and m.error is None for m in ms), "both consumers closed without error",
                  f"{[(m.closed, m.error) for m in ms]}")
        recs = [r for m in ms for r in m.records]
        keys = [(p, o) for p, o, _ in recs]
        rep.check(len(keys) == len(set(keys)), f"no record consumed twice ({len(keys)} consumed)",
                  f"duplicates {sorted(k for k in set(keys) if keys.count(k) > 1)[:5]}")
        per = {}
        for p, o, v in recs:
            per.setdefault(p, []).append(o)
        rep.check(all(sorted(v) == list(range(len(v))) for v in per.values()),
                  "every partition read contiguously from offset 0", f"{ {p: sorted(v)[:5] for p, v in per.items()} }")
        rep.check(all(v == common.value_for("kp", o * NPARTS + p) for p, o, v in recs), "records have the expected values", "")
        own = all(p in asg[f"interop-gkp-{m.name_}"] for m in ms for p, _, _ in m.records)
        rep.check(own, "each consumer read only its own partitions", f"{asg}")
        # One past the last record consumed; 0 for a partition nothing was consumed from (commit()
        # commits the position of every assigned partition, 0 after the reset to earliest; a
        # broker may also hold no offset for it: both read as 0 here).
        consumed_next = {p: (max(per[p]) + 1 if p in per else 0) for p in range(NPARTS)}
        committed = {}
        for m in ms:
            committed.update({p: (o if o is not None or p in per else 0) for p, o in m.committed.items()})
        rep.equal(committed, consumed_next, "KafkaConsumer.committed() = one past the last record consumed, per partition")
        d = common.wait_until(lambda: (lambda x: x if x["state"] == "Empty" else None)(describe_group(a, group)), 20, 0.3) \
            or describe_group(a, group)
        rep.equal((d["state"], d["members"]), ("Empty", []), "describe_groups after both closed: Empty, no members")
        lg = list_groups(a)
        rep.check(group in lg, "list_groups: the empty group with offsets is listed", f"{sorted(lg)[:10]}")
        got = group_offsets(a, group, topic)
        rep.equal({p: got.get(p, 0 if p not in per else None) for p in range(NPARTS)}, consumed_next,
                  "list_group_offsets = committed offsets")
        state.data["committed"] = {str(p): o for p, o in consumed_next.items()}
    rep.run(BEFORE_CHECKS[0], shared)

    def admin_offsets():
        g2 = f"{prefix}-admin"
        if not hasattr(a, "alter_group_offsets"):
            rep.skip(BEFORE_CHECKS[1], "this kafka-python has no alter_group_offsets")
            return
        offs = {TopicPartition(topic, p): OffsetAndMetadata(5 + p, "kp-admin", -1) for p in range(NPARTS)}
        r = a.alter_group_offsets(g2, offs)
        rep.check(all(e is Errors.NoError for e in r.values()), "alter_group_offsets on a new group (OffsetCommit, generation -1)",
                  f"{r}")
        rep.equal(group_offsets(a, g2, topic), {p: 5 + p for p in range(NPARTS)}, "list_group_offsets after alter_group_offsets")
        if common.API_OFFSET_DELETE in versions:
            r = a.delete_group_offsets(g2, [TopicPartition(topic, 0)])
            rep.check(all(e is Errors.NoError for e in r.values()), "delete_group_offsets (OffsetDelete) on an empty group", f"{r}")
            rep.equal(group_offsets(a, g2, topic), {p: 5 + p for p in range(1, NPARTS)},
                      "OffsetDelete removed partition 0's offset only")
        else:
            rep.fail("delete_group_offsets (OffsetDelete)", "OffsetDelete (47) not in ApiVersions")
        r = a.delete_groups([g2])
        rep.equal(dict(r) if not isinstance(r, dict) else r, {g2: "OK"}, "delete_groups on the empty group")
        rep.equal(group_offsets(a, g2, topic), {}, "deleted group has no offsets")
        r = a.delete_groups([f"{g2}-never-existed"])
        rep.equal(dict(r) if not isinstance(r, dict) else r, {f"{g2}-never-existed": "GroupIdNotFoundError"},
                  "delete_groups on an unknown group -> GroupIdNotFoundError")
    rep.run(BEFORE_CHECKS[1], admin_offsets)
    a.close()
    state.save()


# ---------------------------------------------------------------- after

def after():
    if "committed" not in state.data:
        for what in AFTER_CHECKS:
            rep.fail(what, f"no committed offsets in {args.state} (did the before phase run and pass?)")
        return
    topic, group = state.data["topic"], state.data["group"]
    want = {int(p): o for p, o in state.data["committed"].items()}
    a = admin()

    def listed():
        lg = list_groups(a)
        rep.check(group in lg, "after restart: list_groups shows the group", f"{sorted(lg)[:10]}")
        got = group_offsets(a, group, topic)
        rep.equal({p: got.get(p, 0 if want.get(p) == 0 else None) for p in range(NPARTS)}, want,
                  "after restart: list_group_offsets = offsets committed before")
        d = describe_group(a, group)
        rep.equal((d["state"], d["members"]), ("Empty", []), "after restart: describe_groups: Empty, no members")
    rep.run(AFTER_CHECKS[0], listed)

    def resume():
        per_part = NREC // NPARTS
        assigned = []

        class L(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                pass

            def on_partitions_assigned(self, parts):
                assigned.append(sorted(tp.partition for tp in parts))

        c = consumer(group, "interop-gkp-after", L(), topic, max_poll_records=200)
        try:
            got = {p: [] for p in range(NPARTS)}
            committed_first = None
            deadline = time.monotonic() + 60
            while any(len(got[p]) < per_part - want.get(p, 0) for p in got) and time.monotonic() < deadline:
                for tp, ms in c.poll(timeout_ms=200).items():
                    if committed_first is None:
                        committed_first = {p: c.committed(TopicPartition(topic, p)) for p in range(NPARTS)}
                    for m in ms:
                        got[m.partition].append((m.offset, m.value.decode()))
            rep.equal(assigned[-1:], [list(range(NPARTS))], "after restart: the new consumer got all 4 partitions")
            rep.equal({p: (o if o is not None or want.get(p) else 0) for p, o in (committed_first or {}).items()},
                      {p: want.get(p) for p in range(NPARTS)},
                      "after restart: KafkaConsumer.committed() = offsets committed before the restart")
            rep.equal({p: (v[0][0] if v else None) for p, v in got.items()}, {p: want.get(p, 0) for p in range(NPARTS)},
                      "after restart: every partition starts exactly at the committed offset")
            ok = all([o for o, _ in got[p]] == list(range(want.get(p, 0), per_part)) and
                     all(v == common.value_for("kp", o * NPARTS + p) for o, v in got[p]) for p in got)
            rep.check(ok, "after restart: the rest of every partition read in order, no gaps or repeats",
                      f"{ {p: (len(v), v[:1], v[-1:]) for p, v in got.items()} }")
            c.commit()
        finally:
            c.close()
        rep.equal(group_offsets(a, group, topic), {p: per_part for p in range(NPARTS)},
                  "after restart: list_group_offsets = partition ends after the new consumer committed")
    rep.run(AFTER_CHECKS[1], resume)
    a.close()


def main():
    global args, rep, state, B, versions
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--phase", choices=["before", "after"], required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--run-id", default=str(int(time.time())))
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    args = ap.parse_args()
    rep = Reporter("groups_kafka_python")
    state = State(args.state)
    B = args.bootstrap
    try:
        versions = common.api_versions(B)
    except Exception as e:  # noqa: BLE001
        rep.fail("ApiVersions probe", f"{type(e).__name__}: {e}")
        rep.finish()
    needed = {k: v for k, v in common.GROUP_APIS.items() if k != common.API_OFFSET_DELETE}  # checked where used
    missing = common.missing_apis(versions, needed)
    if missing and not os.environ.get("INTEROP_FORCE_GROUPS"):
        for what in (BEFORE_CHECKS if args.phase == "before" else AFTER_CHECKS):
            rep.fail(what, f"group APIs not in ApiVersions: {', '.join(missing)}")
        rep.finish()
    if not missing and not coordinator_ready():
        for what in (BEFORE_CHECKS if args.phase == "before" else AFTER_CHECKS):
            rep.fail(what, "skipped: the group coordinator did not answer (see the preflight FAIL)")
        rep.finish()
    if args.phase == "before":
        rep.run("before", before)
    else:
        rep.run("after", after)
    rep.finish()


def on_term(*_):
    raise SystemExit(143)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, on_term)
    main()
