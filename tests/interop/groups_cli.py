#!/usr/bin/env python3
"""`ringbroker consume --group` and a confluent-kafka (librdkafka) consumer in one group.

    groups_cli.py --bootstrap 127.0.0.1:PORT --bin path/to/ringbroker [--session-timeout-ms 3000]

Both speak the "consumer" protocol type with the "range" assignor, so either can lead:
  1. `ringbroker consume --group G` joins first (it leads) and owns all 4 partitions of a new
     topic; a confluent consumer joins: each ends up with 2, disjoint (ringbroker's assignor).
  2. 40 records per partition: each record is read once, by the member owning its partition.
  3. ringbroker gets SIGINT: it commits, leaves (exit 0); the confluent consumer takes all 4
     partitions at ringbroker's committed offsets: 10 more per partition are read once, and
     nothing ringbroker printed is read again.
  4. a second `ringbroker consume --group G` joins (now librdkafka leads and assigns): the
     split is 2 and 2 again and 10 more per partition are each read once.
Every wait is bounded; children are killed on the way out. Run by tests/interop/run.sh and by
tests/cli_produce_consume.rs (which skips it without python3 + confluent_kafka).
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import Reporter  # noqa: E402

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

NPARTS = 4
T = 30.0


class CliMember:
    """A `ringbroker consume --group` process with its output in files."""

    def __init__(self, bin_path, bootstrap, topic, group, session_ms, work, name):
        self.out_path = os.path.join(work, f"{name}.out")
        self.err_path = os.path.join(work, f"{name}.err")
        self.proc = subprocess.Popen(
            [bin_path, "consume", topic, "-b", bootstrap, "--group", group, "--from", "beginning",
             "--session-timeout", f"{session_ms}ms", "-f", "%p %s\\n"],
            stdout=open(self.out_path, "wb"), stderr=open(self.err_path, "wb"), stdin=subprocess.DEVNULL,
            env=dict(os.environ, RUST_LOG="warn"),
        )

    def _read(self, path):
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def values(self):
        return [line.split(" ", 1)[1] for line in self._read(self.out_path).splitlines() if " " in line]

    def stderr(self):
        return self._read(self.err_path)

    def assignment(self):
        """Partitions of the last `assigned [...]` line, or None before the first."""
        lines = [ln for ln in self.stderr().splitlines() if "assigned [" in ln]
        if not lines:
            return None
        inner = lines[-1].split("assigned [", 1)[1].rstrip("]")
        return sorted(int(p.rsplit("-", 1)[1]) for p in inner.split(", ") if p)

    def interrupt(self, timeout=20):
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    args = ap.parse_args()
    rep = Reporter("groups_cli")
    run_id = str(int(time.time() * 1000))
    topic, group = f"cli-interop-{run_id}", f"cli-interop-g-{run_id}"
    work = tempfile.mkdtemp(prefix="ringbroker-groups-cli-")
    members = []
    consumer = None
    try:
        admin = AdminClient({"bootstrap.servers": args.bootstrap})
        admin.create_topics([NewTopic(topic, NPARTS, 1)])[topic].result(T)
        rep.ok(f"setup: topic {topic} with {NPARTS} partitions")

        cli = CliMember(args.bin, args.bootstrap, topic, group, args.session_timeout_ms, work, "cli1")
        members.append(cli)
        got = common.wait_until(lambda: cli.assignment() == list(range(NPARTS)), T)
        if not rep.check(got, "ringbroker consume --group owns every partition alone", cli.stderr()):
            rep.finish()

        assigned = set()

        def on_assign(c, parts):
            assigned.clear()
            assigned.update(p.partition for p in parts)

        def on_revoke(c, parts):
            assigned.clear()

        consumer = Consumer({
            "bootstrap.servers": args.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": max(100, args.session_timeout_ms // 6),
            "partition.assignment.strategy": "range",
            "fetch.wait.max.ms": 100,
        })
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        seen = []  # values read by the confluent consumer

        def poll_some(seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                m = consumer.poll(0.1)
                if m is not None and m.error() is None:
                    seen.append(m.value().decode())

        def split_with(member):
            poll_some(0.2)
            theirs = member.assignment() or []
            return len(assigned) == 2 and len(theirs) == 2 and assigned.isdisjoint(theirs)

        got = common.wait_until(lambda: split_with(cli), T, interval=0)
        if not rep.check(got, "ringbroker leads: 2 partitions each, disjoint",
                         f"confluent {sorted(assigned)}, ringbroker {cli.assignment()}; {cli.stderr()}"):
            rep.finish()

        producer = Producer({"bootstrap.servers": args.bootstrap, "linger.ms": 5})

        def produce(tag, per_partition):
            values = []
            for p in range(NPARTS):
                for i in range(per_partition):
                    v = f"{tag}-{p}-{i}"
                    producer.produce(topic, value=v.encode(), partition=p)
                    values.append(v)
            left = producer.flush(T)
            rep.check(left == 0, f"{tag}: {len(values)} records produced", f"{left} not delivered")
            return values

        def read_once(tag, want, readers):
            def total():
                poll_some(0.2)
                return sum(len(r()) for r in readers) >= len(want)
            common.wait_until(total, T, interval=0)
            poll_some(1.0)  # anything read twice shows up now
            everything = [v for r in readers for v in r() if v.startswith(tag + "-")]
            rep.check(sorted(everything) == sorted(want), f"{tag}: every record read exactly once",
                      f"read {len(everything)} of {len(want)}, {len(set(everything))} distinct")

        first = produce("first", 40)
        read_once("first", first, [lambda: seen, cli.values])
        rep.check(len(cli.values()) == 80 and len([v for v in seen if v.startswith("first-")]) == 80,
                  "first: each member read its own 2 partitions",
                  f"ringbroker {len(cli.values())}, confluent {len(seen)}")

        rc = cli.interrupt()
        rep.check(rc == 0, "ringbroker consume: SIGINT -> commit, leave, exit 0", f"rc {rc}: {cli.stderr()}")
        got = common.wait_until(lambda: (poll_some(0.2), len(assigned) == NPARTS)[1], T, interval=0)
        rep.check(got, "confluent takes over all partitions after ringbroker left", sorted(assigned))
        second = produce("second", 10)
        read_once("second", second, [lambda: seen])
        again = sorted(set(seen) & set(cli.values()))
        rep.check(not again, "nothing ringbroker printed is read again (its commits hold)", again[:5])

        cli2 = CliMember(args.bin, args.bootstrap, topic, group, args.session_timeout_ms, work, "cli2")
        members.append(cli2)
        got = common.wait_until(lambda: split_with(cli2), T, interval=0)
        if not rep.check(got, "librdkafka leads: 2 partitions each, disjoint",
                         f"confluent {sorted(assigned)}, ringbroker {cli2.assignment()}; {cli2.stderr()}"):
            rep.finish()
        third = produce("third", 10)
        read_once("third", third, [lambda: seen, cli2.values])
        rep.check(cli2.values() and all(v.startswith("third-") for v in cli2.values()),
                  "the second ringbroker member starts at the group's committed offsets",
                  cli2.values()[:5])
        rc = cli2.interrupt()
        rep.check(rc == 0, "second ringbroker consume: SIGINT -> exit 0", f"rc {rc}: {cli2.stderr()}")
    except Exception as e:  # noqa: BLE001
        rep.fail("groups_cli", f"{type(e).__name__}: {e}")
    finally:
        for m in members:
            m.kill()
        if consumer is not None:
            consumer.close()
    rep.finish()


if __name__ == "__main__":
    main()
