#!/usr/bin/env bash
# Where a ringbroker broker's CPU goes under one of benches/compare's workloads: per-thread
# utime+stime from /proc/PID/task/*/stat over the run, grouped by thread name (shard threads,
# io_uring workers iou-wrk-*, the rest), and with PERF=1 a cpu-clock `perf record` of the broker
# processes (hardware counters are not available in this VM) with its top symbols.
#
#   bash benches/compare/profile.sh produce 1024 1000 1 1 500000   # mode size partitions nodes acks records
#   bash benches/compare/profile.sh e2e 1024 4 3 all 50000           # e2e: the last figure is the rate
#
# Env: RB_BIN (target/release/ringbroker), SHARDS (2), PERF (1 if `perf` works), SECONDS_E2E (10).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
mode=${1:-produce} size=${2:-1024} parts=${3:-4} nodes=${4:-1} acks=${5:-1} n=${6:-500000}
SHARDS="${SHARDS:-2}"; NICE=0; KAFKA_HEAP=1G
out="$repo/target/compare/profile-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out/logs" "$out/data"
log() { printf '[profile %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }
free_ports() { python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
[s.bind(("127.0.0.1",0)) for s in ss]
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"; }
wait_port() { for _ in $(seq 1 $(($3 * 20))); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; kill -0 "$2" 2>/dev/null || return 1; sleep 0.05; done; return 1; }
rb="${RB_BIN:-$repo/target/release/ringbroker}"
kafka_sh="$repo/tests/kafka/kafka.sh"
source "$here/brokers.sh"
perf_pid=
cleanup() {
  [[ -n "$perf_pid" ]] && kill -INT "$perf_pid" 2>/dev/null
  local p; for p in "${started_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true; rm -rf "$out/data"
}
trap cleanup EXIT

# "tid comm ticks" for every thread of the broker processes
threads() {
  local p t
  for p in "${bpids[@]}"; do
    for t in /proc/"$p"/task/*; do
      awk -v tid="${t##*/}" '{ s = $0; sub(/^[0-9]+ \(/, "", s); c = substr(s, 1, index(s, ") ") - 1);
        sub(/^.*\) /, "", s); split(s, f, " "); gsub(/ /, "_", c); print tid, c, f[12] + f[13] }' "$t/stat" 2>/dev/null || true
    done
  done
}

start_broker ringbroker "$nodes"
create_topic prof "$parts"
threads >"$out/threads.before"
use_perf=${PERF:-$(perf stat -e cpu-clock true >/dev/null 2>&1 && echo 1 || echo 0)}
if [[ $use_perf == 1 ]]; then
  perf record -e cpu-clock -F 999 -g -o "$out/perf.data" -p "$(IFS=,; echo "${bpids[*]}")" >"$out/perf.log" 2>&1 &
  perf_pid=$!
  sleep 1
fi
t0=$(date +%s.%N)
if [[ $mode == produce ]]; then
  timeout 600 "$rb" bench produce --bootstrap "$b" --topic prof --record-size "$size" --records "$n" --acks "$acks" \
    --compression none --batch-size 1048576 --broker-metrics none --quiet --out "$out/bench" >"$out/bench.txt" 2>&1
else
  timeout 600 "$rb" bench e2e --bootstrap "$b" --topic prof --record-size "$size" --duration "${SECONDS_E2E:-10}s" \
    --warmup 2s --rate "$n" --acks "$acks" --compression none --batch-size 1048576 --broker-metrics none --quiet \
    --out "$out/bench" >"$out/bench.txt" 2>&1
fi
t1=$(date +%s.%N)
threads >"$out/threads.after"
if [[ -n "$perf_pid" ]]; then kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null || true; perf_pid=; fi
recs=$(python3 -c "import json; d=json.load(open('$out/bench/results.json')); print(d['totals']['records_acked'] if 'totals' in d else d['throughput']['records'])")
python3 - "$out/threads.before" "$out/threads.after" "$recs" "$(getconf CLK_TCK)" "$t0" "$t1" <<'PY' | tee "$out/threads.md"
import re, sys
def rd(p):
    return {l.split()[0]: (l.split()[1], float(l.split()[2])) for l in open(p) if l.strip()}
a, b = rd(sys.argv[1]), rd(sys.argv[2])
recs, hz, wall = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[6]) - float(sys.argv[5])
groups = {}
for tid, (comm, t) in b.items():
    d = t - a.get(tid, (comm, 0))[1]
    g = "iou-wrk-*" if comm.startswith("iou-wrk") else re.sub(r"[0-9]+$", "N", comm)
    groups.setdefault(g, [0, 0])
    groups[g][0] += d; groups[g][1] += 1
tot = sum(v[0] for v in groups.values()) or 1
print(f"{recs} records in {wall:.1f} s; broker threads' CPU {tot / hz:.2f} s = {tot / hz * 1e9 / max(recs, 1):.0f} ns per record")
print("| thread group | threads | CPU s | share | ns per record |")
print("| --- | ---: | ---: | ---: | ---: |")
for g, (d, c) in sorted(groups.items(), key=lambda x: -x[1][0]):
    if d > 0:
        print(f"| {g} | {c} | {d / hz:.2f} | {100 * d / tot:.0f} % | {d / hz * 1e9 / max(recs, 1):.0f} |")
print("(threads that exited during the run are missing from this split)")
PY
if [[ -f "$out/perf.data" ]]; then
  perf report -i "$out/perf.data" --no-children --sort comm,dso,symbol --stdio 2>/dev/null | grep -v '^#' | grep -E '^ +[0-9]' | head -40 >"$out/perf-top.txt" || true
  cat "$out/perf-top.txt"
fi
stop_broker
log "in $out"
