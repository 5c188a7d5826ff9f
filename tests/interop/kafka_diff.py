#!/usr/bin/env python3
"""Differential test: the same scripted requests against ringbroker and against Apache Kafka.

    kafka_diff.py --bin RINGBROKER --work DIR        starts Kafka 4.1.1 (tests/kafka/kafka.sh, one
                                                     node) and a ringbroker, runs both scripts
                                                     against each, stops both, compares
    kafka_diff.py --compare DIR                      compares the outputs a run left in DIR again

What runs against each broker (a fresh one, nothing else on it), both in parallel:

- the Java client's scenarios (tests/interop/java, Main --phase all): every codec, a consumer
  group through a rebalance, an idempotent producer, the admin calls (topics, configs of a topic
  and of the broker, groups, DeleteRecords, ListOffsets); it writes each answer as a normalized
  `key=value` line (error class, config value/source/readOnly/type, offsets, partition and member
  counts, group states; no topic ids, node ids, ports, producer ids or wall-clock timestamps);
- Kafka's command-line tools (kafka-topics, kafka-configs, kafka-consumer-groups,
  kafka-get-offsets, kafka-log-dirs, kafka-delete-records: the commands of
  tests/interop/kafka_tools.script, run by ToolRunner in one JVM): each command's exit code and
  what it printed, normalized below (addresses, node ids, topic ids, member ids, log dir paths,
  log timestamps and stack frames replaced or dropped, runs of blanks made one).

Every key is compared between the two. A difference fails unless an ALLOWLIST entry below
explains it: an entry names the keys it covers (a glob) and either rewrites what both brokers
printed (a regex and its replacement) or, without a regex, takes the key's whole value; a
difference that only an entry made disappear prints a KNOWN-FAIL line with the entry's reason.
docs/kafka-apis.md ("Differences from Apache Kafka") lists the same differences for readers.
Prints PASS/FAIL/KNOWN-FAIL lines (run.sh counts them); exits non-zero on any FAIL.
"""

import argparse
import difflib
import fnmatch
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KAFKA_SH = os.path.join(ROOT, "tests", "kafka", "kafka.sh")
JAVA_DIR = os.path.join(HERE, "java")
SCRIPT = os.path.join(HERE, "kafka_tools.script")
SIDES = ("kafka", "ringbroker")

