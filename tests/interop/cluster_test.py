#!/usr/bin/env python3
"""Cluster mode with real clients: 3 voters + 1 broker-only node on loopback ports.

    cluster_test.py --bin path/to/ringbroker --work DIR

Starts its OWN four brokers (data DIR/cluster-N, logs DIR/broker-cluster-N.{out,err}, so
run.sh's panic check sees them), with short heartbeat/session/election timeouts, then:

  brokers        every node lists the 4 brokers (confluent-kafka and kafka-python metadata)
  create         topics created through the broker-only node (confluent-kafka AdminClient) and
                 through a voter (kafka-python KafkaAdminClient): leaders spread over brokers,
                 duplicate -> TOPIC_ALREADY_EXISTS, RF 5 -> INVALID_REPLICATION_FACTOR; a topic
                 is visible from every node with the same id
  admin          CreatePartitions, AlterConfigs (confluent-kafka) and DeleteTopics (kafka-python)
                 through different nodes, seen by every node; deleted partitions' dirs removed
  produce        confluent-kafka acks=all through the broker-only node; kafka-python group
                 consumer through a voter reads every record exactly once, commits, and a second
                 consumer of the group resumes after the commit (coordinator on whichever broker)
  controller     kill -9 of the active controller (from `ringbroker cluster status`): a new one
                 within a few election timeouts; topics can still be created; the dead broker's
                 partitions become leaderless once its session ran out (LEADER_NOT_AVAILABLE)
                 and are led again after it restarts, with all their records
  restart        kill -9 and restart of the broker-only node: its partitions and data are back
  behind         a follower (kill -9) misses records that DeleteRecords then removes on the
                 leader: restarted, it starts over at the leader's log start, re-enters the
                 ISR and, once the leader is killed, leads with the leader's log start and end
  unclean        unclean.leader.election.enable: with its only ISR member down, a restarted
                 out-of-sync replica leads (ISR = [it]); the old leader comes back, truncates
                 its divergent tail by epoch and re-enters the ISR with the new leader's log
  trim           DeleteRecords (confluent-kafka) on an RF 3 partition, then kill -9 of its leader:
                 the new leader's log starts where the old one's did (followers follow the
                 leader's log start; deleted records never come back)
  coordinator    a group commits as it consumes; its coordinator is killed (kill -9) midway and
                 restarted: no acknowledged commit lost, committed offsets never go back
Every wait is bounded; every process is stopped at the end.
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
from common import Reporter  # noqa: E402

from confluent_kafka import ConsumerGroupTopicPartitions, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, ResourceType  # noqa: E402
from kafka import KafkaConsumer  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic as KpNewTopic  # noqa: E402
from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError  # noqa: E402

rep = Reporter("cluster")
ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True)
ap.add_argument("--work", required=True)
args = ap.parse_args()

SESSION_MS = 2000
ELECTION_MS = 300
NODES = [1, 2, 3, 4]
VOTERS = [1, 2, 3]
ports = {n: common.free_port() for n in NODES}
cports = {n: common.free_port() for n in VOTERS}
voters = ",".join(f"{n}@127.0.0.1:{cports[n]}" for n in VOTERS)
procs = {}
starts = {n: 0 for n in NODES}


def start(n):
    starts[n] += 1
    data = os.path.join(args.work, f"cluster-{n}")
    os.makedirs(data, exist_ok=True)
    listeners = f"PLAINTEXT://127.0.0.1:{ports[n]}"
    settings = [
        f"node.id={n}",
        f"controller.quorum.voters={voters}",
        f"controller.quorum.election.timeout.ms={ELECTION_MS}",
        "broker.heartbeat.interval.ms=200",
        f"broker.session.timeout.ms={SESSION_MS}",
        "ringbroker.metrics.listen=none",
    ]
    if n in VOTERS:
        listeners += f",CONTROLLER://127.0.0.1:{cports[n]}"
    else:
        settings.append("process.roles=broker")
    settings.append(f"listeners={listeners}")
    cmd = [args.bin, "serve", "--data-dir", data, "--shards", "1"]
    for s in settings:
        cmd += ["--set", s]
    base = os.path.join(args.work, f"broker-cluster-{n}-{starts[n]}")
    env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info,openraft=warn"))
    procs[n] = subprocess.Popen(
        cmd, stdout=open(base + ".out", "w"), stderr=open(base + ".err", "w"), env=env
    )


def stop_all():
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs.values():
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def bootstrap(n):
    return f"127.0.0.1:{ports[n]}"


def cluster_metadata(n, topic=None, timeout=5):
    admin = AdminClient({"bootstrap.servers": bootstrap(n)})
    return admin.list_topics(topic=topic, timeout=timeout)


def live_brokers(n):
    try:
        return sorted(cluster_metadata(n).brokers)
    except Exception:  # noqa: BLE001 - not up yet
        return None


def cluster_status():
    for n in VOTERS:
        if procs[n].poll() is not None:
            continue
        out = subprocess.run(
            [args.bin, "cluster", "status", "--controller", f"127.0.0.1:{cports[n]}", "--format", "json"],
            capture_output=True, text=True, timeout=10,
        )
        if out.returncode == 0:
            return json.loads(out.stdout)
    return None


def leaders(n, topic):
    t = cluster_metadata(n, topic).topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p: (m.leader, m.error.code() if m.error else 0) for p, m in t.partitions.items()}


def check_brokers():
    for n in NODES:
        got = common.wait_until(lambda: live_brokers(n) == NODES and NODES, 30)
        rep.equal(live_brokers(n), NODES, f"node {n} lists every broker")
    kp = KafkaConsumer(bootstrap_servers=bootstrap(4), request_timeout_ms=10000)
    try:
        kp.topics()
        ids = sorted(b.node_id for b in kp._client.cluster.brokers())
        rep.equal(ids, NODES, "kafka-python sees every broker through the broker-only node")
    finally:
        kp.close()
    return got


def check_create():
    admin = AdminClient({"bootstrap.servers": bootstrap(4)})
    fs = admin.create_topics([NewTopic("c-orders", 8, 1)], operation_timeout=20)
    fs["c-orders"].result(timeout=30)
    rep.ok("confluent-kafka creates a topic through the broker-only node")
    for topic, rf, error in [("c-orders", 1, "TOPIC_ALREADY_EXISTS"), ("c-rf5", 5, "INVALID_REPLICATION_FACTOR")]:
        refused = admin.create_topics([NewTopic(topic, 8, rf)])[topic]
        try:
            refused.result(timeout=30)
            rep.fail(f"{topic} RF {rf} refused", "accepted")
        except Exception as e:  # noqa: BLE001
            rep.check(error in str(e), f"{topic} RF {rf} is {error}", e)
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap(2), request_timeout_ms=30000)
    try:
        kadmin.create_topics([KpNewTopic("kp-orders", 4, 2)])
        rep.ok("kafka-python creates an RF 2 topic through a voter")
        try:
            kadmin.create_topics([KpNewTopic("kp-orders", 4, 1)])
            rep.fail("kafka-python duplicate refused", "accepted")
        except TopicAlreadyExistsError:
            rep.ok("kafka-python duplicate is TopicAlreadyExistsError")
        try:
            kadmin.create_topics([KpNewTopic("kp-rf9", 1, 9)])
            rep.fail("kafka-python RF 9 refused", "accepted")
        except InvalidReplicationFactorError:
            rep.ok("kafka-python RF 9 is InvalidReplicationFactorError")
    finally:
        kadmin.close()
    seen = {}
    for n in NODES:
        t = cluster_metadata(n, "c-orders").topics["c-orders"]
        seen[n] = sorted((p, m.leader, tuple(m.replicas), tuple(m.isrs)) for p, m in t.partitions.items())
    rep.check(len({json.dumps(v) for v in seen.values()}) == 1, "every node tells the same leaders", seen)
    spread = {leader for (_, leader, _, _) in seen[1]}
    rep.check(len(spread) == 4, "8 partitions are led by all 4 brokers", spread)
    kp = cluster_metadata(1, "kp-orders").topics["kp-orders"]
    reps = [(len(m.replicas), sorted(m.isrs) == sorted(m.replicas)) for m in kp.partitions.values()]
    # Both replicas are in sync from the start (a new partition's replicas are all live).
    rep.equal(reps, [(2, True)] * 4, "kp-orders has 2 replicas per partition, both in the ISR")


def check_admin():
    admin = AdminClient({"bootstrap.servers": bootstrap(3)})
    admin.create_topics([NewTopic("grow", 2, 1)])["grow"].result(timeout=30)
    admin.create_partitions([NewPartitions("grow", 5)])["grow"].result(timeout=30)

    def counts():
        return {n: len(cluster_metadata(n, "grow").topics["grow"].partitions) for n in NODES}

    # Each node applies the metadata log on its own time (as in Kafka): bounded wait.
    common.wait_until(lambda: counts() == {n: 5 for n in NODES}, 10)
    rep.equal(counts(), {n: 5 for n in NODES}, "CreatePartitions through a voter: 5 partitions on every node")
    resource = ConfigResource(ResourceType.TOPIC, "grow", set_config={"retention.ms": "123456"})
    admin.alter_configs([resource])[resource].result(timeout=30)
    other = AdminClient({"bootstrap.servers": bootstrap(4)})

    def retention_at_4():
        described = other.describe_configs([ConfigResource(ResourceType.TOPIC, "grow")])
        return list(described.values())[0].result(timeout=30)["retention.ms"].value

    # The other node applies the metadata log on its own time (as in Kafka): bounded wait.
    common.wait_until(lambda: retention_at_4() == "123456", 10)
    rep.equal(retention_at_4(), "123456", "AlterConfigs through one node is described by another")
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap(4), request_timeout_ms=30000)
    try:
        kadmin.delete_topics(["grow"])
        rep.ok("kafka-python deletes a topic through the broker-only node")
    finally:
        kadmin.close()

    def gone_everywhere():
        return all("grow" not in cluster_metadata(n).topics for n in NODES)

    rep.check(common.wait_until(gone_everywhere, 20), "the deleted topic is gone from every node")

    def dirs_gone():
        return not [d for n in NODES for d in os.listdir(os.path.join(args.work, f"cluster-{n}"))
                    if d.startswith("grow-") and not d.endswith("-delete")]

    rep.check(common.wait_until(dirs_gone, 20), "and its partition directories from every data dir")


def produce(topic, n, prefix, via):
    errors = []
    p = Producer({"bootstrap.servers": bootstrap(via), "acks": "all", "linger.ms": 5})

    def report(err, _msg):
        if err is not None:
            errors.append(str(err))

    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"{prefix}-{i}".encode(), on_delivery=report)
        p.poll(0)
    left = p.flush(60)
    return left, errors


def consume_group(topic, group, via, want, timeout_s=40):
    c = KafkaConsumer(
        topic, bootstrap_servers=bootstrap(via), group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=3000, request_timeout_ms=30000,
        session_timeout_ms=10000, heartbeat_interval_ms=1000,
    )
    got = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < want and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=1000).values():
                got.extend(r.value.decode() for r in records)
        c.commit()
    finally:
        c.close()
    return got


def check_produce():
    left, errors = produce("c-orders", 800, "a", via=4)
    rep.check(left == 0 and not errors, "800 acks=all records produced through the broker-only node", (left, errors[:3]))
    got = consume_group("c-orders", "g-cluster", via=1, want=800)
    rep.equal(sorted(got), sorted(f"a-{i}" for i in range(800)), "the group consumer reads each record once")
    left, errors = produce("c-orders", 100, "b", via=2)
    rep.check(left == 0 and not errors, "100 more records through a voter", (left, errors[:3]))
    again = consume_group("c-orders", "g-cluster", via=3, want=100)
    rep.equal(sorted(again), sorted(f"b-{i}" for i in range(100)), "the group resumes after its commit")


def check_controller_loss():
    status = common.wait_until(lambda: (s := cluster_status()) and s.get("leader") and s, 20)
    leader = status and status["leader"]
    if not rep.check(leader in VOTERS, "cluster status names the active controller", status):
        return
    def leader_report():
        out = subprocess.run(
            [args.bin, "cluster", "status", "--controller", f"127.0.0.1:{cports[leader]}", "--format", "json"],
            capture_output=True, text=True, timeout=10,
        )
        return json.loads(out.stdout) if out.returncode == 0 else None

    offsets = common.wait_until(
        lambda: (r := leader_report()) and all(b.get("metadata_offset") is not None for b in r["brokers"]) and r, 10)
    rep.check(offsets and len(offsets["brokers"]) == 4,
              "the active controller reports each broker's applied metadata offset", offsets)
    before = leaders(1, "c-orders")
    procs[leader].kill()
    procs[leader].wait()
    others = [n for n in NODES if n != leader]

    def new_leader():
        s = cluster_status()
        new = s and s.get("leader")
        return new if new and new != leader else None

    rep.check(common.wait_until(new_leader, 10 * ELECTION_MS / 1000 + 5), "a new controller after kill -9 of the old")
    admin = AdminClient({"bootstrap.servers": bootstrap(others[0])})
    try:
        admin.create_topics([NewTopic("after-failover", 2, 1)], operation_timeout=20)["after-failover"].result(timeout=30)
        rep.ok("a topic is created after the failover")
    except Exception as e:  # noqa: BLE001
        rep.fail("a topic is created after the failover", e)
    dead = [p for p, (l, _) in before.items() if l == leader]

    def leaderless():
        now = leaders(others[0], "c-orders")
        return now and all(now[p] == (-1, 5) for p in dead) and now

    rep.check(common.wait_until(leaderless, SESSION_MS / 1000 * 3 + 5),
              f"partitions {dead} of the dead broker {leader} are LEADER_NOT_AVAILABLE", leaders(others[0], "c-orders"))
    start(leader)

    def back():
        now = leaders(others[0], "c-orders")
        return now and all(now[p] == (leader, 0) for p in dead) and now

    rep.check(common.wait_until(back, 40), "its partitions are led again after the restart", leaders(others[0], "c-orders"))
    got = consume_group("c-orders", "g-after-restart", via=leader, want=900)
    rep.equal(len(got), 900, "every record is readable after the restart")


def check_broker_only_restart():
    # A broker-only node starts with no metadata at all: until it has fetched the log past
    # what it copied before, it must not drop its topics (and their data).
    procs[4].kill()
    procs[4].wait()
    start(4)

    def led_by_4_again():
        now = leaders(1, "c-orders")
        return now and sum(1 for l, e in now.values() if l == 4 and e == 0) == 2 and now

    rep.check(common.wait_until(led_by_4_again, 40), "the broker-only node leads its partitions again after kill -9",
              leaders(1, "c-orders"))
    got = consume_group("c-orders", "g-after-broker-restart", via=4, want=900)
    rep.equal(len(got), 900, "and every record is still there")


def isr(n, topic, partition=0):
    try:
        t = cluster_metadata(n, topic).topics.get(topic)
        return sorted(t.partitions[partition].isrs)
    except Exception:  # noqa: BLE001 - a node still starting, a leader still being elected
        return None


def watermarks(via, topic):
    c = Consumer({"bootstrap.servers": bootstrap(via), "group.id": f"{topic}-marks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
    except Exception:  # noqa: BLE001 - the new leader may still be loading
        return None
    finally:
        c.close()


def check_follower_behind_log_start():
    admin = AdminClient({"bootstrap.servers": bootstrap(1)})
    admin.create_topics([NewTopic("c-behind", 1, replica_assignment=[[1, 4]])],
                        operation_timeout=20)["c-behind"].result(timeout=30)
    rep.check(common.wait_until(lambda: isr(1, "c-behind") == [1, 4], 20), "c-behind has ISR [1, 4]",
              isr(1, "c-behind"))
    left, errors = produce("c-behind", 5, "before", via=1)
    rep.check(left == 0 and not errors, "5 records acknowledged by both replicas", errors[:3])
    procs[4].kill()
    procs[4].wait()
    # The leader acknowledges alone once the controller fenced the dead follower.
    left, errors = produce("c-behind", 20, "away", via=1)
    rep.check(left == 0 and not errors, "20 more acknowledged while the follower is down", errors[:3])
    deleted = admin.delete_records([TopicPartition("c-behind", 0, 25)], operation_timeout=20)
    result = list(deleted.values())[0].result(timeout=30)
    rep.equal(getattr(result, "low_watermark", None), 25,
              "DeleteRecords moves the leader's log start past the follower's end (5)")
    start(4)
    rep.check(common.wait_until(lambda: isr(1, "c-behind") == [1, 4], 40),
              "the restarted follower starts over at the leader's log start and re-enters the ISR",
              isr(1, "c-behind"))
    left, errors = produce("c-behind", 5, "after", via=1)
    rep.check(left == 0 and not errors, "5 more acknowledged by both replicas", errors[:3])
    procs[1].kill()
    procs[1].wait()

    def follower_leads():
        now = leaders(4, "c-behind")
        return now and now[0] == (4, 0) and now

    rep.check(common.wait_until(follower_leads, 30), "the follower leads after the leader's kill -9",
              leaders(4, "c-behind"))
    got = common.wait_until(lambda: watermarks(4, "c-behind") == (25, 30) and (25, 30), 20, interval=0.5)
    rep.equal(got or watermarks(4, "c-behind"), (25, 30), "its log starts at 25 and ends at 30")
    records = consume_group("c-behind", "g-behind", via=4, want=5, timeout_s=30)
    rep.equal(sorted(records), [f"after-{i}" for i in range(5)], "and holds the records after the cut")
    start(1)
    rep.check(common.wait_until(lambda: live_brokers(2) == NODES, 30), "the old leader is back",
              live_brokers(2))


def check_unclean_election():
    admin = AdminClient({"bootstrap.servers": bootstrap(2)})
    topic = NewTopic("c-unclean", 1, replica_assignment=[[1, 4]],
                     config={"unclean.leader.election.enable": "true"})
    admin.create_topics([topic], operation_timeout=20)["c-unclean"].result(timeout=30)
    rep.check(common.wait_until(lambda: isr(2, "c-unclean") == [1, 4], 20), "c-unclean has ISR [1, 4]",
              isr(2, "c-unclean"))
    left, errors = produce("c-unclean", 5, "both", via=2)
    rep.check(left == 0 and not errors, "5 records acknowledged by both replicas", errors[:3])
    procs[4].kill()
    procs[4].wait()
    left, errors = produce("c-unclean", 10, "alone", via=2)
    rep.check(left == 0 and not errors, "10 more acknowledged by the leader alone", errors[:3])
    procs[1].kill()
    procs[1].wait()
    start(4)

    def leads(n):
        return lambda: leaders(2, "c-unclean") == {0: (n, 0)}

    rep.check(common.wait_until(leads(4), 30), "the out-of-sync replica leads (unclean election)",
              leaders(2, "c-unclean"))
    rep.equal(common.wait_until(lambda: isr(2, "c-unclean") == [4] and [4], 10) or isr(2, "c-unclean"), [4],
              "and its ISR is itself")
    left, errors = produce("c-unclean", 3, "unclean", via=2)
    rep.check(left == 0 and not errors, "3 records acknowledged by the unclean leader", errors[:3])
    start(1)
    rep.check(common.wait_until(lambda: isr(2, "c-unclean") == [1, 4], 40),
              "the old leader truncates its divergent tail and re-enters the ISR", isr(2, "c-unclean"))
    procs[4].kill()
    procs[4].wait()
    rep.check(common.wait_until(leads(1), 30), "the old leader leads again (clean, from the ISR)",
              leaders(2, "c-unclean"))
    got = common.wait_until(lambda: watermarks(2, "c-unclean") == (0, 8) and (0, 8), 20, interval=0.5)
    rep.equal(got or watermarks(2, "c-unclean"), (0, 8), "its log is the unclean leader's: 5 + 3 records")
    records = consume_group("c-unclean", "g-unclean", via=2, want=8, timeout_s=30)
    rep.equal(sorted(records), sorted([f"both-{i}" for i in range(5)] + [f"unclean-{i}" for i in range(3)]),
              "the records only the old leader had are gone, as unclean election allows")
    start(4)
    rep.check(common.wait_until(lambda: live_brokers(2) == NODES, 30), "every broker is back",
              live_brokers(2))


def check_delete_records():
    admin = AdminClient({"bootstrap.servers": bootstrap(1)})
    admin.create_topics([NewTopic("c-trim", 1, 3)], operation_timeout=20)["c-trim"].result(timeout=30)
    left, errors = produce("c-trim", 20, "trim", via=1)
    rep.check(left == 0 and not errors, "20 records acknowledged at RF 3", errors[:3])
    asked = TopicPartition("c-trim", 0, 10)
    deleted = admin.delete_records([asked], operation_timeout=20)
    result = list(deleted.values())[0].result(timeout=30)
    rep.equal(getattr(result, "low_watermark", None), 10, "DeleteRecords moves the leader's log start to 10")
    old = leaders(1, "c-trim")[0][0]
    # The followers' next fetches (a long poll of at most 500 ms) carry the leader's log start.
    time.sleep(3)
    procs[old].kill()
    procs[old].wait()
    via = next(n for n in NODES if n != old)

    def new_leader():
        now = leaders(via, "c-trim")
        return now and now[0][0] not in (old, -1) and now[0][1] == 0 and now

    rep.check(common.wait_until(new_leader, 30), "a follower leads after the leader's kill -9",
              leaders(via, "c-trim"))

    def marks():
        c = Consumer({"bootstrap.servers": bootstrap(via), "group.id": "c-trim-check"})
        try:
            return c.get_watermark_offsets(TopicPartition("c-trim", 0), timeout=5)
        except Exception:  # noqa: BLE001 - the new leader may still be loading
            return None
        finally:
            c.close()

    got = common.wait_until(lambda: marks() == (10, 20) and (10, 20), 20, interval=0.5)
    rep.equal(got or marks(), (10, 20), "the new leader's log starts at 10 and ends at 20")


def check_coordinator_failover():
    """A group that commits as it consumes; the broker coordinating it is killed (kill -9) midway
    and restarted: no acknowledged commit is lost, and the committed offsets, sampled from
    another connection throughout, never go back (issue 32: offsets lost on coordinator
    failover)."""
    topic, group = "c-commits", "g-commits"
    # Earlier checks leave killed brokers down: every node is up again first.
    for n in NODES:
        if procs[n].poll() is not None:
            start(n)
    rep.check(common.wait_until(lambda: live_brokers(1) == NODES, 30),
              "every broker is back before the group starts", live_brokers(1))
    admin = AdminClient({"bootstrap.servers": ",".join(bootstrap(n) for n in NODES)})
    admin.create_topics([NewTopic(topic, 3, 3)], operation_timeout=20)[topic].result(timeout=30)
    left, errors = produce(topic, 600, "cm", via=1)
    rep.check(left == 0 and not errors, "600 records acknowledged at RF 3", errors[:3])
    parts = [TopicPartition(topic, p) for p in range(3)]
    consumer = Consumer({
        "bootstrap.servers": ",".join(bootstrap(n) for n in NODES), "group.id": group,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
    })
    consumer.subscribe([topic])
    acked = {}        # partition -> the highest offset a commit of it was acknowledged for
    regressions = []  # (partition, seen before, seen after) in the sampled committed offsets
    seen = {}
    sample_errors = []

    def sample(client=admin, timeout=5):
        """The committed offsets now (None if not answered); notes any that went back."""
        try:
            got = client.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, parts)])[group].result(timeout=timeout)
        except Exception as e:  # noqa: BLE001 - the coordinator may be moving
            sample_errors.append(f"{type(e).__name__}: {e}")
            return None
        failed = [f"p{tp.partition}: {tp.error}" for tp in got.topic_partitions if tp.error]
        if failed:
            sample_errors.append("; ".join(failed))
            return None
        now = {}
        for tp in got.topic_partitions:
            # No committed offset (OFFSET_INVALID) is -1 here: also what a lost one looks like.
            offset = max(tp.offset, -1)
            if offset < seen.get(tp.partition, -1):
                regressions.append((tp.partition, seen[tp.partition], offset))
            seen[tp.partition] = max(seen.get(tp.partition, -1), offset)
            now[tp.partition] = offset
        return now

    killed = None
    consumed = 0
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and consumed < 600:
            msgs = consumer.consume(num_messages=20, timeout=1.0)
            msgs = [m for m in msgs if m.error() is None]
            consumed += len(msgs)
            if not msgs:
                continue
            try:
                done = consumer.commit(asynchronous=False)
            except Exception:  # noqa: BLE001 - not acknowledged: it does not count
                done = None
            for tp in done or []:
                if tp.error is None and tp.offset >= 0:
                    acked[tp.partition] = max(acked.get(tp.partition, -1), tp.offset)
            sample()
            if killed is None and consumed >= 200:
                described = admin.describe_consumer_groups([group])[group].result(timeout=10)
                killed = described.coordinator.id
                procs[killed].kill()
                procs[killed].wait()
        sample()
    finally:
        consumer.close()
    rep.check(killed is not None, "the group's coordinator was killed while the group committed", killed)
    if killed is not None:
        start(killed)
        common.wait_until(lambda: live_brokers(1) == NODES, 30)
    # A new admin client for the final reads: the one that sampled throughout may still hold
    # requests queued for the killed coordinator (each sample above gave up after 5 s, its
    # request did not), and a read behind them says nothing about the broker.
    reader = AdminClient({"bootstrap.servers": ",".join(bootstrap(n) for n in NODES)})
    final = common.wait_until(
        lambda: (now := sample(reader, 15)) and len(now) == len(acked) and now, 60,
        interval=0.5) or sample(reader, 15) or {}
    lost = {p: (o, final.get(p)) for p, o in acked.items() if final.get(p, -1) < o}
    rep.check(bool(acked) and not lost,
              f"no acknowledged commit lost across the coordinator's kill -9 ({len(acked)} partitions, "
              f"{consumed} records consumed)",
              {"lost (acked, now)": lost, "acked": acked, "killed": killed,
               "last sample errors": sample_errors[-3:]})
    rep.check(not regressions, "the committed offsets never went back", regressions[:5])


try:
    for n in NODES:
        start(n)
    if check_brokers():
        rep.run("create", check_create)
        rep.run("produce", check_produce)
        rep.run("admin", check_admin)
        rep.run("controller", check_controller_loss)
        rep.run("broker-only restart", check_broker_only_restart)
        rep.run("behind", check_follower_behind_log_start)
        rep.run("unclean", check_unclean_election)
        rep.run("trim", check_delete_records)
        rep.run("coordinator", check_coordinator_failover)
    else:
        rep.fail("cluster formed", "not every node listed the 4 brokers within 30 s")
finally:
    stop_all()
rep.finish()
