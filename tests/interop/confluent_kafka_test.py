#!/usr/bin/env python3
"""confluent-kafka (librdkafka) against ringbroker.

    confluent_kafka_test.py --bootstrap 127.0.0.1:PORT --phase before --state DIR/cf.json
    (restart the broker on the same data dir)
    confluent_kafka_test.py --bootstrap 127.0.0.1:PORT --phase after --state DIR/cf.json

`before`: admin (create topics with configs, duplicate/invalid creates, describe/alter configs,
create partitions, delete topics, delete records, list offsets, describe cluster, each only when
ApiVersions lists its key), produce with every codec and acks 0/1/all to 3 partitions with keys,
consume back with assign(), offsets_for_times. It records what it read in the state file.
`after`: everything recorded is read again and must be identical; appends continue at the old end.
Prints PASS/FAIL/SKIP lines; exits non-zero on any FAIL. No consumer groups: assign() only.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import Reporter, State  # noqa: E402

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "all"]
NPARTS = 3
NMSG = 150
KEYS = [f"key-{i}" for i in range(12)]
T = 15.0  # seconds: bound for any single client call

rep = Reporter("confluent_kafka")
args = common.parse_args(sys.argv[1:])
B = args.bootstrap
state = State(args.state)


def admin():
    return AdminClient({"bootstrap.servers": B, "socket.timeout.ms": 10000})


def result(fut, timeout=T):
    return fut.result(timeout=timeout)


def kerr(exc):
    """The KafkaError inside a KafkaException (or None)."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def consumer():
    # group.id is mandatory for librdkafka's consumer even when only assign() is used; no
    # offsets are committed or fetched, so no group coordinator is needed.
    return Consumer(
        {
            "bootstrap.servers": B,
            "group.id": "interop-assign-only",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
            "socket.timeout.ms": 10000,
        }
    )


def watermarks(c, topic, nparts):
    return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=T) for p in range(nparts)}


def consume_all(topic, nparts, timeout=20.0, expect=None):
    """Reads every partition from its start to its high watermark with assign().
    With `expect`, first waits (bounded) until the partitions hold that many records in all:
    acks=0 sends are acknowledged before the broker has appended them.
    Returns (records, low, high): records as [p, o, key, value, ts, headers]."""
    c = consumer()
    try:
        wm = watermarks(c, topic, nparts)
        deadline = time.monotonic() + 10
        while expect is not None and sum(hi - lo for lo, hi in wm.values()) < expect and time.monotonic() < deadline:
            time.sleep(0.1)
            wm = watermarks(c, topic, nparts)
        low = {p: lo for p, (lo, hi) in wm.items()}
        high = {p: hi for p, (lo, hi) in wm.items()}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(nparts)])
        nxt = dict(low)
        recs = []
        errors = []
        deadline = time.monotonic() + timeout
        while any(nxt[p] < high[p] for p in range(nparts)) and time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=0.3):
                if m.error():
                    errors.append(str(m.error()))
                    continue
                p = m.partition()
                key = m.key().decode() if m.key() is not None else None
                hdrs = [[k, v.decode() if v is not None else None] for k, v in (m.headers() or [])]
                recs.append([p, m.offset(), key, m.value().decode(), m.timestamp()[1], hdrs])
                nxt[p] = max(nxt[p], m.offset() + 1)
        if errors:
            raise RuntimeError(f"consume errors on {topic}: {errors[:3]}")
        missing = {p: (nxt[p], high[p]) for p in range(nparts) if nxt[p] < high[p]}
        if missing:
            raise RuntimeError(f"{topic}: timed out before the high watermark: {missing}")
        recs.sort()
        return recs, low, high
    finally:
        c.close()


