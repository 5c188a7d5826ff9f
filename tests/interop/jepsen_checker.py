#!/usr/bin/env python3
"""A Jepsen-style checker for a Kafka produce/consume history: a pure function, no I/O.

    jepsen_checker.py --self-test        feeds synthetic histories, one per anomaly, and checks
                                         that each is detected (and a clean one is not flagged)
    jepsen_checker.py HISTORY.json       checks a history written by replication_test.py

A history is a dict:

    acks     [{"value": V, "partition": P, "offset": O}]   delivery reports without error
    failed   [{"value": V, "error": E}]                    delivery reports with an error
    unknown  [V]                                           produced, but no report ever came
    reads    [{"reader": NAME,                             one full read of the topic by one
               "partitions": {P: {"start": S,              consumer: the low watermark it read
                                  "end": E,                from, the high watermark it read to,
                                  "complete": bool,        whether it got there, and every record
                                  "records": [[O, V]]}}}]  in the order the consumer returned it

Every value is `<producer>-<seq>` (`p3-000017`): unique over the whole run, with the sequence
number growing in the order that producer handed the values to its client. Records of one
producer in one partition must therefore appear in sequence order (an idempotent producer keeps
its order per partition through retries).

Anomalies (each with examples in the result):
  lost        acknowledged, but absent from a read that completed that partition
  duplicated  one value at two positions (partition, offset) in one read
  reordered   within one producer and partition, a larger sequence number before a smaller one,
              in a read's log order or in the acknowledged offsets
  two_valued  an offset with two values: two acknowledgements of one (partition, offset) with
              different values; an acknowledged value read at another offset or another value
              read at its offset; two reads that disagree about one (partition, offset)
  skipped     a read that jumps over offsets: its first offset is not the low watermark, two
              consecutive offsets differ by more than one, or a completed read ends short of the
              high watermark (no compaction and no transactions here, so the log is dense)
  went_back   a read whose offset does not grow from one record to the next
  unexpected  a value read that no producer ever sent (or that does not parse)
Informational (not anomalies): failed_but_present (a failed or unreported value that is in the
log: its write took effect, which Kafka allows), incomplete_reads (partition reads that timed out).
"""

import json
import sys

ANOMALIES = ("lost", "duplicated", "reordered", "two_valued", "skipped", "went_back", "unexpected")
EXAMPLES = 5


def parse_value(v):
    """(producer, seq) of `<producer>-<seq>`, or None."""
    if not isinstance(v, str) or "-" not in v:
        return None
    producer, _, seq = v.rpartition("-")
    try:
        return producer, int(seq)
    except ValueError:
        return None


class _Found:
    """Distinct anomalies of one kind, keyed so that one fault seen by several reads counts once."""

    def __init__(self):
        self.items = {}

    def add(self, key, detail):
        self.items.setdefault(key, detail)

    def __len__(self):
        return len(self.items)

    def examples(self):
        return [self.items[k] for k in list(self.items)[:EXAMPLES]]


