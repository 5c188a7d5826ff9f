#!/usr/bin/env python3
"""Builds the seed corpora in fuzz/corpus/ from real client traffic.

    python3 fuzz/capture_corpus.py [--bin target/debug/ringbroker] [--keep]

Starts a broker on a temporary data dir, puts a recording TCP proxy in front of it (the broker
advertises the proxy's address, so every connection goes through it), runs the `before` phase
of the interop clients in tests/interop (kcat incl. its legacy Produce v0-v2 runs,
confluent-kafka, kafka-python, both consumer-group scripts), stops the broker with SIGTERM and
then writes:

  frame_header/      client->broker frames as sent (size prefix included), and the first frames
                     of each connection as one stream
  request_body/      [api key, version, body] per request (the request_body target's format)
  legacy/            Produce v0-v2 bodies ([1, version, body]) and their message sets ([0, 0, set])
  record_batch/      [0, batch] for batches read back from the partition logs
  group_records/     keys and values of the __consumer_offsets records in the logs
  producer_snapshot/ [0, file] for the producer snapshots the broker wrote
  config/            hand-made: a TOML file and NAME=VALUE lines for every property

A few inputs are kept per kind (API and version, codec, ...) so the committed corpus stays small;
file names are the SHA-1 of the content, as libFuzzer names its own. Existing seeds are kept.
"""

import argparse
import hashlib
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
INTEROP = os.path.join(ROOT, "tests", "interop")

# First flexible request version (header v2) of every API the broker serves.
FLEXIBLE_FROM = {
    0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3,
    18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 32: 4, 33: 2, 37: 2, 42: 2, 44: 1, 47: 99, 60: 0,
}
PER_REQUEST_KIND = 3  # kept per (api, version)
MAX_FRAME = 64 * 1024  # the frame_header target's size limit
MAX_SEED = 16 * 1024


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    """Forwards connections to the broker and keeps what each client sent."""

    def __init__(self, port, target_port):
        self.target_port = target_port
        self.streams = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            sent = bytearray()
            with self.lock:
                self.streams.append(sent)
            threading.Thread(target=self._pump, args=(client, upstream, sent), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, None), daemon=True).start()

    @staticmethod
    def _pump(src, dst, keep):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if keep is not None:
                    keep.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def frames(stream):
    at = 0
    while len(stream) - at >= 4:
        (size,) = struct.unpack_from(">i", stream, at)
        if size <= 0 or len(stream) - at - 4 < size:
            return
        yield bytes(stream[at:at + 4 + size])
        at += 4 + size


def uvarint(buf, at):
    value = shift = 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7


def varint(buf, at):
    v, at = uvarint(buf, at)
    return (v >> 1) ^ -(v & 1), at


def split_request(frame):
    """(api key, version, body) of a framed request, or None."""
    api, version = struct.unpack_from(">hh", frame, 4)
    at = 12
    if api not in FLEXIBLE_FROM:
        return None
    (client_len,) = struct.unpack_from(">h", frame, at)
    at += 2 + max(client_len, 0)
    if version >= FLEXIBLE_FROM[api]:
        count, at = uvarint(frame, at)
        for _ in range(count):
            _, at = uvarint(frame, at)
            size, at = uvarint(frame, at)
            at += size
    return api, version, frame[at:]


def legacy_message_sets(body):
    """The record sets of a Produce v0-v2 body."""
    at = 6
    (topics,) = struct.unpack_from(">i", body, at)
    at += 4
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", body, at)
        at += 2 + name_len
        (partitions,) = struct.unpack_from(">i", body, at)
        at += 4
        for _ in range(partitions):
            (size,) = struct.unpack_from(">i", body, at + 4)
            at += 8
            if size > 0:
                yield body[at:at + size]
                at += size