# ----------------------------------------------------------------------------------- allowlist
# (key glob, regex or None, replacement, reason). The regex (re.M) is applied to both brokers'
# values of the matching keys before they are compared; None takes the whole value. Keep each
# entry as narrow as the difference, and say why it is not a bug (or which issue will fix it).
ALLOWLIST = [
    # --- Kafka 4.0 changes ringbroker does not follow (it serves what Kafka 3.9 served) ---
    ("configs.topic.initial.message.downconversion.enable", None, None,
     "ringbroker lists message.downconversion.enable, which Kafka 4.0 removed with Fetch v0-v3 "
     "(KIP-724); ringbroker still down-converts for Fetch v0-v3 (Debian's Sarama 1.22)"),
    ("configs.topic.initial.message.format.version", None, None,
     "ringbroker lists message.format.version (3.0-IV1, ignored), which Kafka 4.0 removed (KIP-724)"),
    ("configs.topic.initial.message.timestamp.difference.max.ms", None, None,
     "ringbroker lists message.timestamp.difference.max.ms, deprecated by KIP-937 and removed in Kafka 4.0"),
    ("tool.configs-topic-all.output", r"^ ?message\.(downconversion\.enable|format\.version|timestamp\.difference\.max\.ms)=.*\n?", "",
     "the three topic configs Kafka 4.0 removed (KIP-724, KIP-937), as above"),
    ("configs.topic.initial.message.timestamp.after.max.ms", None, None,
     "Kafka 4.0 changed the default of message.timestamp.after.max.ms to 1 hour (KIP-1066: records "
     "more than an hour in the future are refused); ringbroker keeps 3.9's default, Long.MAX_VALUE"),
    ("tool.configs-topic-all.output", r"message\.timestamp\.after\.max\.ms=\d+", "message.timestamp.after.max.ms=DEFAULT",
     "message.timestamp.after.max.ms default (and its broker synonym's): Kafka 4.0's 1 hour vs 3.9's "
     "Long.MAX_VALUE, as above"),
    ("groups.describe.deleted", None, None,
     "DescribeGroups of a group that does not exist: Kafka 4.0's v6 answers GROUP_ID_NOT_FOUND "
     "(KIP-1043); ringbroker serves v0-v5, which answer the group with state Dead, as Kafka 3.9 did"),
    ("tool.groups-describe-unknown.output", r"(?s)\A.*\Z", "<unknown group>",
     "the same: kafka-consumer-groups prints 'Consumer group ... does not exist' for v5's Dead group, "
     "GroupIdNotFoundException for v6's error"),
    ("topics.describe.p*", r"elr=\w+ lastKnownElr=\w+", "elr=? lastKnownElr=?",
     "no DescribeTopicPartitions (KIP-966, Kafka 3.8): the admin client falls back to Metadata, "
     "which has no eligible leader replicas (null instead of an empty list)"),
    ("tool.topics-describe*.output", r"Elr: (N/A )?LastKnownElr:( N/A)?", "Elr: ? LastKnownElr: ?",
     "the same through kafka-topics: N/A without DescribeTopicPartitions"),
    # --- the test's Kafka: kafka-storage format in 4.x writes a cluster-level min.insync.replicas ---
    ("configs.*min.insync.replicas", r"source=DYNAMIC_DEFAULT_BROKER_CONFIG", "source=DEFAULT_CONFIG",
     "Kafka 4's kafka-storage format writes min.insync.replicas=1 as a cluster-wide dynamic config "
     "(for ELR, KIP-966), so Kafka reports its source DYNAMIC_DEFAULT_BROKER_CONFIG; the value is the default"),
    ("tool.*.output", r"^ ?min\.insync\.replicas=1 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:min\.insync\.replicas=1(, )?", " min.insync.replicas=1 sensitive=false synonyms={",
     "the same cluster-wide min.insync.replicas=1 of Kafka 4's format, in a topic's synonyms"),
    ("tool.configs-broker-*.output", r"^ ?min\.insync\.replicas=1 sensitive=false synonyms=\{\}\n?", "",
     "the same, in the list of cluster-wide dynamic configs"),
    ("tool.topics-describe*.output", r"Configs: min\.insync\.replicas=1,?", "Configs: ",
     "the same, as kafka-topics lists it among a topic's non-default configs"),
    # --- broker configs: names and defaults ---
    ("configs.broker.log.retention.ms", None, None,
     "Kafka's log.retention.ms has no default (null: log.retention.hours=168 carries it); "
     "ringbroker has no log.retention.hours/minutes and reports the effective 604800000"),
    ("configs.broker.after_default_delete.log.retention.ms", None, None,
     "the same null default, once the cluster-wide override is deleted"),
    ("configs.topic.synonyms.retention.ms", None, None,
     "the same: Kafka lists no DEFAULT_CONFIG synonym for a null default"),
    ("tool.configs-*.output", r", DEFAULT_CONFIG:log\.(retention\.ms|roll\.ms|roll\.jitter\.ms|flush\.interval\.ms)=\d+\}", "}",
     "Kafka's log.retention.ms, log.roll.ms, log.roll.jitter.ms and log.flush.interval.ms default to null "
     "(the *.hours / scheduler settings carry them), so it lists no DEFAULT_CONFIG synonym; ringbroker has "
     "no *.hours keys and lists the effective default"),
    ("tool.configs-*.output", r"synonyms=\{DEFAULT_CONFIG:log\.(retention\.ms|roll\.ms|roll\.jitter\.ms|flush\.interval\.ms)=\d+\}", "synonyms={}",
     "the same null defaults, where they are the only synonym"),
    ("configs.broker.log.retention.hours", None, None,
     "ringbroker has no log.retention.hours (log.retention.ms only)"),
    ("configs.broker.log.roll.hours", None, None,
     "ringbroker has no log.roll.hours (log.roll.ms only)"),
    ("configs.broker.delete.topic.enable", None, None,
     "ringbroker has no delete.topic.enable (topic deletion is always on, Kafka's default)"),
    ("configs.broker.transactional.id.expiration.ms", None, None,
     "ringbroker has no transactions yet (issue 33), so no transactional.id.expiration.ms"),
    ("configs.broker.producer.id.expiration.ms", r"type=(INT|LONG)", "type=?",
     "Kafka declares producer.id.expiration.ms an INT; ringbroker takes a long (its tests keep "
     "producers for a hundred years, 3153600000000 ms, more than an INT holds)"),
    ("configs.broker.compression.type", r"readOnly=(true|false)", "readOnly=?",
     "not a dynamic broker config in ringbroker (read-only; Kafka updates it cluster-wide at runtime)"),
    ("configs.broker.log.cleanup.policy", r"readOnly=(true|false)", "readOnly=?",
     "not a dynamic broker config in ringbroker, as compression.type"),
    ("configs.broker.log.local.retention.ms", r"readOnly=(true|false)", "readOnly=?",
     "not a dynamic broker config in ringbroker (no tiered storage), as compression.type"),
    ("configs.broker.min.insync.replicas", r"readOnly=(true|false)", "readOnly=?",
     "not a dynamic broker config in ringbroker, as compression.type"),
    ("configs.broker.unclean.leader.election.enable", r"readOnly=(true|false)", "readOnly=?",
     "not a dynamic broker config in ringbroker, as compression.type"),
    ("configs.broker.alter.unknown_key*", None, None,
     "Kafka stores a broker config of any name (plugins read their own); ringbroker answers "
     "INVALID_CONFIG for a name it does not know"),
    ("tool.configs-broker-readonly.output", r"Set\((log\.dirs)\)", r"\1",
     "the message names the configs as Kafka's Scala Set prints them, Set(log.dirs); ringbroker lists them"),
    # --- answers ringbroker leaves out ---
    ("topics.create.answer.*", None, None,
     "CreateTopics v5+ answers carry the new topic's configs in Kafka; ringbroker's answer has none "
     "(an empty list: clients then describe the topic, as librdkafka and franz-go do)"),
    ("groups.offsets", r"epoch=-?\d+", "epoch=?",
     "the leader epoch a consumer commits comes from the batches it read: Kafka stamps "
     "partitionLeaderEpoch 0 on a single node, ringbroker stamps only in cluster mode (-1 here)"),
]

