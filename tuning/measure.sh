#!/usr/bin/env bash
# Measurements behind tuning/README.md: `ringbroker bench produce` against a fresh broker
# per configuration, each configuration run REPEATS times, alternating configurations.
#
#   bash tuning/measure.sh [OUT_DIR=target/tune-meas/runs]
#   env: RB (binary, default target/release/ringbroker), RECORDS (300000), REPEATS (2),
#        PORT (19450; must be free: glommio's SO_REUSEPORT would share a port silently)
#
# Prints one line per run: label, records/s, MB/s, produce_ack p50/p99/p99.9/max (ms).
# Saturation runs (--rate 0) measure throughput; their latencies are queueing in the
# producer. The rate=20k runs are open-loop: latency from each record's scheduled time.
set -euo pipefail
OUT=${1:-target/tune-meas/runs}
RB=${RB:-target/release/ringbroker}
RECORDS=${RECORDS:-300000}
REPEATS=${REPEATS:-2}
PORT=${PORT:-19450}
mkdir -p "$OUT"

if ss -ltnH "sport = :$PORT" | grep -q .; then
    echo "port $PORT is in use; set PORT" >&2
    exit 2
fi

# label | serve flags | bench flags
CONFIGS=(
    "acks=all shards=2|--shards 2|--acks all"
    "acks=all+fsync shards=2|--shards 2 --set ringbroker.acks.all.fsync=true|--acks all"
    "acks=1 shards=2|--shards 2|--acks 1"
    "acks=all shards=1|--shards 1|--acks all"
    "acks=all shards=2 segment=8MiB|--shards 2 --set log.segment.bytes=8388608|--acks all"
    "acks=all shards=2 flush.ms=100|--shards 2 --set log.flush.interval.ms=100|--acks all"
    "rate=20k acks=all shards=2|--shards 2|--acks all --rate 20000 --duration 10s --warmup 2s"
    "rate=20k acks=all+fsync shards=2|--shards 2 --set ringbroker.acks.all.fsync=true|--acks all --rate 20000 --duration 10s --warmup 2s"
)

run_one() {
    local label=$1 serve=$2 bench=$3 n=$4
    local dir="$OUT/$(echo "$label" | tr ' =+.' '____')-$n"
    rm -rf "$dir"
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    "$RB" serve --listen "127.0.0.1:$PORT" --data-dir "$dir/data" \
        --set ringbroker.metrics.listen=none --set num.partitions=4 $serve \
        >"$dir/broker.out" 2>"$dir/broker.err" &
    local pid=$!
    for _ in $(seq 100); do
        grep -q "listening on" "$dir/broker.out" 2>/dev/null && break
        sleep 0.1
    done
    # Saturation runs send RECORDS records; rate runs (--duration) run for a time instead.
    case "$bench" in *--duration*) ;; *) bench="--records $RECORDS $bench" ;; esac
    # shellcheck disable=SC2086
    "$RB" bench produce --bootstrap "127.0.0.1:$PORT" --record-size 1024 \
        --partitions 4 --quiet --broker-metrics none --out "$dir/bench" $bench \
        >"$dir/bench.out" 2>&1 || true
    kill -TERM "$pid"
    wait "$pid" || true
    python3 - "$label" "$dir/bench/results.json" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"{label:40s} failed: {e}")
    sys.exit(0)
t, l = r["throughput"], r["latency"]["produce_ack"]
ms = lambda us: us / 1000.0
print(f"{label:40s} {t['records_per_sec']:>9.0f} rec/s {t['mb_per_sec']:>7.1f} MB/s  "
      f"ack p50 {ms(l['p50']):7.2f}  p99 {ms(l['p99']):7.2f}  p99.9 {ms(l['p99_9']):7.2f}  "
      f"max {ms(l['max']):7.2f} ms  errors {sum(r['errors'].values())}")
PY
}

echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $(seq "$REPEATS"); do
    for c in "${CONFIGS[@]}"; do
        IFS='|' read -r label serve bench <<<"$c"
        run_one "$label" "$serve" "$bench" "$n"
    done
done
echo "# done, load $(cut -d' ' -f1-3 /proc/loadavg)"