def batches(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while len(data) - at >= 61:
        (length,) = struct.unpack_from(">i", data, at + 8)
        if length < 49 or at + 12 + length > len(data):
            return
        yield data[at:at + 12 + length]
        at += 12 + length


def records(batch):
    """(key, value) of each record of an uncompressed batch."""
    at = 61
    while at < len(batch):
        length, at = varint(batch, at)
        end = at + length
        at += 1
        _, at = varint(batch, at)  # timestamp delta
        _, at = varint(batch, at)  # offset delta
        key_len, at = varint(batch, at)
        key = batch[at:at + key_len] if key_len >= 0 else None
        at += max(key_len, 0)
        value_len, at = varint(batch, at)
        value = batch[at:at + value_len] if value_len >= 0 else None
        yield key, value
        at = end


class Seeds:
    def __init__(self):
        self.counts = {}
        self.written = 0

    def add(self, target, data, kind=None, limit=PER_REQUEST_KIND):
        if not data or len(data) > MAX_SEED:
            return
        if kind is not None:
            k = (target, kind)
            if self.counts.get(k, 0) >= limit:
                return
            self.counts[k] = self.counts.get(k, 0) + 1
        d = os.path.join(CORPUS, target)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, hashlib.sha1(data).hexdigest())
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(data)
            self.written += 1


def config_seeds(seeds):
    toml = b"""# a broker.toml
"log.dirs" = "/var/lib/ringbroker"
advertised.listeners = "PLAINTEXT://broker-1.example:9092"
num.partitions = 3
num.shards = 2
auto.create.topics.enable = false
log.retention.hours = 168
log.segment.bytes = 1073741824
log.message.timestamp.type = "LogAppendTime"
[group]
initial.rebalance.delay.ms = 0
"""
    seeds.add("config", b"\x00" + toml)
    broker = [
        "node.id=1", "listeners=PLAINTEXT://127.0.0.1:9092", "listeners=[::1]:19092",
        "advertised.listeners=host:9092", "log.dirs=/a,/b", "num.shards=4",
        "ringbroker.pin.shards=true", "num.partitions=3", "auto.create.topics.enable=false",
        "message.max.bytes=1048588", "socket.request.max.bytes=104857600",
        "queued.max.request.bytes=67108864", "ringbroker.acks.all.fsync=true",
        "log.segment.bytes=1073741824", "log.roll.ms=604800000", "log.roll.hours=168",
        "log.retention.ms=-1", "log.retention.minutes=10", "log.retention.hours=168",
        "log.retention.bytes=-1", "log.index.interval.bytes=4096",
        "log.flush.interval.messages=10000", "log.flush.interval.ms=1000",
        "log.message.timestamp.type=CreateTime", "offsets.topic.num.partitions=50",
        "group.min.session.timeout.ms=6000", "group.max.session.timeout.ms=1800000",
        "group.initial.rebalance.delay.ms=3000", "group.max.size=100",
        "offsets.retention.minutes=10080", "producer.id.expiration.ms=86400000",
    ]
    for line in broker:
        seeds.add("config", b"\x01" + line.encode())
    topic = [
        "segment.bytes=1048576", "segment.ms=3600000", "retention.ms=-1", "retention.bytes=-1",
        "index.interval.bytes=4096", "flush.messages=1", "flush.ms=0",
        "max.message.bytes=1048588", "message.timestamp.type=LogAppendTime",
        "cleanup.policy=delete",
    ]
    for line in topic:
        seeds.add("config", b"\x02" + line.encode())


def hand_made_legacy(seeds):
    # Codec round trips (mode 3) on a small text, one per codec.
    text = b"key-1:value-1\nkey-2:value-2\n" * 4
    for codec in range(5):
        seeds.add("legacy", bytes([3, codec]) + text)


