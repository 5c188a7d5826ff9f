#!/usr/bin/env python3
"""Keyed records for benches/compare: 10,000 distinct keys in turn, a fixed random value,
librdkafka's `murmur2` partitioner (the Java client's default for keyed records), as fast as
the producer goes. Prints one JSON object: records, delivered, errors, seconds,
records_per_sec."""
import argparse
import json
import os
import sys
import time

from confluent_kafka import Producer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--records", type=int, required=True)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--acks", default="1")
    ap.add_argument("--keys", type=int, default=10000)
    a = ap.parse_args()
    p = Producer({
        "bootstrap.servers": a.bootstrap,
        "acks": "-1" if a.acks == "all" else a.acks,
        "partitioner": "murmur2",
        "linger.ms": 5,
        "batch.size": 1048576,
        "compression.type": "none",
        "queue.buffering.max.messages": 1000000,
        "queue.buffering.max.kbytes": 1048576,
    })
    keys = [b"key-%d" % i for i in range(a.keys)]
    value = os.urandom(a.size)
    state = {"ok": 0, "err": 0}

    def dr(err, _msg):
        if err is None:
            state["ok"] += 1
        else:
            state["err"] += 1

    produce, poll, nk, topic = p.produce, p.poll, len(keys), a.topic
    t0 = time.monotonic()
    for i in range(a.records):
        while True:
            try:
                produce(topic, value, keys[i % nk], on_delivery=dr)
                break
            except BufferError:
                poll(0.005)
        if i % 1000 == 0:
            poll(0)
    left = p.flush(120)
    dt = time.monotonic() - t0
    print(json.dumps({"records": a.records, "delivered": state["ok"], "errors": state["err"],
                      "undelivered": left, "seconds": dt, "records_per_sec": state["ok"] / dt}))
    return 0 if state["err"] == 0 and left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
