#!/usr/bin/env bash
# Two broker binaries side by side: produce and consume throughput, and the broker's CPU per
# record, in alternating rounds with one client, so that a change (a refactor, an optimisation)
# is judged by ratios taken under the same machine state.
#
#   bash benches/before_after.sh OLD_BIN NEW_BIN [ROUNDS]
#
#   OLD_BIN, NEW_BIN  `ringbroker` binaries (release builds), e.g. one built from the commit
#                     before a change (git worktree + cargo build --release) and this tree's
#   ROUNDS            rounds (default 3); each round runs OLD then NEW, the next NEW then OLD
#   RECORDS           records per run (default 1000000), 1 KiB each, acks=1, 4 partitions
#   CLIENT            the bench client (default NEW_BIN): the same for both brokers
#
# Each run starts the broker on a fresh data dir on loopback (metrics endpoint off), runs
# `bench produce` then `bench consume` of what was produced, reads the broker's utime+stime
# from /proc around each, and stops it with SIGTERM. Prints every run, then the medians and
# NEW/OLD ratios. Every wait is bounded; the broker is killed on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."

OLD=${1:?usage: before_after.sh OLD_BIN NEW_BIN [ROUNDS]}
NEW=${2:?usage: before_after.sh OLD_BIN NEW_BIN [ROUNDS]}
ROUNDS=${3:-3}
RECORDS=${RECORDS:-1000000}
CLIENT=${CLIENT:-$NEW}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/before-after.XXXXXX")
TICKS=$(getconf CLK_TCK)
PID=

cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill -9 "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# utime + stime of process $1, in clock ticks.
cpu_ticks() {
  awk '{print $14 + $15}' "/proc/$1/stat"
}

# records_per_sec from a bench results.json.
rps() {
  python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["throughput"]["records_per_sec"]))' "$1"
}

median() {
  sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}

# run NAME BIN: one broker, one produce and one consume; appends "NAME prod_rps prod_ns cons_rps cons_ns".
run() {
  local name=$1 bin=$2 port data log
  port=$(free_port)
  data="$WORK/data-$name"
  log="$WORK/broker-$name.log"
  rm -rf "$data" "$WORK/out"
  # Emptied here, not by the background redirect: the wait below must not find the previous
  # run's "listening on" before the new broker's shell has truncated the file.
  : >"$log"
  "$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" \
    --set ringbroker.metrics.listen=none >>"$log" 2>&1 &
  PID=$!
  for _ in $(seq 1 300); do
    grep -q "listening on" "$log" && break
    kill -0 "$PID" 2>/dev/null || { echo "$name: broker exited:" >&2; tail -5 "$log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q "listening on" "$log" || { echo "$name: broker not listening after 30 s" >&2; exit 1; }
  local common=(--bootstrap "127.0.0.1:$port" --records "$RECORDS" --broker-metrics none --quiet)
  local t0 t1 t2
  t0=$(cpu_ticks "$PID")
  timeout 600 "$CLIENT" bench produce "${common[@]}" --record-size 1024 --acks 1 --partitions 4 \
    --out "$WORK/out/produce" >/dev/null
  t1=$(cpu_ticks "$PID")
  timeout 600 "$CLIENT" bench consume "${common[@]}" --out "$WORK/out/consume" >/dev/null
  t2=$(cpu_ticks "$PID")
  kill -TERM "$PID"
  for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$PID" 2>/dev/null; then
    echo "$name: broker did not stop within 30 s of SIGTERM" >&2
    exit 1
  fi
  wait "$PID" 2>/dev/null || true
  PID=
  local ns_per=$((1000000000 / TICKS))
  echo "$name $(rps "$WORK/out/produce/results.json") $(((t1 - t0) * ns_per / RECORDS)) \
$(rps "$WORK/out/consume/results.json") $(((t2 - t1) * ns_per / RECORDS))" | tee -a "$WORK/runs"
}

echo "before/after: $ROUNDS rounds, $RECORDS records of 1 KiB, acks=1, 4 partitions; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "name produce_rps produce_broker_cpu_ns_per_record consume_rps consume_broker_cpu_ns_per_record"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then run old "$OLD"; run new "$NEW"; else run new "$NEW"; run old "$OLD"; fi
done
echo "medians (and new/old):"
for col in 2 3 4 5; do
  o=$(awk -v c=$col '$1=="old"{print $c}' "$WORK/runs" | median)
  n=$(awk -v c=$col '$1=="new"{print $c}' "$WORK/runs" | median)
  label=$(echo "produce_rps produce_cpu_ns consume_rps consume_cpu_ns" | cut -d' ' -f$((col - 1)))
  echo "  $label: old $o, new $n, ratio $(awk -v a="$n" -v b="$o" 'BEGIN{printf "%.2f", (b>0)?a/b:0}')"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