def check(history):
    """Returns {"counts": {...}, "examples": {...}, "per_reader": {...}, "valid": bool}."""
    acks = history.get("acks", [])
    failed = history.get("failed", [])
    unknown = history.get("unknown", [])
    reads = history.get("reads", [])
    found = {k: _Found() for k in ANOMALIES}

    sent = set()
    acked_at = {}  # value -> (partition, offset)
    by_position = {}  # (partition, offset) -> value acknowledged there
    for a in acks:
        # An acknowledgement without an offset is librdkafka's implicit one: an idempotent
        # producer whose answer for a batch was lost takes a later batch's success as the
        # earlier one's too (sequence order proves it was written). Checked by partition.
        offset = None if a["offset"] is None else int(a["offset"])
        v, pos = a["value"], (int(a["partition"]), offset)
        sent.add(v)
        if v in acked_at and acked_at[v] != pos:
            found["two_valued"].add(("ack-twice", v), f"{v} acknowledged at {acked_at[v]} and at {pos}")
        acked_at.setdefault(v, pos)
        if offset is None:
            continue
        other = by_position.get(pos)
        if other is not None and other != v:
            found["two_valued"].add(("ack", pos), f"{pos} acknowledged for {other} and for {v}")
        by_position.setdefault(pos, v)
    sent.update(f["value"] for f in failed)
    sent.update(unknown)
    not_acked = {f["value"] for f in failed} | set(unknown)

    # Reordered in the acknowledgements: per (producer, partition), offsets must grow with seq.
    acked_runs = {}
    for v, (p, o) in acked_at.items():
        pv = parse_value(v)
        if pv is not None and o is not None:
            acked_runs.setdefault((pv[0], p), []).append((pv[1], o, v))
    for (producer, p), run in acked_runs.items():
        run.sort()
        for (s1, o1, v1), (s2, o2, v2) in zip(run, run[1:]):
            if o2 < o1:
                found["reordered"].add(("ack", p, v1, v2),
                                       f"partition {p}: {v1} acknowledged at {o1} but {v2} (sent later) at {o2}")

    seen_at = {}  # (partition, offset) -> (value, reader) from the first read that had it
    per_reader = {}
    present_anywhere = set()
    incomplete = []
    for r in reads:
        name = r["reader"]
        where = {}  # value -> [(partition, offset)] where this read found it
        lost_here = 0
        for p_key, pr in sorted(r["partitions"].items(), key=lambda kv: int(kv[0])):
            p = int(p_key)
            start, end, complete = int(pr["start"]), int(pr["end"]), bool(pr["complete"])
            if not complete:
                incomplete.append((name, p))
            prev = None
            last_seq = {}  # producer -> (seq, value, offset) last seen in this partition
            values_here = set()
            for o, v in pr["records"]:
                o = int(o)
                values_here.add(v)
                present_anywhere.add(v)
                pos = (p, o)
                # One position, one value (across reads and against the acknowledgements).
                earlier = seen_at.get(pos)
                if earlier is not None and earlier[0] != v:
                    found["two_valued"].add(("read", pos), f"{pos}: {earlier[1]} read {earlier[0]}, {name} read {v}")
                seen_at.setdefault(pos, (v, name))
                acked_v = by_position.get(pos)
                if acked_v is not None and acked_v != v:
                    found["two_valued"].add(("ack", pos), f"{pos}: acknowledged for {acked_v}, {name} read {v}")
                # Offsets: dense and growing from the low watermark. A record at or below the last
                # offset is a re-delivery: counted as going back, and not again as a duplicate
                # or a reordering.
                if prev is not None and o <= prev:
                    found["went_back"].add((name, p, prev, o), f"{name}: partition {p} offset {prev} then {o}")
                    continue
                if prev is None and o != start:
                    found["skipped"].add((name, p, start, o), f"{name}: partition {p} starts at {o}, "
                                                              f"low watermark {start}")
                elif prev is not None and o != prev + 1:
                    found["skipped"].add((name, p, prev, o), f"{name}: partition {p} offset {prev} then {o}")
                prev = o
                where.setdefault(v, []).append(pos)
                if len(where[v]) > 1:
                    # A second copy: a duplicate (below), not also a reordering.
                    continue
                # Known value, in producer order.
                pv = parse_value(v)
                if v not in sent or pv is None:
                    found["unexpected"].add(v, f"{name}: {v!r} at {pos} was never sent")
                    continue
                producer, seq = pv
                before = last_seq.get(producer)
                if before is not None and seq < before[0]:
                    found["reordered"].add(("read", p, before[1], v),
                                           f"{name}: partition {p}: {before[1]} at {before[2]} before {v} at {o}")
                if before is None or seq > before[0]:
                    last_seq[producer] = (seq, v, o)
            if complete and end > start and (prev is None or prev + 1 < end):
                got = "nothing" if prev is None else f"up to {prev}"
                found["skipped"].add((name, p, "end"), f"{name}: partition {p} read {got}, high watermark {end}")
            if complete:
                for v, (ap, ao) in acked_at.items():
                    if ap == p and v not in values_here:
                        lost_here += 1
                        found["lost"].add(v, f"{v} acknowledged at {(ap, ao)}, not read by {name}")
        for v, ps in where.items():
            if len(ps) > 1:
                found["duplicated"].add(v, f"{name}: {v} at {ps[:4]}")
            acked = acked_at.get(v)
            if acked is not None and acked[1] is None:
                moved = all(pp != acked[0] for pp, _ in ps)
            else:
                moved = acked is not None and acked not in ps
            if moved:
                found["two_valued"].add(("moved", v), f"{v}: acknowledged at {acked_at[v]}, {name} read it "
                                                      f"at {ps[0]}")
        per_reader[name] = {"records": sum(len(pr["records"]) for pr in r["partitions"].values()),
                            "lost": lost_here,
                            "complete": all(pr["complete"] for pr in r["partitions"].values())}

    counts = {k: len(found[k]) for k in ANOMALIES}
    counts["acknowledged"] = len(acked_at)
    counts["failed"] = len(failed)
    counts["unknown"] = len(unknown)
    counts["failed_but_present"] = len(not_acked & present_anywhere)
    counts["incomplete_reads"] = len(incomplete)
    counts["reads"] = len(reads)
    return {
        "counts": counts,
        "examples": {k: found[k].examples() for k in ANOMALIES if len(found[k])},
        "per_reader": per_reader,
        "incomplete": incomplete[:EXAMPLES],
        "valid": not any(counts[k] for k in ANOMALIES),
    }


