#!/usr/bin/env python3
"""kafka-python (pure-Python client) against ringbroker.

    kafka_python_test.py --bootstrap 127.0.0.1:PORT --phase before --state DIR/kp.json
    (restart the broker on the same data dir)
    kafka_python_test.py --bootstrap 127.0.0.1:PORT --phase after --state DIR/kp.json

`before`: admin (create topics with configs, duplicates, describe/alter configs through the
non-incremental AlterConfigs API, create partitions, delete topics, delete records, describe
cluster, each only when ApiVersions lists its key), produce with every codec and acks 0/1/all to
3 partitions with keys, consume with assign() (group_id=None: no coordinator), offsets_for_times,
beginning/end offsets. `after`: everything recorded reads back identical after the restart.
Prints PASS/FAIL/SKIP lines; exits non-zero on any FAIL.
"""

import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import Reporter, State  # noqa: E402

import kafka.errors as Errors  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient  # noqa: E402

logging.basicConfig(level=logging.ERROR)

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
ACKS = [0, 1, "all"]
NPARTS = 3
NMSG = 150
KEYS = [f"key-{i}" for i in range(12)]
T = 15.0

rep = Reporter("kafka_python")
args = common.parse_args(sys.argv[1:])
B = args.bootstrap
state = State(args.state)


def admin():
    return KafkaAdminClient(bootstrap_servers=B, request_timeout_ms=10000, client_id="interop-kp-admin")


def consumer():
    return KafkaConsumer(
        bootstrap_servers=B,
        group_id=None,  # no consumer group: assign() only, nothing committed
        enable_auto_commit=False,
        request_timeout_ms=15000,
        fetch_max_wait_ms=100,
        client_id="interop-kp-consumer",
    )


def tps(topic, nparts):
    return [TopicPartition(topic, p) for p in range(nparts)]


def consume_all(topic, nparts, timeout=20.0, expect=None):
    """Reads every partition from the beginning to its end offset with assign().
    Returns (records, low, high): records as [p, o, key, value, ts, headers]."""
    c = consumer()
    try:
        parts = tps(topic, nparts)
        deadline = time.monotonic() + 10
        while True:
            low = {tp.partition: o for tp, o in c.beginning_offsets(parts, timeout_ms=T * 1000).items()}
            high = {tp.partition: o for tp, o in c.end_offsets(parts, timeout_ms=T * 1000).items()}
            # acks=0 sends complete before the broker has appended them: wait for the count.
            if expect is None or sum(high[p] - low[p] for p in high) >= expect or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        c.assign(parts)
        c.seek_to_beginning(*parts)
        nxt = dict(low)
        recs = []
        deadline = time.monotonic() + timeout
        while any(nxt[p] < high[p] for p in range(nparts)) and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=300, max_records=1000).items():
                for m in msgs:
                    key = m.key.decode() if m.key is not None else None
                    hdrs = [[k, v.decode() if v is not None else None] for k, v in (m.headers or [])]
                    recs.append([m.partition, m.offset, key, m.value.decode(), m.timestamp, hdrs])
                    nxt[m.partition] = max(nxt[m.partition], m.offset + 1)
        missing = {p: (nxt[p], high[p]) for p in range(nparts) if nxt[p] < high[p]}
        if missing:
            raise RuntimeError(f"{topic}: timed out before the end offsets: {missing}")
        recs.sort()
        return recs, low, high
    finally:
        c.close()


def produce(topic, acks, codec, items, partition=None, linger_ms=10):
    """items: [(key, value, ts or None, headers or None)]. Returns [(key, value, partition, offset)]."""
    p = KafkaProducer(
        bootstrap_servers=B,
        acks=acks,
        compression_type=codec,
        linger_ms=linger_ms,
        batch_size=8192,
        enable_idempotence=False,  # InitProducerId is not served
        request_timeout_ms=15000,
        max_block_ms=15000,
        client_id="interop-kp-producer",
    )
    try:
        futs = []
        for key, value, ts, hdrs in items:
            futs.append((key, value, p.send(
                topic,
                key=key.encode() if key is not None else None,
                value=value.encode(),
                partition=partition,
                timestamp_ms=ts,
                headers=hdrs,
            )))
        p.flush(timeout=T)
        out = []
        for key, value, f in futs:
            md = f.get(timeout=T)
            out.append((key, value, md.partition, md.offset))
        return out
    finally:
        p.close(timeout=5)


def topic_partitions(a):
    return {t["name"]: len(t["partitions"]) for t in a.describe_topics() if t["error_code"] == 0}


def topic_config(a, topic):
    r = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    return {k: v["value"] for k, v in r["topic"][topic].items()}


