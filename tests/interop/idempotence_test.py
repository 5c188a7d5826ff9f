#!/usr/bin/env python3
"""Idempotent producers through a connection-cutting proxy, with broker restarts.

    idempotence_test.py --bin path/to/ringbroker --work DIR [--seed 7] [--control] [--force]

Starts its OWN broker (data dir DIR/idem-data, logs DIR/broker-idem-N.{out,err}, so run.sh's
panic check sees them) with `advertised.listeners` pointing at a tcp_proxy.TcpProxy in front of
it: clients bootstrap through the proxy and every later connection goes through it too. While
records are produced the proxy cuts all connections every 100-800 ms and single connections
after a random byte budget in either direction (seeded), so requests are lost before the broker
sees them and responses are lost after it appended. Scenarios, each on its own topic:

  one-partition     confluent-kafka, enable.idempotence=true, acks=all, 1 partition
  four-partitions   the same over 4 partitions (record i -> partition i % 4)
  restart-sigterm   2 partitions; the broker is stopped with SIGTERM (exit 0 required) and
                    restarted on the same port/data dir while the producer is still sending
  restart-sigkill   the same with SIGKILL
  kafka-python      KafkaProducer with its defaults (idempotent in kafka-python 3), 1 partition

After flush, cutting is switched off and every partition is read from the start with assign():
each number must be there exactly once, in production order per partition, at the offset the
delivery report gave. The proxy must have cut connections (> 0) during every scenario.
--control also runs one-partition with enable.idempotence=false and prints how many duplicates
the cuts caused (information, not a check: it shows the test can see duplicates).
Without InitProducerId (22) in ApiVersions each scenario is one FAIL line (unless --force).
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import Reporter  # noqa: E402
from tcp_proxy import TcpProxy  # noqa: E402

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

rep = Reporter("idempotence")
ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--seed", type=int, default=7)
ap.add_argument("--control", action="store_true")
ap.add_argument("--force", action="store_true", help="run the scenarios even without InitProducerId")
ap.add_argument("--only", default="", help="comma-separated scenario names to run (default: all)")
ap.add_argument("--rdkafka-debug", default="", help="librdkafka debug contexts for the producers (e.g. eos,protocol)")
args = ap.parse_args()
T = 15.0
FLUSH_S = 60.0  # bound for a producer's flush (message.timeout.ms is 45 s)


class InfoReporter(Reporter):
    """For the control run: prints `== ...` lines, which run.sh shows but does not count."""

    def ok(self, what):
        self.passed += 1
        print(f"== {self.name}: ok: {what}", flush=True)

    def fail(self, what, detail=""):
        self.failed += 1
        print(f"== {self.name}: NOT ok: {what}: {common.short(str(detail), 300)}", flush=True)


class Broker:
    """The test's own broker process on a fixed port and data dir, advertising the proxy."""

    def __init__(self, port, adv_port, data_dir):
        self.port, self.adv_port, self.data_dir = port, adv_port, data_dir
        self.proc = None
        self.n = 0
        # `--listen A --set advertised.listeners=B` is the documented form; `--set listeners=A
        # --set advertised.listeners=B` is the fallback if --listen overrides the advertised address.
        self.listen_flag = True

    def argv(self):
        listen = f"127.0.0.1:{self.port}"
        adv = ["--set", f"advertised.listeners=127.0.0.1:{self.adv_port}"]
        where = ["--listen", listen] + adv if self.listen_flag else ["--set", f"listeners={listen}"] + adv
        return [args.bin, "serve", *where, "--data-dir", self.data_dir, "--shards", "2",
                "--set", "ringbroker.metrics.listen=none"]

    def start(self, rebind_s=30):
        """Starts the broker; while the port is still held by a killed predecessor ("Address
        already in use": after SIGKILL the kernel may release an io_uring broker's sockets a
        little later) retries for up to `rebind_s` seconds. Returns the seconds spent waiting."""
        t0 = time.monotonic()
        while True:
            try:
                self._start_once()
                return time.monotonic() - t0
            except RuntimeError as e:
                if "in use" not in str(e) or time.monotonic() - t0 > rebind_s:
                    raise
                time.sleep(0.2)

    def _start_once(self):
        self.n += 1
        log = os.path.join(args.work, f"broker-idem-{self.n}")
        out = open(log + ".out", "w")
        err = open(log + ".err", "w")
        self.proc = subprocess.Popen(self.argv(), stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        out.close()
        err.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited {self.proc.returncode}: {tail(log + '.err')}")
            with open(log + ".out") as f:
                if "listening on" in f.read():
                    try:
                        socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                        return
                    except OSError:
                        pass
            time.sleep(0.05)
        raise RuntimeError(f"broker not listening after 20 s: {tail(log + '.err')}")

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Returns the exit code (None if it had to be SIGKILLed after `timeout`)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return None


tail = common.tail


def advertised(bootstrap):
    """host:port of the broker(s) in a Metadata response."""
    a = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    return ",".join(sorted(f"{b.host}:{b.port}" for b in a.list_topics(timeout=T).brokers.values()))


def create_topic(bootstrap, name, nparts):
    a = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    for f in a.create_topics([NewTopic(name, num_partitions=nparts, replication_factor=1)], request_timeout=T).values():
        f.result(timeout=T)
    ok = common.wait_until(lambda: name in a.list_topics(timeout=T).topics, 10)
    if not ok:
        raise RuntimeError(f"topic {name} not in metadata after 10 s")


def read_all(bootstrap, topic, nparts, timeout=30.0):
    """[(partition, offset, value)] from the start to the high watermark of every partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop-idem-verify", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, "fetch.wait.max.ms": 100, "socket.timeout.ms": 10000})
    try:
        high = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=T)[1] for p in range(nparts)}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(nparts)])
        nxt = {p: 0 for p in range(nparts)}
        out, errors = [], []
        deadline = time.monotonic() + timeout
        while any(nxt[p] < high[p] for p in nxt) and time.monotonic() < deadline:
            for m in c.consume(1000, 0.3):
                if m.error():
                    errors.append(str(m.error()))
                    continue
                out.append((m.partition(), m.offset(), m.value().decode()))
                nxt[m.partition()] = max(nxt[m.partition()], m.offset() + 1)
        if errors:
            raise RuntimeError(f"consume errors: {errors[:3]}")
        short = {p: (nxt[p], high[p]) for p in nxt if nxt[p] < high[p]}
        if short:
            raise RuntimeError(f"timed out before the high watermark: {short}")
        return sorted(out)
    finally:
        c.close()


def verify(what, topic, nparts, n, prefix, reports, part_of, report_errors):
    """reports: {seq: (partition, offset)} from delivery reports; part_of(i): the partition of i."""
    rep.check(not report_errors and len(reports) == n, f"{what}: all {n} records acknowledged without error",
              f"{len(reports)} acknowledged, {len(report_errors)} errors: {report_errors[:3]}")
    recs = read_all(direct, topic, nparts)
    seqs = [common.seq_of(v) for _, _, v in recs]
    count = {}
    for s in seqs:
        count[s] = count.get(s, 0) + 1
    dups = sorted(s for s, k in count.items() if k > 1)
    missing = sorted(set(range(n)) - set(count))
    foreign = [v for _, _, v in recs if not v.startswith(prefix)]
    rep.check(not dups and not missing and not foreign and len(recs) == n,
              f"{what}: every number 0..{n - 1} stored exactly once",
              f"{len(recs)} records; {len(dups)} duplicated {dups[:10]}; {len(missing)} missing {missing[:10]}; "
              f"foreign {foreign[:3]}")
    order_bad, wrong_part = [], []
    for p in range(nparts):
        ps = [common.seq_of(v) for q, _, v in recs if q == p]
        if ps != sorted(ps):
            i = next(k for k in range(1, len(ps)) if ps[k] < ps[k - 1])
            order_bad.append((p, ps[max(0, i - 3):i + 3]))
        wrong_part += [(s, p) for s in ps if part_of(s) != p]
    rep.check(not order_bad, f"{what}: per-partition order is production order", f"out of order around: {order_bad[:3]}")
    rep.check(not wrong_part, f"{what}: each record in its partition", f"{wrong_part[:5]}")
    stored = {common.seq_of(v): (p, o) for p, o, v in recs}
    mismatch = [(s, po, stored.get(s)) for s, po in sorted(reports.items()) if stored.get(s) != po]
    rep.check(not mismatch, f"{what}: delivery report offsets are where the records are stored",
              f"(seq, reported, stored): {mismatch[:5]}")
    return dups


def cut_check(what, before, t0=None):
    s = proxy.stats()
    cut = s["cut_connections"] - before["cut_connections"]
    conns = s["connections"] - before["connections"]
    rep.check(cut > 0, f"{what}: the proxy cut {cut} connections ({s['timer_cuts'] - before['timer_cuts']} timed cuts, "
                       f"{s['byte_cuts'] - before['byte_cuts']} after a byte budget; {conns} connections made)",
              "no connection was cut: the test proved nothing")
    took = f"produced in {time.monotonic() - t0:.1f}s; " if t0 else ""
    print(f"== idempotence: {what}: {took}proxy {s}", flush=True)


def confluent_producer(idempotent=True):
    extra = {"debug": args.rdkafka_debug} if args.rdkafka_debug else {}
    return Producer({
        **extra,
        "bootstrap.servers": via_proxy,
        "enable.idempotence": idempotent,
        "acks": "all",
        "retries": 2147483647,
        "max.in.flight.requests.per.connection": 5,
        "message.timeout.ms": 45000,
        "linger.ms": 5,
        "batch.size": 16384,
        "retry.backoff.ms": 20,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 500,
        "socket.timeout.ms": 10000,
        "request.timeout.ms": 10000,
        # librdkafka >= 2.x re-bootstraps when every broker connection is down, which with one
        # broker is every cut: it drops the learned broker and then reconnects only once a second,
        # so with cuts every 100-800 ms it livelocks without ever sending Metadata again (seen
        # here: 68 re-bootstraps, 1 MetadataRequest, 0 ProduceRequests in 60 s). Keep the broker.
        "metadata.recovery.strategy": "none",
    })


def produce_confluent(what, topic, nparts, n, idempotent=True, restart_sig=None):
    """Produces n numbered records through the cutting proxy; with restart_sig, restarts the broker
    with that signal once a third are acknowledged while the rest are still being sent."""
    prefix = f"{topic}-"
    part_of = (lambda i: i % nparts)  # noqa: E731
    reports, errors = {}, []
    fatal = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
            if err.fatal():
                fatal.append(str(err))
        else:
            reports[common.seq_of(msg.value().decode())] = (msg.partition(), msg.offset())

    before = proxy.stats()
    t0 = time.monotonic()
    p = confluent_producer(idempotent)
    restart = {}

    def restart_broker():
        t0 = time.monotonic()
        restart["unacked"] = n - len(reports)
        rc = broker.stop(restart_sig)
        restart["rc"] = rc
        try:
            restart["rebind_wait"] = broker.start()
            restart["ok"] = True
        except Exception as e:  # noqa: BLE001
            restart["error"] = str(e)
        restart["took"] = time.monotonic() - t0

    th = None
    proxy.cutting = True
    try:
        for i in range(n):
            while True:
                try:
                    p.produce(topic, value=common.value_for(prefix.rstrip("-"), i, 80), key=f"k{i % 16}",
                              partition=part_of(i), on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.05)
                except KafkaException as e:  # the producer hit a fatal error: stop producing
                    fatal.append(str(e))
                    break
            if fatal:
                break
            p.poll(0)
            if i % 10 == 9:
                # Spread the sends over a few seconds so the timed cuts (and the restart) land in
                # the middle of them, not after a burst that fits in one connection's life.
                time.sleep(0.01)
            if restart_sig is not None:
                if th is None and len(reports) >= n // 3:
                    th = threading.Thread(target=restart_broker, daemon=True)
                    th.start()
        if restart_sig is not None and th is None and not fatal:
            # Everything was acknowledged before a third was counted (cannot happen with the
            # pacing above unless delivery reports lag): restart now anyway.
            th = threading.Thread(target=restart_broker, daemon=True)
            th.start()
        left = p.flush(FLUSH_S)
        if th is not None:
            th.join(60)
    finally:
        proxy.cutting = False
    rep.check(left == 0, f"{what}: producer flushed", f"{left} messages still queued after {FLUSH_S:.0f}s")
    rep.check(not fatal, f"{what}: no fatal producer error", f"{fatal[:2]}")
    if restart_sig is not None:
        name = signal.Signals(restart_sig).name
        if restart_sig == signal.SIGTERM:
            rep.check(restart.get("rc") == 0, f"{what}: broker exited 0 on SIGTERM while the producer was sending",
                      f"exit code {restart.get('rc')}")
        rep.check(restart.get("ok"), f"{what}: broker restarted after {name} mid-production",
                  restart.get("error", "restart did not finish in 60 s"))
        if restart.get("rebind_wait", 0) > 0.1:
            print(f"== idempotence: {what}: the port stayed in use for {restart['rebind_wait']:.1f}s after {name} "
                  f"({broker.n - 1} start attempts in all so far)", flush=True)
        rep.check(restart.get("unacked", 0) > 0,
                  f"{what}: restart began with {restart.get('unacked')} of {n} records not yet acknowledged", "")
    cut_check(what, before, t0)
    return verify(what, topic, nparts, n, prefix, reports, part_of, errors)


def scenario(name, fn):
    if args.only and name not in args.only.split(","):
        return
    if not has_idempotence and not args.force:
        rep.fail(name, "InitProducerId (22) not in ApiVersions: idempotent producers are not served")
        return
    rep.run(name, fn)


def kafka_python_scenario():
    from kafka import KafkaProducer

    topic = f"idem{run_id}-kafka-python"
    create_topic(direct, topic, 1)
    before = proxy.stats()
    t0 = time.monotonic()
    p = KafkaProducer(bootstrap_servers=via_proxy, client_id="interop-idem-kp", linger_ms=5, batch_size=16384,
                      delivery_timeout_ms=45000, request_timeout_ms=10000, retry_backoff_ms=20,
                      reconnect_backoff_ms=20, reconnect_backoff_max_ms=500, max_block_ms=60000)
    try:
        rep.check(p.config["enable_idempotence"] and p.config["acks"] in (-1, "all"),
                  "kafka-python: KafkaProducer is idempotent (acks=all) by default",
                  f"enable_idempotence={p.config['enable_idempotence']} acks={p.config['acks']}")
        n = 2000
        futs = []
        proxy.cutting = True
        try:
            for i in range(n):
                futs.append(p.send(topic, value=common.value_for(topic, i, 80).encode(), partition=0))
                if i % 10 == 9:
                    time.sleep(0.01)
            p.flush(timeout=FLUSH_S)
        finally:
            proxy.cutting = False
        reports, errors = {}, []
        for i, f in enumerate(futs):
            try:
                md = f.get(timeout=1)
                reports[i] = (md.partition, md.offset)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{i}: {type(e).__name__}: {e}")
    finally:
        p.close(timeout=5)
    cut_check("kafka-python", before, t0)
    verify("kafka-python", topic, 1, n, f"{topic}-", reports, lambda i: 0, errors)


def main():
    global has_idempotence
    versions = common.api_versions(direct)
    has_idempotence = common.API_INIT_PRODUCER_ID in versions
    rep.check(has_idempotence, "InitProducerId (22) advertised in ApiVersions",
              "not advertised: every scenario below fails")

    def one():
        t = f"idem{run_id}-one"
        create_topic(direct, t, 1)
        produce_confluent("one-partition", t, 1, 4000)

    def four():
        t = f"idem{run_id}-four"
        create_topic(direct, t, 4)
        produce_confluent("four-partitions", t, 4, 6000)

    def restart(sig):
        t = f"idem{run_id}-restart-{signal.Signals(sig).name.lower()}"
        create_topic(direct, t, 2)
        produce_confluent(f"restart-{signal.Signals(sig).name.lower()}", t, 2, 3000, restart_sig=sig)

    if args.control:
        def control():
            global rep
            t = f"idem{run_id}-control"
            create_topic(direct, t, 1)
            real, rep = rep, InfoReporter("idempotence control")
            try:
                dups = produce_confluent("control (enable.idempotence=false)", t, 1, 4000, idempotent=False)
            finally:
                info, rep = rep, real
            print(f"== idempotence: control run without idempotence: {len(dups or [])} duplicated numbers, "
                  f"{info.failed} of its checks would fail (information only)", flush=True)
        rep.run("control", control)

    scenario("one-partition", one)
    scenario("four-partitions", four)
    scenario("restart-sigterm", lambda: restart(signal.SIGTERM))
    scenario("restart-sigkill", lambda: restart(signal.SIGKILL))
    scenario("kafka-python", kafka_python_scenario)


def on_term(*_):
    raise SystemExit(143)


signal.signal(signal.SIGTERM, on_term)
os.makedirs(args.work, exist_ok=True)
run_id = str(int(time.time()))
data_dir = os.path.join(args.work, "idem-data")
os.makedirs(data_dir, exist_ok=True)
broker = proxy = None
has_idempotence = False
try:
    for attempt in range(3):
        bport, pport = common.free_port(), common.free_port()
        if bport == pport:
            continue
        try:
            proxy = TcpProxy(pport, ("127.0.0.1", bport), seed=args.seed).start()
        except OSError:
            continue
        broker = Broker(bport, pport, data_dir)
        try:
            broker.start()
            break
        except RuntimeError as e:
            print(f"== idempotence: broker did not start (try {attempt + 1}): {e}", flush=True)
            broker.stop(signal.SIGKILL)
            proxy.stop()
            broker = proxy = None
    if broker is None:
        rep.fail("own broker", "did not start in 3 tries")
    else:
        direct = f"127.0.0.1:{broker.port}"
        via_proxy = f"127.0.0.1:{proxy.listen[1]}"
        rep.ok(f"own broker on {direct}, proxy on {via_proxy}")
        if advertised(direct) != via_proxy:
            rep.fail("`serve --listen A --set advertised.listeners=B`: Metadata advertises B",
                     f"advertises {advertised(direct)}, not the proxy {via_proxy} (--listen overrides "
                     "advertised.listeners); going on with `--set listeners=A --set advertised.listeners=B`")
            broker.stop(signal.SIGTERM)
            broker.listen_flag = False
            broker.start()
        else:
            rep.ok("`serve --listen A --set advertised.listeners=B`: Metadata advertises B")
        if rep.check(advertised(direct) == via_proxy, "clients are sent to the proxy after bootstrap",
                     f"Metadata advertises {advertised(direct)}"):
            rep.run("idempotence", main)
finally:
    if broker is not None:
        rc = broker.stop(signal.SIGTERM)
        rep.check(rc == 0, "own broker: SIGTERM -> exit 0 at the end", f"exit code {rc}")
    if proxy is not None:
        proxy.stop()
rep.finish()