def run_clients(bootstrap, state, timeout):
    runs = [
        ["bash", os.path.join(INTEROP, "kcat.sh"), bootstrap, "before", state],
        [sys.executable, os.path.join(INTEROP, "confluent_kafka_test.py"), "--bootstrap",
         bootstrap, "--phase", "before", "--state", os.path.join(state, "confluent.json")],
        [sys.executable, os.path.join(INTEROP, "kafka_python_test.py"), "--bootstrap",
         bootstrap, "--phase", "before", "--state", os.path.join(state, "kafka_python.json")],
        [sys.executable, os.path.join(INTEROP, "groups_confluent.py"), "--bootstrap", bootstrap,
         "--phase", "before", "--state", os.path.join(state, "groups_confluent.json"),
         "--session-timeout-ms", "3000"],
        [sys.executable, os.path.join(INTEROP, "groups_kafka_python.py"), "--bootstrap",
         bootstrap, "--phase", "before", "--state",
         os.path.join(state, "groups_kafka_python.json"), "--session-timeout-ms", "3000"],
    ]
    for argv in runs:
        name = os.path.basename(argv[1])
        print(f"== capture: {name}", flush=True)
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
            fails = [l for l in out.stdout.splitlines() if l.startswith("FAIL")]
            print(f"   exit {out.returncode}, {len(fails)} FAIL lines (traffic is kept either way)")
        except subprocess.TimeoutExpired:
            print(f"   timed out after {timeout}s (traffic so far is kept)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "debug", "ringbroker"))
    ap.add_argument("--client-timeout", type=int, default=150)
    ap.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="ringbroker-corpus.")
    data_dir = os.path.join(work, "data")
    state = os.path.join(work, "state")
    os.makedirs(state)
    broker_port, proxy_port = free_port(), free_port()
    recorder = Recorder(proxy_port, broker_port)
    log = open(os.path.join(work, "broker.log"), "w")
    broker = subprocess.Popen(
        [args.bin, "serve", "--listen", f"127.0.0.1:{broker_port}", "--data-dir", data_dir,
         "--shards", "2", "--set", f"advertised.listeners=127.0.0.1:{proxy_port}",
         "--set", "group.initial.rebalance.delay.ms=200",
         "--set", "group.min.session.timeout.ms=1000"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", broker_port), timeout=1).close()
            break
        except OSError:
            if time.time() > deadline or broker.poll() is not None:
                sys.exit(f"broker did not start; see {work}/broker.log")
            time.sleep(0.1)
    try:
        run_clients(f"127.0.0.1:{proxy_port}", state, args.client_timeout)
    finally:
        broker.send_signal(signal.SIGTERM)
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait()

    seeds = Seeds()
    with recorder.lock:
        streams = [bytes(s) for s in recorder.streams]
    for stream in streams:
        fs = list(frames(stream))
        head = b"".join(fs[:6])
        if len(head) <= MAX_FRAME:
            seeds.add("frame_header", head, kind="stream", limit=20)
        for frame in fs:
            if len(frame) > MAX_FRAME:
                continue
            split = split_request(frame)
            if split is None:
                continue
            api, version, body = split
            seeds.add("frame_header", frame, kind=(api, version), limit=1)
            seeds.add("request_body", bytes([api & 0xFF, version & 0xFF]) + body,
                      kind=(api, version))
            if api == 0 and version <= 2:
                seeds.add("legacy", bytes([1, version]) + body, kind=("produce", version))
                for i, message_set in enumerate(legacy_message_sets(body)):
                    # message attributes (codec) at offset 12 + 5
                    codec = message_set[17] & 7 if len(message_set) > 17 else 0
                    seeds.add("legacy", b"\x00\x00" + message_set, kind=("set", codec), limit=4)

    for dirpath, _, files in os.walk(data_dir):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            if name.endswith(".snapshot"):
                with open(path, "rb") as f:
                    seeds.add("producer_snapshot", b"\x00" + f.read(), kind="snapshot", limit=6)
            if not name.endswith(".log"):
                continue
            offsets = os.path.basename(dirpath).startswith("__consumer_offsets")
            for batch in batches(path):
                attributes = struct.unpack_from(">h", batch, 21)[0]
                kind = ("offsets" if offsets else "data", attributes & 0x3F)
                seeds.add("record_batch", b"\x00" + batch, kind=kind, limit=4)
                if offsets and attributes & 7 == 0:
                    for key, value in records(batch):
                        version = struct.unpack_from(">h", key, 0)[0] if key else None
                        seeds.add("group_records", key, kind=("key", version), limit=3)
                        if value is not None:
                            seeds.add("group_records", value, kind=("value", version), limit=6)
    config_seeds(seeds)
    hand_made_legacy(seeds)
    print(f"== capture: {len(streams)} connections, {seeds.written} new seed files in {CORPUS}")
    if args.keep:
        print(f"   data kept in {work}")
    else:
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    main()