def expect_error(what, err_cls, fn):
    try:
        fn()
        rep.fail(what, "no error")
    except err_cls as e:
        rep.ok(f"{what} ({type(e).__name__})")
    except Exception as e:  # noqa: BLE001
        rep.fail(what, f"{type(e).__name__}: {e}")


# ---------------------------------------------------------------- before the restart

def before():
    prefix = f"kp{args.run_id}"
    state.data = {"prefix": prefix, "topics": {}, "deleted": [], "configs": {}, "times": {}}
    versions = common.api_versions(B)
    has = lambda k: k in versions  # noqa: E731
    a = admin()

    if has(common.API_DESCRIBE_CLUSTER):
        def describe_cluster():
            d = a.describe_cluster()
            rep.check(len(d["brokers"]) == 1 and d["controller_id"] == d["brokers"][0]["broker_id"],
                      "describe_cluster: one broker, which is the controller", common.short(d))
            rep.equal(f"{d['brokers'][0]['host']}:{d['brokers'][0]['port']}", B, "describe_cluster: advertised address")
        rep.run("describe_cluster", describe_cluster)
    else:
        rep.skip("describe_cluster", "DescribeCluster (60) not in ApiVersions")

    codec_topics = {(c, k): f"{prefix}-{c or 'none'}-acks{k}" for c in CODECS for k in ACKS}
    cfg_topic = f"{prefix}-cfg"
    times_topic = f"{prefix}-times"
    new = {t: {"num_partitions": NPARTS, "replication_factor": 1} for t in codec_topics.values()}
    new[cfg_topic] = {"num_partitions": 1, "replication_factor": 1,
                      "configs": {"retention.ms": "86400000", "max.message.bytes": "2000000"}}
    new[times_topic] = {"num_partitions": 2, "replication_factor": 1}

    def create():
        r = a.create_topics(new, timeout_ms=10000)
        errs = {t["name"]: t["error_code"] for t in r["topics"] if t["error_code"]}
        rep.check(not errs, f"create_topics: {len(new)} topics, one with retention.ms/max.message.bytes", common.short(errs))
        parts = common.wait_until(lambda: (lambda tp: tp if all(t in tp for t in new) else None)(topic_partitions(a)), 10)
        parts = parts or topic_partitions(a)
        rep.equal({t: parts.get(t) for t in new}, {t: v["num_partitions"] for t, v in new.items()},
                  "describe_topics: created topics with their partition counts")
        expect_error("create_topics: existing topic refused", Errors.TopicAlreadyExistsError,
                     lambda: a.create_topics({cfg_topic: {"num_partitions": 1, "replication_factor": 1}}))
        expect_error("create_topics: replication factor 3 on one broker refused",
                     Errors.InvalidReplicationFactorError,
                     lambda: a.create_topics({f"{prefix}-rf3": {"num_partitions": 1, "replication_factor": 3}}))
        rep.check(f"{prefix}-rf3" not in topic_partitions(a), "create_topics: refused topic not created", "")
    rep.run("create_topics", create)

    for (codec, acks), topic in codec_topics.items():
        what = f"codec={codec or 'none'} acks={acks}"

        def one(codec=codec, acks=acks, topic=topic, what=what):
            items = []
            for i in range(NMSG):
                hdrs = [("seq", str(i).encode())] if i % 10 == 0 else None
                items.append((KEYS[i % len(KEYS)], common.value_for(f"{codec}-{acks}", i, 40 + (i % 5) * 50), None, hdrs))
            reports = produce(topic, acks, codec, items)
            rep.equal(len(reports), NMSG, f"{what}: every send completed")
            if acks != 0:
                offs = {}
                for _, _, p, o in reports:
                    offs.setdefault(p, []).append(o)
                rep.check(all(v == list(range(len(v))) for v in offs.values()),
                          f"{what}: record metadata offsets dense from 0, in send order per partition", common.short(offs))
            recs, low, high = consume_all(topic, NPARTS, expect=NMSG)
            common.check_partitioned(rep, what, [(r[0], r[1], r[2], r[3]) for r in recs], [v for _, v, _, _ in items], NPARTS)
            want_hdrs = {v: [[k, h.decode()] for k, h in hd] for _, v, _, hd in items if hd}
            rep.equal({r[3]: r[5] for r in recs if r[5]}, want_hdrs, f"{what}: headers round-trip")
            if acks != 0:
                by_value = {v: (p, o) for _, v, p, o in reports}
                rep.check(all(by_value[r[3]] == (r[0], r[1]) for r in recs), f"{what}: consumed offsets match send results", "")
            state.data["topics"][topic] = {"partitions": NPARTS, "records": recs, "low": low, "high": high}
        rep.run(what, one)

    def times():
        t0 = (int(time.time() * 1000) // 1000) * 1000 - 7_200_000
        # partition 0: uncompressed batches of several records, partition 1: one record per send.
        produce(times_topic, "all", None, [(None, common.value_for("t0", i), t0 + i * 1000, None) for i in range(40)],
                partition=0, linger_ms=100)
        for i in range(8):
            produce(times_topic, 1, None, [(None, common.value_for("t1", i), t0 + i * 1000, None)], partition=1)
        recs, low, high = consume_all(times_topic, 2)
        state.data["topics"][times_topic] = {"partitions": 2, "records": recs, "low": low, "high": high}
        rep.check([r[4] for r in recs if r[0] == 0] == [t0 + i * 1000 for i in range(40)],
                  "timestamps: CreateTime preserved", common.short([r[4] for r in recs][:4]))
        queries = [(0, t0, 0), (0, t0 + 12000, 12), (0, t0 + 12001, 13), (0, t0 + 39000, 39), (0, t0 + 39001, None),
                   (1, t0 - 1, 0), (1, t0 + 3000, 3), (1, t0 + 3500, 4), (1, t0 + 8000, None)]
        c = consumer()
        answers, wrong = [], []
        try:
            for p, ts, want in queries:
                r = c.offsets_for_times({TopicPartition(times_topic, p): ts})[TopicPartition(times_topic, p)]
                got = r.offset if r is not None else None
                answers.append([p, ts, got])
                if got != want:
                    wrong.append((p, ts - t0, got, want))
        finally:
            c.close()
        rep.check(not wrong, f"offsets_for_times: {len(queries)} lookups exact (inside batches, past the end -> None)",
                  f"wrong (partition, ts-t0, got, want): {wrong}")
        state.data["times"][times_topic] = answers
    rep.run("timestamps", times)

    if has(common.API_DESCRIBE_CONFIGS):
        def describe():
            cfg = topic_config(a, cfg_topic)
            rep.equal((cfg.get("retention.ms"), cfg.get("max.message.bytes")), ("86400000", "2000000"),
                      "describe_configs: configs given at creation")
            rep.check(cfg.get("cleanup.policy") == "delete" or "segment.bytes" in cfg, "describe_configs: defaults listed",
                      common.short(cfg))
            modified = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, cfg_topic)])["topic"][cfg_topic]
            rep.check({"retention.ms", "max.message.bytes"} <= set(modified) and "segment.ms" not in modified,
                      "describe_configs: sources tell set values from defaults", common.short(modified))
            state.data["configs"][cfg_topic] = {"retention.ms": "86400000", "max.message.bytes": "2000000"}
        rep.run("describe_configs", describe)
    else:
        rep.skip("describe_configs", "DescribeConfigs (32) not in ApiVersions")

    if has(common.API_ALTER_CONFIGS) and has(common.API_DESCRIBE_CONFIGS):
        def alter():
            # Non-incremental AlterConfigs; kafka-python fills in the other modified keys itself,
            # so this must change retention.ms and keep max.message.bytes.
            r = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, cfg_topic, configs={"retention.ms": "172800000"})],
                                incremental=False)
            rep.check("Error" not in str(r["topic"][cfg_topic]) or "NoError" in str(r["topic"][cfg_topic]),
                      "alter_configs: accepted", common.short(r))
            cfg = topic_config(a, cfg_topic)
            rep.equal((cfg.get("retention.ms"), cfg.get("max.message.bytes")), ("172800000", "2000000"),
                      "alter_configs (AlterConfigs): retention.ms changed, max.message.bytes kept")
            # kafka-python reports per-resource errors in the result instead of raising.
            r = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, cfg_topic, configs={"retention.ms": "not-a-number"})],
                                incremental=False, raise_on_unknown=False)
            rep.check("InvalidConfiguration" in str(r["topic"][cfg_topic]), "alter_configs: invalid value refused with INVALID_CONFIG",
                      common.short(r))
            rep.equal(topic_config(a, cfg_topic).get("retention.ms"), "172800000", "alter_configs: refused value not applied")
            state.data["configs"][cfg_topic] = {"retention.ms": "172800000", "max.message.bytes": "2000000"}
        rep.run("alter_configs", alter)
    else:
        rep.skip("alter_configs", "AlterConfigs (33) or DescribeConfigs (32) not in ApiVersions")

    if has(common.API_CREATE_PARTITIONS):
        def grow():
            t = f"{prefix}-grow"
            a.create_topics({t: {"num_partitions": 1, "replication_factor": 1}})
            produce(t, 1, "gzip", [(None, "p0-old", None, None)], partition=0)
            a.create_partitions({t: 3})
            ok = common.wait_until(lambda: topic_partitions(a).get(t) == 3, 10)
            rep.check(ok, "create_partitions: 1 -> 3", f"now {topic_partitions(a).get(t)}")
            r = [produce(t, "all", "lz4", [(None, f"p{p}-new", None, None)], partition=p)[0] for p in (1, 2)]
            rep.equal([x[2:] for x in r], [(1, 0), (2, 0)], "create_partitions: new partitions take writes at offset 0")
            recs, low, high = consume_all(t, 3)
            rep.equal([(x[0], x[1], x[3]) for x in recs], [(0, 0, "p0-old"), (1, 0, "p1-new"), (2, 0, "p2-new")],
                      "create_partitions: old and new partitions read back")
            state.data["topics"][t] = {"partitions": 3, "records": recs, "low": low, "high": high}
        rep.run("create_partitions", grow)
    else:
        rep.skip("create_partitions", "CreatePartitions (37) not in ApiVersions")

    if has(common.API_DELETE_TOPICS):
        def delete():
            t = f"{prefix}-doomed"
            a.create_topics({t: {"num_partitions": 2, "replication_factor": 1}})
            produce(t, 1, "snappy", [(f"k{i}", f"v{i}", None, None) for i in range(20)])
            a.delete_topics([t])
            rep.check(common.wait_until(lambda: t not in topic_partitions(a), 10), "delete_topics: topic gone", "still listed")
            state.data["deleted"].append(t)
            expect_error("delete_topics: unknown topic refused", Errors.UnknownTopicOrPartitionError,
                         lambda: a.delete_topics([f"{prefix}-never-existed"]))
        rep.run("delete_topics", delete)
    else:
        rep.skip("delete_topics", "DeleteTopics (20) not in ApiVersions")

    if has(common.API_DELETE_RECORDS):
        def delete_records():
            t = codec_topics[("gzip", 1)]
            _, low0, high0 = consume_all(t, NPARTS)
            p = max(range(NPARTS), key=lambda q: high0[q])
            cut = high0[p] // 2
            r = a.delete_records({TopicPartition(t, p): cut})
            rep.check(r, "delete_records: answered", common.short(r))
            recs, low, high = consume_all(t, NPARTS)
            rep.equal((low[p], high[p]), (cut, high0[p]), "delete_records: beginning offset moved to the cut")
            expect_error("delete_records: past the end refused", Errors.OffsetOutOfRangeError,
                         lambda: a.delete_records({TopicPartition(t, p): high0[p] + 100}))
            state.data["topics"][t] = {"partitions": NPARTS, "records": recs, "low": low, "high": high}
        rep.run("delete_records", delete_records)
    else:
        rep.skip("delete_records", "DeleteRecords (21) not in ApiVersions")

    if not has(common.API_INIT_PRODUCER_ID):
        rep.known_failure("idempotent producer (kafka-python's default)",
                          "InitProducerId (22) not served; producers run with enable_idempotence=False")
    a.close()
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
    fix = lambda d: {int(k): x for k, x in d.items()}  # noqa: E731
    for t, v in sorted(state.data["topics"].items()):
        def one(t=t, v=v):
            recs, low, high = consume_all(t, v["partitions"])
            rep.check(recs == v["records"], f"after restart: {t}: {len(recs)} records identical",
                      f"got {len(recs)}, want {len(v['records'])}; first diff "
                      f"{common.short(next(((g, w) for g, w in zip(recs, v['records']) if g != w), None))}")
            rep.equal((low, high), (fix(v["low"]), fix(v["high"])), f"after restart: {t}: beginning/end offsets")
        rep.run(f"after restart: {t}", one)
    for t, answers in state.data["times"].items():
        def lookups(t=t, answers=answers):
            c = consumer()
            try:
                got = []
                for p, ts, _ in answers:
                    r = c.offsets_for_times({TopicPartition(t, p): ts})[TopicPartition(t, p)]
                    got.append(r.offset if r is not None else None)
            finally:
                c.close()
            rep.equal(got, [o for _, _, o in answers], f"after restart: {t}: offsets_for_times")
        rep.run("after restart: offsets_for_times", lookups)
    for t, want in state.data["configs"].items():
        rep.run("after restart: configs",
                lambda t=t, want=want: rep.equal({k: topic_config(a, t).get(k) for k in want}, want,
                                                 f"after restart: {t}: configs kept"))

    def append():
        t = next(t for t in state.data["topics"] if t.endswith("-zstd-acksall"))
        high = fix(state.data["topics"][t]["high"])
        r = [produce(t, "all", "zstd", [(None, f"after-{p}", None, None)], partition=p)[0] for p in range(NPARTS)]
        rep.equal([x[2:] for x in r], [(p, high[p]) for p in range(NPARTS)], f"after restart: appends to {t} continue at the old end")
    rep.run("after restart: append", append)
    a.close()


if args.phase == "before":
    rep.run("before", before)
else:
    rep.run("after", after)
rep.finish()