def summary(result):
    c = result["counts"]
    return ", ".join(f"{k} {c[k]}" for k in ("acknowledged", "failed", "unknown", *ANOMALIES,
                                              "failed_but_present", "incomplete_reads"))


# ---------------------------------------------------------------- self-test

def _clean():
    """Two producers over two partitions, two reads that agree; one failed value never written."""
    acks, recs = [], {0: [], 1: []}
    for i in range(6):
        for producer in ("p0", "p1"):
            p = (i + (producer == "p1")) % 2
            v = f"{producer}-{i:06d}"
            o = len(recs[p])
            recs[p].append([o, v])
            acks.append({"value": v, "partition": p, "offset": o})

    def read(name):
        return {"reader": name, "partitions": {
            p: {"start": 0, "end": len(rs), "complete": True, "records": [list(x) for x in rs]}
            for p, rs in recs.items()}}

    return {"acks": acks, "failed": [{"value": "p0-000099", "error": "timed out"}], "unknown": ["p1-000099"],
            "reads": [read("a"), read("b")]}


def _self_test():
    import copy

    cases = []

    def case(name, want, mutate):
        h = copy.deepcopy(_clean())
        mutate(h)
        cases.append((name, want, h))

    def recs(h, reader, p):
        return h["reads"][reader]["partitions"][p]["records"]

    def lose(h):  # the last record of partition 0 is gone from both reads (HW moved back)
        for r in h["reads"]:
            pr = r["partitions"][0]
            pr["records"].pop()
            pr["end"] -= 1

    def duplicate(h):  # a retry appended again: p0-000000 at the end of partition 0
        for r in h["reads"]:
            pr = r["partitions"][0]
            pr["records"].append([pr["end"], pr["records"][0][1]])
            pr["end"] += 1

    def reorder_log(h):  # two records of one producer swapped in the log (and in the acks)
        for r in h["reads"]:
            rs = r["partitions"][0]["records"]
            a, b = [i for i, (_, v) in enumerate(rs) if v.startswith("p0-")][:2]
            rs[a][1], rs[b][1] = rs[b][1], rs[a][1]
        by_v = {v: o for o, v in h["reads"][0]["partitions"][0]["records"]}
        for a in h["acks"]:
            if a["partition"] == 0:
                a["offset"] = by_v[a["value"]]

    def reorder_ack(h):  # acknowledged offsets out of sequence order (log read agrees with acks
        # except for the two swapped offsets, which also makes them two-valued: expect both)
        a0, a1 = [a for a in h["acks"] if a["value"] in ("p0-000000", "p0-000002")]
        a0["offset"], a1["offset"] = a1["offset"], a0["offset"]

    def two_acks(h):  # two values acknowledged at one offset (the 2013 Jepsen signature)
        h["acks"].append({"value": "p9-000000", "partition": 1, "offset": 0})

    def acked_twice(h):  # one value acknowledged at two offsets
        h["acks"].append({"value": "p0-000000", "partition": 1, "offset": 7})

    def disagree(h):  # two reads see different values at one offset
        rs = recs(h, 1, 1)
        rs[2][1] = "p7-000000"
        h["failed"].append({"value": "p7-000000", "error": "timed out"})  # so it is not `unexpected`

    def skip(h):  # the second read jumps over an offset
        del recs(h, 1, 0)[3]

    def skip_start(h):  # a read starts after the low watermark
        del recs(h, 0, 1)[0]

    def short_end(h):  # a complete read ends before the high watermark
        h["reads"][0]["partitions"][1]["end"] += 2

    def back(h):  # a consumer re-delivers an earlier offset
        rs = recs(h, 0, 0)
        rs.insert(3, list(rs[1]))

    def unexpected(h):
        for r in h["reads"]:
            pr = r["partitions"][1]
            pr["records"].append([pr["end"], "garbage"])
            pr["end"] += 1

    case("clean", set(), lambda h: None)
    case("lost", {"lost"}, lose)
    case("duplicated", {"duplicated"}, duplicate)
    case("reordered (log and acks)", {"reordered"}, reorder_log)
    case("reordered (acks only)", {"reordered", "two_valued"}, reorder_ack)
    case("two values acknowledged at one offset", {"two_valued", "lost"}, two_acks)
    case("one value acknowledged at two offsets", {"two_valued"}, acked_twice)
    case("two reads disagree", {"two_valued", "lost"}, disagree)
    case("skipped offset", {"skipped", "lost"}, skip)
    case("skipped start", {"skipped", "lost"}, skip_start)
    case("ends short of the HW", {"skipped"}, short_end)
    case("went back", {"went_back"}, back)
    case("unexpected value", {"unexpected"}, unexpected)

    # librdkafka's implicit acknowledgement (no offset): present in its partition is fine,
    # missing from it is loss, read only in another partition is two-valued.
    def implicit_ack(h):
        h["acks"][0]["offset"] = None
    case("implicit acknowledgement", set(), implicit_ack)

    def implicit_ack_lost(h):
        implicit_ack(h)
        gone = h["acks"][0]
        for r in h["reads"]:
            pr = r["partitions"][gone["partition"]]
            pr["records"] = [[o, v] for o, v in pr["records"] if v != gone["value"]]
    case("implicit acknowledgement lost", {"lost", "skipped"}, implicit_ack_lost)

    # An incomplete read does not report loss for what it did not get to.
    def incomplete(h):
        pr = h["reads"][1]["partitions"][0]
        pr["records"] = pr["records"][:2]
        pr["complete"] = False
    case("incomplete read is not loss", set(), incomplete)

    # A failed value that made it into the log is information, not an anomaly.
    def failed_present(h):
        for r in h["reads"]:
            pr = r["partitions"][0]
            pr["records"].append([pr["end"], "p0-000099"])
            pr["end"] += 1
    case("failed but present", set(), failed_present)

    bad = 0
    for name, want, h in cases:
        res = check(h)
        got = {k for k in ANOMALIES if res["counts"][k]}
        ok = got == want
        if name == "failed but present":
            ok = ok and res["counts"]["failed_but_present"] == 1
        if name == "incomplete read is not loss":
            ok = ok and res["counts"]["incomplete_reads"] == 1
        if name == "clean":
            ok = ok and res["valid"] and res["counts"]["acknowledged"] == 12
        print(f"{'PASS' if ok else 'FAIL'} jepsen-checker: {name}: detected {sorted(got) or 'nothing'}"
              + ("" if ok else f", want {sorted(want)}; {summary(res)}; {res['examples']}"), flush=True)
        bad += not ok
    print(f"== jepsen-checker self-test: {len(cases) - bad} of {len(cases)} cases right", flush=True)
    return bad == 0


def main(argv):
    if argv == ["--self-test"]:
        sys.exit(0 if _self_test() else 1)
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    with open(argv[0]) as f:
        res = check(json.load(f))
    print(json.dumps(res, indent=1, default=str))
    sys.exit(0 if res["valid"] else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