def produce(topic, acks, codec, items, partition=None, extra=None):
    """items: [(key, value, ts or None, headers or None)], in order. Returns the delivery reports
    [(key, value, partition, offset)] in delivery order; raises on any delivery error."""
    conf = {
        "bootstrap.servers": B,
        "acks": acks,
        "compression.type": codec,
        "linger.ms": 20,
        "batch.num.messages": 40,
        "enable.idempotence": False,  # InitProducerId is not served
        "message.timeout.ms": 15000,
        "socket.timeout.ms": 10000,
    }
    conf.update(extra or {})
    p = Producer(conf)
    reports, errors = [], []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            reports.append((msg.key().decode() if msg.key() else None, msg.value().decode(), msg.partition(), msg.offset()))

    for key, value, ts, hdrs in items:
        kw = {"on_delivery": on_delivery}
        if key is not None:
            kw["key"] = key
        if ts is not None:
            kw["timestamp"] = ts
        if hdrs:
            kw["headers"] = hdrs
        if partition is not None:
            kw["partition"] = partition
        p.produce(topic, value=value, **kw)
        p.poll(0)
    left = p.flush(T)
    if left:
        raise RuntimeError(f"{left} messages still in flight after {T}s")
    if errors:
        raise RuntimeError(f"delivery errors: {errors[:3]}")
    return reports


def create_topics(a, topics, what):
    fs = a.create_topics(topics, operation_timeout=10, request_timeout=T)
    bad = {}
    for t, f in fs.items():
        try:
            result(f)
        except Exception as e:  # noqa: BLE001
            bad[t] = str(e)
    return rep.check(not bad, what, f"errors: {common.short(bad)}")


def topic_partitions(a):
    md = a.list_topics(timeout=T)
    return {t: len(m.partitions) for t, m in md.topics.items() if m.error is None}


def describe_topic_config(a, topic):
    fs = a.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], request_timeout=T)
    (f,) = fs.values()
    return {name: e.value for name, e in result(f).items()}


# ---------------------------------------------------------------- before the restart