# ----------------------------------------------------------------------------------- running


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def log(msg):
    print(f"== kafka-diff: {msg}", flush=True)


class Run:
    """The processes of one run; stop() ends every one of them (also after a failure)."""

    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.kafka_dir = os.path.join(self.work, "kafka")
        self.kafka_started = False
        self.broker = None
        self.children = []
        self.interrupted = False

    def java_cp(self):
        cpfile = os.path.join(JAVA_DIR, "target", "classpath.txt")
        if not os.path.exists(cpfile):
            log("building tests/interop/java (mvn package)")
            subprocess.run(["mvn", "-q", "-B", "package"], cwd=JAVA_DIR, check=True, timeout=600)
        with open(cpfile) as f:
            return os.path.join(JAVA_DIR, "target", "classes") + ":" + f.read().strip()

    def start_kafka(self):
        t0 = time.monotonic()
        # Set first: a start interrupted (SIGTERM, the timeout) leaves JVMs that kafka.sh started
        # with setsid; `kafka.sh stop` finds them by their pid files.
        self.kafka_started = True
        out = subprocess.run(["bash", KAFKA_SH, "start", self.kafka_dir], capture_output=True, text=True,
                             timeout=240)
        if out.returncode != 0:
            raise RuntimeError(f"kafka.sh start failed: {out.stderr[-800:]}")
        log(f"Kafka {out.stdout.strip()} up in {time.monotonic() - t0:.1f}s")
        return out.stdout.strip()

    def start_ringbroker(self):
        port = free_port()
        data = os.path.join(self.work, "rb-data")
        os.makedirs(data, exist_ok=True)
        # Beside run.sh's own broker logs: its panic check reads $WORK/broker*.err.
        base = os.path.join(os.path.dirname(self.work), "broker-kafka-diff")
        # As tests/kafka/kafka.sh configures Kafka: no initial rebalance delay.
        cmd = [self.args.bin, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data, "--shards", "2",
               "--set", "ringbroker.metrics.listen=none", "--set", "group.initial.rebalance.delay.ms=0"]
        with open(base + ".out", "w") as o, open(base + ".err", "w") as e:
            self.broker = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.broker.poll() is not None:
                raise RuntimeError(f"ringbroker exited {self.broker.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return f"127.0.0.1:{port}"
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("ringbroker not listening after 20 s")

    def spawn(self, argv, logname):
        f = open(os.path.join(self.work, logname), "w")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.children.append(p)
        return p, f

    def wait_all(self, procs, timeout, what):
        deadline = time.monotonic() + timeout
        rcs = []
        for p, f in procs:
            try:
                rcs.append(p.wait(max(1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
                rcs.append(None)
                print(f"FAIL kafka-diff: {what} did not finish in {timeout}s (killed)", flush=True)
            f.close()
        return rcs

    def stop(self):
        for p in self.children:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        if self.broker is not None and self.broker.returncode is None:
            # Interrupted by GNU timeout or ^C, which signal the whole process group, the broker has
            # had its SIGTERM already (a second one makes it exit at once, with 1): a moment first.
            if self.interrupted:
                try:
                    self.broker.wait(5)
                except subprocess.TimeoutExpired:
                    pass
            if self.broker.poll() is None:
                self.broker.send_signal(signal.SIGTERM)
            try:
                rc = self.broker.wait(20)
                print(("PASS" if rc == 0 else "FAIL") + f" kafka-diff: ringbroker SIGTERM -> exit {rc}", flush=True)
            except subprocess.TimeoutExpired:
                self.broker.kill()
                self.broker.wait(10)
                print("FAIL kafka-diff: ringbroker still running 20 s after SIGTERM (killed)", flush=True)
        if self.kafka_started:
            subprocess.run(["bash", KAFKA_SH, "stop", self.kafka_dir], timeout=60)
            self.kafka_started = False

    def run(self):
        kafka_home = subprocess.run(["bash", KAFKA_SH, "install"], capture_output=True, text=True, check=True,
                                    timeout=600).stdout.strip()
        cp = self.java_cp()
        boot = {"ringbroker": self.start_ringbroker(), "kafka": self.start_kafka()}
        log(f"ringbroker {boot['ringbroker']}, Kafka {boot['kafka']}")
        t0 = time.monotonic()
        java = ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp", cp, "dev.ringbroker.interop.Main"]
        procs = [self.spawn(java + ["--bootstrap", boot[s], "--phase", "all", "--prefix", "jdiff",
                                    "--state", os.path.join(self.work, f"{s}.state"),
                                    "--record", os.path.join(self.work, f"{s}.rec")], f"java-{s}.log")
                 for s in SIDES]
        for s, rc in zip(SIDES, self.wait_all(procs, 240, "the Java scenarios")):
            log(f"Java scenarios against {s}: exit {rc} (log java-{s}.log)")
            # Their own checks (what Kafka answers) are reported, not counted: the comparison is.
            with open(os.path.join(self.work, f"java-{s}.log"), errors="replace") as f:
                for line in f:
                    if line.startswith(("FAIL ", "KNOWN-FAIL ")):
                        log(f"  {s}: {line.strip()[:300]}")
        log(f"Java scenarios took {time.monotonic() - t0:.1f}s")
        t0 = time.monotonic()
        tcp = os.path.join(JAVA_DIR, "target", "classes") + ":" + os.path.join(kafka_home, "libs", "*")
        t_zero = (int(time.time()) - 60) * 1000
        procs = []
        for s in SIDES:
            d = os.path.join(self.work, f"tools-{s}")
            os.makedirs(d, exist_ok=True)
            procs.append(self.spawn(
                ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1",
                 f"-Dlog4j2.configurationFile={kafka_home}/config/log4j2.yaml", "-cp", tcp,
                 "dev.ringbroker.interop.ToolRunner", "--kafka-home", kafka_home, "--bootstrap", boot[s],
                 "--script", SCRIPT, "--out", os.path.join(d, "tools.out"), "--t0", str(t_zero)],
                f"tools-{s}.log"))
        for s, rc in zip(SIDES, self.wait_all(procs, 240, "Kafka's tools")):
            log(f"Kafka's tools against {s}: exit {rc} (log tools-{s}.log)")
        log(f"Kafka's tools took {time.monotonic() - t0:.1f}s")
        with open(os.path.join(self.work, "bootstrap"), "w") as f:
            for s in SIDES:
                f.write(f"{s} {boot[s]}\n")


# ----------------------------------------------------------------------------------- comparing


def read_record(path):
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            out[k] = v
    return out


UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
DROP = [
    re.compile(r"^exit -?\d+$"),
    re.compile(r"ToolRunner\$ExitCalled"),
    re.compile(r"^\s+at \S"),
    re.compile(r"^\s*\.\.\. \d+ more"),
]


def normalize_tool(text, node, bootstrap):
    lines = []
    for line in text.splitlines():
        if any(p.search(line) for p in DROP):
            continue
        line = re.sub(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] ", "", line)  # log4j's timestamp
        line = line.replace(bootstrap, "{B}")
        line = re.sub(r"127\.0\.0\.1:\d+", "{HOST}", line)
        line = re.sub(r"TopicId: \S+", "TopicId: {ID}", line)
        line = re.sub(rf"([\w.-]+)-{UUID}", r"\1-{UUID}", line)  # member ids
        line = re.sub(r'"logDir":"[^"]*"', '"logDir":"{DIR}"', line)
        line = re.sub(r"adminclient-\d+", "adminclient-N", line)
        n = re.escape(node)
        line = re.sub(rf"\b(Leader|Replicas|Isr): {n}\b", r"\1: {NODE}", line)
        line = re.sub(rf'"broker":{n}\b', '"broker":{NODE}', line)
        line = re.sub(rf"(\{{B\}}|\{{HOST\}})\s+\({n}\)", r"\1 ({NODE})", line)  # a group's coordinator
        line = re.sub(rf"(\bbrokers?|--entity-name) {n}\b", r"\1 {NODE}", line)
        line = re.sub(r"\s+", " ", line).rstrip()
        lines.append(line)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines)


def sorted_json(text):
    """kafka-log-dirs' JSON with each log dir's partitions in name order (a map's order)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("{"):
            doc = json.loads(line)
            for b in doc.get("brokers", []):
                for d in b.get("logDirs", []):
                    d["partitions"].sort(key=lambda p: p["partition"])
            lines[i] = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return "\n".join(lines)


def unordered(cid, text):
    """The outputs whose line order is a map's (which partition's answer came first): sorted."""
    if cid.startswith(("delrec", "groups-", "offsets-")):
        return "\n".join(sorted(text.splitlines()))
    return text


def read_tools(path):
    out = {}
    with open(path) as f:
        text = f.read()
    node = re.search(r"^### node (\S+)$", text, re.M).group(1)
    bootstrap = ""
    bfile = os.path.join(os.path.dirname(os.path.dirname(path)), "bootstrap")
    side = os.path.basename(os.path.dirname(path)).removeprefix("tools-")
    if os.path.exists(bfile):
        with open(bfile) as f:
            for line in f:
                s, b = line.split()
                if s == side:
                    bootstrap = b
    parts = re.split(r"^### (\S+) (\S+) exit=(-?\d+)\n", text, flags=re.M)
    # parts: [head, id, tool, exit, body, id, tool, exit, body, ...]
    for i in range(1, len(parts) - 3, 4):
        cid, code, body = parts[i], parts[i + 2], parts[i + 3]
        stdout, _, rest = body.partition(f"### {cid} stderr\n")
        stderr = rest.split("### end\n")[0]
        out[f"tool.{cid}.exit"] = code
        if cid == "logdirs":
            stdout = sorted_json(stdout)
        text = normalize_tool(stdout + "\n" + stderr, node, bootstrap or "\0")
        out[f"tool.{cid}.output"] = unordered(cid, text)
    return out


def tidy(v):
    """Blank lines dropped (a rewrite may leave one where it removed a line)."""
    return "\n".join(line for line in v.splitlines() if line.strip())


def compare(work):
    passed = failed = known = 0
    vals = {}
    for s in SIDES:
        v = {}
        rec = os.path.join(work, f"{s}.rec")
        tools = os.path.join(work, f"tools-{s}", "tools.out")
        if os.path.exists(rec):
            v.update(read_record(rec))
        else:
            print(f"FAIL kafka-diff: no record of the Java scenarios against {s} ({rec})")
            failed += 1
        if os.path.exists(tools):
            v.update(read_tools(tools))
        else:
            print(f"FAIL kafka-diff: no output of Kafka's tools against {s} ({tools})")
            failed += 1
        vals[s] = v
    used = set()
    report = []
    for key in sorted(set(vals["kafka"]) | set(vals["ringbroker"])):
        k, r = tidy(vals["kafka"].get(key, "<absent>")), tidy(vals["ringbroker"].get(key, "<absent>"))
        if k == r:
            passed += 1
            print(f"PASS kafka-diff: {key}")
            continue
        reasons = []
        for i, (glob, rx, repl, why) in enumerate(ALLOWLIST):
            if not fnmatch.fnmatchcase(key, glob):
                continue
            if rx is None:
                k2 = r2 = "<allowlisted>"
            else:
                k2 = re.sub(rx, repl, k, flags=re.M)
                r2 = re.sub(rx, repl, r, flags=re.M)
            k2, r2 = tidy(k2), tidy(r2)
            if (k2, r2) != (k, r):
                used.add(i)
                reasons.append(why)
                k, r = k2, r2
        if k == r:
            known += 1
            print(f"KNOWN-FAIL kafka-diff: {key} differs from Kafka: {'; '.join(reasons)}")
            continue
        failed += 1
        if "\n" in k or "\n" in r:
            d = "\n".join(difflib.unified_diff(k.splitlines(), r.splitlines(), "kafka", "ringbroker", lineterm="", n=1))
            print(f"FAIL kafka-diff: {key} differs (after the allowlist):\n{d}")
        else:
            print(f"FAIL kafka-diff: {key}: Kafka {k!r}, ringbroker {r!r}")
        report.append(key)
    for i, (glob, rx, _, _) in enumerate(ALLOWLIST):
        if i not in used:
            log(f"allowlist entry {glob} {rx or ''} matched no difference (still needed?)")
    log(f"compared {passed + failed + known} answers: {passed} equal, {known} known differences, {failed} differ")
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--work")
    ap.add_argument("--compare", metavar="DIR")
    args = ap.parse_args()
    if args.compare:
        sys.exit(1 if compare(args.compare) else 0)
    if not args.bin or not args.work:
        ap.error("--bin and --work (or --compare DIR)")
    args.work = os.path.join(args.work, "kafka-diff")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    run = Run(args)
    # run.sh's `timeout` sends SIGTERM: end through the finally below (Kafka and the broker stopped).
    def interrupted(code):
        run.interrupted = True
        sys.exit(code)

    signal.signal(signal.SIGTERM, lambda *_: interrupted(143))
    signal.signal(signal.SIGINT, lambda *_: interrupted(130))
    t0 = time.monotonic()
    try:
        run.run()
    except Exception as e:  # noqa: BLE001 - reported as a failure, the processes still stopped
        print(f"FAIL kafka-diff: {type(e).__name__}: {e}", flush=True)
        sys.exit(1)
    finally:
        run.stop()
    failed = compare(args.work)
    log(f"took {time.monotonic() - t0:.1f}s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
