#!/usr/bin/env bash
# `ringbroker bench` against librdkafka's rdkafka_performance, same broker, same shape, in
# alternating rounds: is the project's load generator at least as fast as librdkafka?
#
#   bash benches/kafka_perf/client_vs_rdkafka.sh            # 3 rounds of produce, then consume
#
# Shape: 1 KiB values, no compression, acks=1, 4 partitions, linger 5 ms, batches of up to
# 1 MB per partition (librdkafka's batch.size default; `--batch-size` for ringbroker bench).
# One fresh broker (release build, `serve --shards 2`, unpinned) serves every round; each
# produce round writes its own topic. Consume rounds read one topic written by ringbroker bench.
# Prints every round, the medians and the ratio ringbroker bench / rdkafka_performance, with
# the load average before each run (the machine is shared).
#
# Env: ROUNDS (3), RECORDS (1000000), PORT (29192), METRICS_PORT (29744), BATCH (1048576),
#      RINGBROKER (target/release/ringbroker), RDKAFKA (target/kafka_perf/bin/rdkafka_performance)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${ROUNDS:=3}" "${RECORDS:=1000000}" "${PORT:=29192}" "${METRICS_PORT:=29744}" "${BATCH:=1048576}"
: "${RINGBROKER:=${CARGO_TARGET_DIR:-$repo/target}/release/ringbroker}"
: "${RDKAFKA:=$repo/target/kafka_perf/bin/rdkafka_performance}"
rounds=$ROUNDS records=$RECORDS batch=$BATCH rb=$RINGBROKER rdk=$RDKAFKA
metrics_port=$METRICS_PORT addr="127.0.0.1:$PORT"

for bin in "$rb" "$rdk"; do
    [[ -x "$bin" ]] || { echo "missing $bin (cargo build --release; build_rdkafka_performance.sh)" >&2; exit 2; }
done

work="$repo/target/kafka_perf/client-vs-rdkafka/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$work"
cp "$rb" "$work/ringbroker"
"$work/ringbroker" serve --listen "$addr" --data-dir "$work/data" --shards 2 \
    --set num.partitions=4 --set "ringbroker.metrics.listen=127.0.0.1:$metrics_port" \
    >"$work/broker.log" 2>&1 &
broker=$!
trap 'kill "$broker" 2>/dev/null || true; wait "$broker" 2>/dev/null || true; rm -rf "$work/data"' EXIT
for _ in $(seq 100); do
    grep -q "listening on" "$work/broker.log" && break
    sleep 0.1
done

load() { cut -d' ' -f1 /proc/loadavg; }

rdk_produce() { # topic → msgs/s
    timeout 300 "$rdk" -P -t "$1" -b "$addr" -s 1024 -z none -X linger.ms=5 -c "$records" -a 1 \
        >"$work/$1.log" 2>&1
    tail -1 "$work/$1.log" | sed -n 's/.* \([0-9]*\) msgs\/s.*/\1/p'
}
rb_produce() { # topic → records/s
    timeout 300 "$work/ringbroker" bench produce --bootstrap "$addr" --topic "$1" --partitions 4 \
        --records "$records" --record-size 1024 --acks 1 --compression none --linger-ms 5 \
        --batch-size "$batch" --quiet --broker-metrics none >"$work/$1.log" 2>&1
    sed -n 's/^produced: .*, \([0-9]*\) records\/s.*/\1/p' "$work/$1.log"
}
rdk_consume() { # topic → msgs/s
    timeout 300 "$rdk" -C -t "$1" -b "$addr" -p 0 -p 1 -p 2 -p 3 -o beginning -e \
        >"$work/consume-rdk-$2.log" 2>&1
    sed -n 's/.* consumed in .*: \([0-9]*\) msgs\/s.*/\1/p' "$work/consume-rdk-$2.log" | tail -1
}
rb_consume() { # topic → records/s
    timeout 300 "$work/ringbroker" bench consume --bootstrap "$addr" --topic "$1" \
        --quiet --broker-metrics none >"$work/consume-rb-$2.log" 2>&1
    sed -n 's/^consumed: .*, \([0-9]*\) records\/s.*/\1/p' "$work/consume-rb-$2.log"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

declare -a p_rdk p_rb c_rdk c_rb
echo "| round | workload | client | load avg | records/s |"
echo "| ---: | --- | --- | ---: | ---: |"
for r in $(seq "$rounds"); do
    l=$(load); v=$(rdk_produce "rk-$r"); p_rdk+=("$v"); echo "| $r | produce | rdkafka_performance | $l | $v |"
    l=$(load); v=$(rb_produce "rb-$r"); p_rb+=("$v"); echo "| $r | produce | ringbroker bench | $l | $v |"
done
for r in $(seq "$rounds"); do
    l=$(load); v=$(rdk_consume rb-1 "$r"); c_rdk+=("$v"); echo "| $r | consume | rdkafka_performance | $l | $v |"
    l=$(load); v=$(rb_consume rb-1 "$r"); c_rb+=("$v"); echo "| $r | consume | ringbroker bench | $l | $v |"
done
mp_rdk=$(printf '%s\n' "${p_rdk[@]}" | median); mp_rb=$(printf '%s\n' "${p_rb[@]}" | median)
mc_rdk=$(printf '%s\n' "${c_rdk[@]}" | median); mc_rb=$(printf '%s\n' "${c_rb[@]}" | median)
echo
echo "| workload | rdkafka_performance median | ringbroker bench median | ratio |"
echo "| --- | ---: | ---: | ---: |"
awk -v a="$mp_rdk" -v b="$mp_rb" 'BEGIN {printf "| produce | %d | %d | %.2f |\n", a, b, b / a}'
awk -v a="$mc_rdk" -v b="$mc_rb" 'BEGIN {printf "| consume | %d | %d | %.2f |\n", a, b, b / a}'
echo
echo "logs: $work (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