def before():
    prefix = f"cf{args.run_id}"
    state.data = {"prefix": prefix, "topics": {}, "deleted": [], "configs": {}, "times": {}}
    versions = common.api_versions(B)
    state.data["api_keys"] = sorted(versions)
    has = lambda k: k in versions  # noqa: E731
    a = admin()

    # --- cluster metadata
    md = a.list_topics(timeout=T)
    rep.check(len(md.brokers) == 1, "metadata: one broker", f"brokers {md.brokers}")
    b = next(iter(md.brokers.values()))
    rep.check(f"{b.host}:{b.port}" == B, "metadata: broker advertises the bootstrap address", f"{b.host}:{b.port}")

    if has(common.API_DESCRIBE_CLUSTER):
        def describe_cluster():
            r = result(a.describe_cluster(request_timeout=T))
            rep.check(len(r.nodes) == 1 and r.controller is not None, "describe_cluster: one node and a controller",
                      f"nodes {r.nodes}, controller {r.controller}")
        rep.run("describe_cluster", describe_cluster)
    else:
        rep.skip("describe_cluster", "DescribeCluster (60) not in ApiVersions")

    # --- create topics
    codec_topics = {(c, k): f"{prefix}-{c}-acks{k}" for c in CODECS for k in ACKS}
    cfg_topic = f"{prefix}-cfg"
    times_topic = f"{prefix}-times"
    new = [NewTopic(t, num_partitions=NPARTS, replication_factor=1) for t in codec_topics.values()]
    new.append(NewTopic(cfg_topic, num_partitions=2, replication_factor=1,
                        config={"retention.ms": "3600000", "segment.bytes": "1048576"}))
    new.append(NewTopic(times_topic, num_partitions=3, replication_factor=1))
    create_topics(a, new, f"create_topics: {len(new)} topics (3 partitions each, one with retention.ms/segment.bytes)")
    parts = common.wait_until(
        lambda: (lambda tp: tp if all(t.topic in tp for t in new) else None)(topic_partitions(a)), 10)
    parts = parts or topic_partitions(a)
    rep.check(all(parts.get(t.topic) == t.num_partitions for t in new), "list_topics: created topics with their partition counts",
              f"{common.short({t.topic: parts.get(t.topic) for t in new})}")

    def duplicate():
        fs = a.create_topics([NewTopic(cfg_topic, num_partitions=1, replication_factor=1)], request_timeout=T)
        try:
            result(fs[cfg_topic])
            rep.fail("create_topics: existing topic refused", "no error")
        except KafkaException as e:
            err = kerr(e)
            rep.check(err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS,
                      "create_topics: existing topic refused with TOPIC_ALREADY_EXISTS", str(e))
    rep.run("create_topics duplicate", duplicate)

    def invalid():
        for t, n, want, what in [
            (f"{prefix}-zero", 0, KafkaError.INVALID_PARTITIONS, "0 partitions -> INVALID_PARTITIONS"),
            (f"{prefix}/bad name", 1, KafkaError.TOPIC_EXCEPTION, "bad name -> INVALID_TOPIC_EXCEPTION"),
        ]:
            try:
                fs = a.create_topics([NewTopic(t, num_partitions=n, replication_factor=1)], request_timeout=T)
                result(fs[t])
                rep.fail(f"create_topics: {what}", "no error")
            except KafkaException as e:
                err = kerr(e)
                rep.check(err is not None and err.code() == want, f"create_topics: {what}", str(e))
            except ValueError as e:  # the client itself refused (librdkafka validates some inputs)
                rep.ok(f"create_topics: {what} (refused by the client: {e})")
    rep.run("create_topics invalid", invalid)

    def validate_only():
        t = f"{prefix}-validate-only"
        fs = a.create_topics([NewTopic(t, num_partitions=2, replication_factor=1)], validate_only=True, request_timeout=T)
        result(fs[t])
        rep.check(t not in topic_partitions(a), "create_topics validate_only: nothing created", "topic exists")
    rep.run("create_topics validate_only", validate_only)

    # --- produce / consume: every codec x acks, keys over 3 partitions
    for (codec, acks), topic in codec_topics.items():
        what = f"codec={codec} acks={acks}"

        def one(codec=codec, acks=acks, topic=topic, what=what):
            items = []
            for i in range(NMSG):
                hdrs = [("seq", str(i).encode()), ("codec", codec.encode())] if i % 10 == 0 else None
                items.append((KEYS[i % len(KEYS)], common.value_for(f"{codec}-{acks}", i, 40 + (i % 7) * 30), None, hdrs))
            reports = produce(topic, acks, codec, items)
            rep.equal(len(reports), NMSG, f"{what}: every message acknowledged")
            if acks != "0":
                offs = {}
                for _, _, p, o in reports:
                    offs.setdefault(p, []).append(o)
                dense = all(sorted(v) == list(range(len(v))) for v in offs.values())
                rep.check(dense, f"{what}: delivery offsets dense from 0 per partition", common.short(offs))
            recs, low, high = consume_all(topic, NPARTS, expect=NMSG)
            common.check_partitioned(rep, what, [(r[0], r[1], r[2], r[3]) for r in recs],
                                     [v for _, v, _, _ in items], NPARTS)
            want_hdrs = {v: [[k, h.decode()] for k, h in hd] for _, v, _, hd in items if hd}
            got_hdrs = {r[3]: r[5] for r in recs if r[5]}
            rep.equal(got_hdrs, want_hdrs, f"{what}: headers round-trip")
            if acks != "0":
                by_value = {v: (p, o) for _, v, p, o in reports}
                rep.check(all(by_value[r[3]] == (r[0], r[1]) for r in recs),
                          f"{what}: consumed offsets match delivery reports", "")
            state.data["topics"][topic] = {"partitions": NPARTS, "records": recs, "low": low, "high": high}
        rep.run(what, one)

    # --- explicit partitions, no keys
    def explicit():
        topic = codec_topics[("lz4", "all")]
        before_recs, _, before_high = consume_all(topic, NPARTS)
        for p in range(NPARTS):
            items = [(None, common.value_for(f"explicit-p{p}", i, 100), None, None) for i in range(20)]
            reports = produce(topic, "all", "lz4", items, partition=p)
            rep.check([r[2] for r in reports] == [p] * 20 and [r[3] for r in reports] == list(range(before_high[p], before_high[p] + 20)),
                      f"explicit partition {p}: 20 messages appended at the old end", common.short(reports[:3]))
        recs, low, high = consume_all(topic, NPARTS)
        rep.check(all(high[p] == before_high[p] + 20 for p in range(NPARTS)), "explicit partitions: high watermarks +20",
                  f"{before_high} -> {high}")
        for p in range(NPARTS):
            tail = [r[3] for r in recs if r[0] == p][-20:]
            rep.equal(tail, [common.value_for(f"explicit-p{p}", i, 100) for i in range(20)], f"explicit partition {p}: read back in order")
        state.data["topics"][topic] = {"partitions": NPARTS, "records": recs, "low": low, "high": high}
    rep.run("explicit partitions", explicit)

    # --- timestamps: offsets_for_times and ListOffsets specs
    def times():
        t0 = (int(time.time() * 1000) // 1000) * 1000 - 3_600_000
        # partition 0: one uncompressed batch of 30 (the lookup must find records inside it),
        # partition 1: one message per batch, partition 2: one zstd batch of 30.
        one_batch = {"linger.ms": 200, "batch.num.messages": 1000}
        produce(times_topic, "all", "none", [(None, common.value_for("ts0", i), t0 + i * 1000, None) for i in range(30)],
                partition=0, extra=one_batch)
        for i in range(10):
            produce(times_topic, "1", "none", [(None, common.value_for("ts1", i), t0 + i * 1000, None)], partition=1)
        produce(times_topic, "all", "zstd", [(None, common.value_for("ts2", i), t0 + i * 1000, None) for i in range(30)],
                partition=2, extra=one_batch)
        recs, low, high = consume_all(times_topic, 3)
        state.data["topics"][times_topic] = {"partitions": 3, "records": recs, "low": low, "high": high}
        rep.check(all([r[4] for r in recs if r[0] == p] == [t0 + i * 1000 for i in range(n)] for p, n in [(0, 30), (1, 10), (2, 30)]),
                  "timestamps: CreateTime of every record preserved", common.short([r[4] for r in recs][:5]))
        queries = {
            0: [(t0, 0), (t0 + 7000, 7), (t0 + 7500, 8), (t0 + 29000, 29), (t0 + 29001, -1), (t0 - 5000, 0)],
            1: [(t0 + 4000, 4), (t0 + 4500, 5), (t0 + 10000, -1)],
            2: [(t0, 0), (t0 + 7000, 7), (t0 + 29000, 29), (t0 + 29001, -1)],
        }
        answers = []
        c = consumer()
        try:
            for p, qs in queries.items():
                wrong, batch_base = [], []
                for ts, want in qs:
                    # One lookup per call: librdkafka merges lookups of the same partition.
                    (g,) = c.offsets_for_times([TopicPartition(times_topic, p, ts)], timeout=T)
                    answers.append([p, ts, g.offset])
                    if g.offset == want:
                        continue
                    if p == 2 and want >= 0 and 0 <= g.offset < want:
                        batch_base.append((ts - t0, g.offset, want))
                    else:
                        wrong.append((ts - t0, g.offset, want))
                kind = {0: "one uncompressed batch", 1: "one record per batch", 2: "one zstd batch"}[p]
                rep.check(not wrong, f"offsets_for_times: partition {p} ({kind}): {len(qs)} lookups exact",
                          f"wrong (ts-t0, got, want): {wrong}")
                if batch_base:
                    rep.known_failure(f"offsets_for_times inside a compressed batch ({len(batch_base)} lookups)",
                                      "the broker answers with the batch's base offset, not the first record >= ts "
                                      f"(documented in PartitionLog::offset_for_timestamp): (ts-t0, got, want) {batch_base}")
        finally:
            c.close()
        state.data["times"][times_topic] = answers
        specs = {
            "earliest": (OffsetSpec.earliest(), {0: 0, 1: 0, 2: 0}),
            "latest": (OffsetSpec.latest(), {0: 30, 1: 10, 2: 30}),
            "max_timestamp": (OffsetSpec.max_timestamp(), {0: 29, 1: 9, 2: 29}),
        }
        for name, (spec, want) in specs.items():
            fs = a.list_offsets({TopicPartition(times_topic, p): spec for p in (0, 1, 2)}, request_timeout=T)
            got = {tp.partition: result(f).offset for tp, f in fs.items()}
            rep.equal(got, want, f"list_offsets {name}")
    rep.run("timestamps", times)

    # --- message size limits and LogAppendTime topics
    def sizes():
        t = f"{prefix}-big"
        create_topics(a, [NewTopic(t, num_partitions=1, replication_factor=1)], "large messages: topic created")
        p = Producer({"bootstrap.servers": B, "message.max.bytes": 5_000_000, "enable.idempotence": False,
                      "message.timeout.ms": 15000, "linger.ms": 0})
        res = []
        for size, fill in ((900_000, b"a"), (1_500_000, b"b"), (10, b"c")):
            p.produce(t, fill * size, on_delivery=lambda err, msg: res.append((len(msg.value()), err.code() if err else None)))
            p.flush(T)
        rep.equal(res, [(900_000, None), (1_500_000, KafkaError.MSG_SIZE_TOO_LARGE), (10, None)],
                  "produce: 900 KB accepted, 1.5 MB (> max.message.bytes) refused with MSG_SIZE_TOO_LARGE")
        # A fetch limit below the message size still returns it (the first batch always comes).
        c = Consumer({"bootstrap.servers": B, "group.id": "interop-assign-only", "enable.auto.commit": False,
                      "fetch.max.bytes": 100_000, "message.max.bytes": 100_000, "max.partition.fetch.bytes": 100_000})
        try:
            c.assign([TopicPartition(t, 0, OFFSET_BEGINNING)])
            got, deadline = [], time.monotonic() + T
            while len(got) < 2 and time.monotonic() < deadline:
                m = c.poll(0.3)
                if m is not None and not m.error():
                    got.append((m.offset(), len(m.value())))
        finally:
            c.close()
        rep.equal(got, [(0, 900_000), (1, 10)], "fetch: a 900 KB message comes through a 100 KB fetch limit")

        t = f"{prefix}-logappend"
        create_topics(a, [NewTopic(t, num_partitions=1, replication_factor=1, config={"message.timestamp.type": "LogAppendTime"})],
                      "LogAppendTime: topic created")
        old = int(time.time() * 1000) - 86_400_000
        before_ms = int(time.time() * 1000)
        produce(t, "1", "none", [(None, f"lat-{i}", old, None) for i in range(3)], partition=0)
        produce(t, "1", "zstd", [(None, f"lat-{i}", old, None) for i in range(3, 6)], partition=0)
        after_ms = int(time.time() * 1000)
        c = consumer()
        try:
            c.assign([TopicPartition(t, 0, OFFSET_BEGINNING)])
            got, deadline = [], time.monotonic() + T
            while len(got) < 6 and time.monotonic() < deadline:
                for m in c.consume(100, 0.3):
                    if not m.error():
                        got.append(m.timestamp())
        finally:
            c.close()
        rep.check(len(got) == 6 and all(tt == TIMESTAMP_LOG_APPEND_TIME and before_ms - 1000 <= ts <= after_ms + 1000 for tt, ts in got),
                  "LogAppendTime: broker time replaces the producer's (plain and zstd batches)", common.short(got))
        recs, low, high = consume_all(t, 1)
        state.data["topics"][t] = {"partitions": 1, "records": recs, "low": low, "high": high}
    rep.run("sizes and LogAppendTime", sizes)

    # --- configs
    if has(common.API_DESCRIBE_CONFIGS):
        def describe():
            cfg = describe_topic_config(a, cfg_topic)
            rep.equal((cfg.get("retention.ms"), cfg.get("segment.bytes")), ("3600000", "1048576"),
                      "describe_configs: retention.ms/segment.bytes as created")
            rep.check("cleanup.policy" in cfg or "max.message.bytes" in cfg, "describe_configs: defaults listed too",
                      common.short(sorted(cfg)))
            state.data["configs"][cfg_topic] = {"retention.ms": "3600000", "segment.bytes": "1048576"}
            fs = a.describe_configs([ConfigResource(ResourceType.BROKER, "0")], request_timeout=T)
            bcfg = result(next(iter(fs.values())))
            rep.check(len(bcfg) > 0, "describe_configs: broker resource", f"{len(bcfg)} entries")
        rep.run("describe_configs", describe)
    else:
        rep.skip("describe_configs", "DescribeConfigs (32) not in ApiVersions")

    if has(common.API_INCREMENTAL_ALTER_CONFIGS) and has(common.API_DESCRIBE_CONFIGS):
        def incremental():
            res = ConfigResource(ResourceType.TOPIC, cfg_topic, incremental_configs=[
                ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("retention.bytes", "10000000", incremental_operation=AlterConfigOpType.SET),
            ])
            for f in a.incremental_alter_configs([res], request_timeout=T).values():
                result(f)
            cfg = describe_topic_config(a, cfg_topic)
            rep.equal((cfg.get("retention.ms"), cfg.get("retention.bytes"), cfg.get("segment.bytes")),
                      ("7200000", "10000000", "1048576"),
                      "incremental_alter_configs: SET retention.ms/retention.bytes, segment.bytes kept")
            state.data["configs"][cfg_topic] = {"retention.ms": "7200000", "retention.bytes": "10000000", "segment.bytes": "1048576"}
        rep.run("incremental_alter_configs", incremental)
    else:
        rep.skip("incremental_alter_configs", "IncrementalAlterConfigs (44) or DescribeConfigs (32) not in ApiVersions")

    if has(common.API_CREATE_PARTITIONS):
        def grow():
            t = f"{prefix}-grow"
            create_topics(a, [NewTopic(t, num_partitions=2, replication_factor=1)], "create_partitions: topic with 2 partitions")
            for f in a.create_partitions([NewPartitions(t, 4)], request_timeout=T).values():
                result(f)
            n = common.wait_until(lambda: topic_partitions(a).get(t) == 4, 10)
            rep.check(n, "create_partitions: 2 -> 4 partitions", f"now {topic_partitions(a).get(t)}")
            reports = produce(t, "all", "snappy", [(None, f"grow-{i}", None, None) for i in range(5)], partition=3)
            rep.equal([r[2:] for r in reports], [(3, i) for i in range(5)], "create_partitions: new partition 3 takes writes")
            recs, low, high = consume_all(t, 4)
            rep.equal([r[3] for r in recs], [f"grow-{i}" for i in range(5)], "create_partitions: new partition read back")
            state.data["topics"][t] = {"partitions": 4, "records": recs, "low": low, "high": high}
            try:
                for f in a.create_partitions([NewPartitions(t, 3)], request_timeout=T).values():
                    result(f)
                rep.fail("create_partitions: shrinking refused", "no error")
            except KafkaException as e:
                rep.check(kerr(e) is not None and kerr(e).code() == KafkaError.INVALID_PARTITIONS,
                          "create_partitions: shrinking refused with INVALID_PARTITIONS", str(e))
        rep.run("create_partitions", grow)
    else:
        rep.skip("create_partitions", "CreatePartitions (37) not in ApiVersions")

    if has(common.API_DELETE_TOPICS):
        def delete():
            t = f"{prefix}-doomed"
            create_topics(a, [NewTopic(t, num_partitions=3, replication_factor=1)], "delete_topics: topic to delete created")
            produce(t, "1", "gzip", [(f"k{i}", f"doomed-{i}", None, None) for i in range(30)])
            for f in a.delete_topics([t], operation_timeout=10, request_timeout=T).values():
                result(f)
            gone = common.wait_until(lambda: t not in topic_partitions(a), 10)
            rep.check(gone, "delete_topics: topic gone from metadata", "still listed")
            state.data["deleted"].append(t)
            # Recreate the same name: it must start empty.
            t2 = f"{prefix}-reborn"
            create_topics(a, [NewTopic(t2, num_partitions=2, replication_factor=1)], "delete_topics: second topic created")
            produce(t2, "1", "none", [(None, "old", None, None)], partition=0)
            for f in a.delete_topics([t2], operation_timeout=10, request_timeout=T).values():
                result(f)
            common.wait_until(lambda: t2 not in topic_partitions(a), 10)
            create_topics(a, [NewTopic(t2, num_partitions=2, replication_factor=1)], "delete_topics: same name recreated")
            c = consumer()
            try:
                wm = watermarks(c, t2, 2)
            finally:
                c.close()
            rep.equal(wm, {0: (0, 0), 1: (0, 0)}, "delete_topics: recreated topic starts empty")
            reports = produce(t2, "all", "none", [(None, "new", None, None)], partition=0)
            rep.equal(reports[0][2:], (0, 0), "delete_topics: recreated topic appends at offset 0")
            recs, low, high = consume_all(t2, 2)
            rep.equal([r[3] for r in recs], ["new"], "delete_topics: recreated topic holds only new data")
            state.data["topics"][t2] = {"partitions": 2, "records": recs, "low": low, "high": high}
            try:
                fs = a.delete_topics([f"{prefix}-never-existed"], request_timeout=T)
                result(next(iter(fs.values())))
                rep.fail("delete_topics: unknown topic refused", "no error")
            except KafkaException as e:
                rep.check(kerr(e) is not None and kerr(e).code() == KafkaError.UNKNOWN_TOPIC_OR_PART,
                          "delete_topics: unknown topic -> UNKNOWN_TOPIC_OR_PARTITION", str(e))
        rep.run("delete_topics", delete)
    else:
        rep.skip("delete_topics", "DeleteTopics (20) not in ApiVersions")

    if has(common.API_DELETE_RECORDS):
        def delete_records():
            t = codec_topics[("zstd", "1")]
            _, low0, high0 = consume_all(t, NPARTS)
            cut = min(5, high0[0])
            fs = a.delete_records([TopicPartition(t, 0, cut)], request_timeout=T)
            r = result(next(iter(fs.values())))
            rep.equal(r.low_watermark, cut, "delete_records: low watermark returned")
            recs, low, high = consume_all(t, NPARTS)
            rep.equal((low[0], high[0]), (cut, high0[0]), "delete_records: watermarks after")
            rep.check(min(r[1] for r in recs if r[0] == 0) == cut, "delete_records: reading from the beginning starts at the cut", "")
            state.data["topics"][t] = {"partitions": NPARTS, "records": recs, "low": low, "high": high}
        rep.run("delete_records", delete_records)
    else:
        rep.skip("delete_records", "DeleteRecords (21) not in ApiVersions")

    if not has(common.API_INIT_PRODUCER_ID):
        rep.known_failure("idempotent producer", "InitProducerId (22) not served; producers run with enable.idempotence=false")

    state.save()


# ---------------------------------------------------------------- after the restart

def after():
    if not state.data.get("topics"):
        rep.fail("state", f"no expectations in {args.state} (did the before phase run?)")
        return
    a = admin()
    parts = topic_partitions(a)
    want = {t: v["partitions"] for t, v in state.data["topics"].items()}
    rep.equal({t: parts.get(t) for t in want}, want, f"after restart: {len(want)} topics with their partition counts")
    for t in state.data["deleted"]:
        rep.check(t not in parts, f"after restart: deleted topic {t} stays deleted", "listed again")

    for t, v in sorted(state.data["topics"].items()):
        def one(t=t, v=v):
            recs, low, high = consume_all(t, v["partitions"])
            fix = lambda d: {int(k): x for k, x in d.items()}  # noqa: E731 (JSON keys are strings)
            rep.check(recs == v["records"], f"after restart: {t}: {len(recs)} records identical (offsets, keys, values, timestamps, headers)",
                      f"got {len(recs)}, want {len(v['records'])}; first diff "
                      f"{common.short(next(((g, w) for g, w in zip(recs, v['records']) if g != w), None))}")
            rep.equal((low, high), (fix(v["low"]), fix(v["high"])), f"after restart: {t}: watermarks")
        rep.run(f"after restart: {t}", one)

    for t, answers in state.data["times"].items():
        def lookups(t=t, answers=answers):
            c = consumer()
            try:
                got = [c.offsets_for_times([TopicPartition(t, p, ts)], timeout=T)[0].offset for p, ts, _ in answers]
            finally:
                c.close()
            rep.equal(got, [o for _, _, o in answers], f"after restart: {t}: {len(answers)} offsets_for_times lookups")
        rep.run("after restart: offsets_for_times", lookups)

    if state.data["configs"]:
        def configs():
            for t, want in state.data["configs"].items():
                cfg = describe_topic_config(a, t)
                rep.equal({k: cfg.get(k) for k in want}, want, f"after restart: {t}: topic configs kept")
        rep.run("after restart: configs", configs)

    def append():
        t = next(t for t in state.data["topics"] if t.endswith("-none-acksall"))
        high = {int(k): x for k, x in state.data["topics"][t]["high"].items()}
        for p in range(NPARTS):
            r = produce(t, "all", "none", [(None, f"after-restart-{p}", None, None)], partition=p)
            rep.equal(r[0][2:], (p, high[p]), f"after restart: append to {t}/{p} continues at the old end")
    rep.run("after restart: append", append)


if args.phase == "before":
    rep.run("before", before)
else:
    rep.run("after", after)
rep.finish()
