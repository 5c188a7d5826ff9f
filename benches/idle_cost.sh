#!/usr/bin/env bash
# Idle cost of brokers side by side: each `serve --shards 2` with no client; process CPU
# (utime+stime) over SECS seconds, then `strace -c -f` for 10 s (syscall counts).
#   bash benches/idle_cost.sh NAME=BINARY [NAME=BINARY ...]     env: SECS (60)
# docs/internals/runtime.md ("Idle cost") has the figures.
set -euo pipefail
SECS=${SECS:-60}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
declare -A pids start
for spec in "$@"; do
  name=${spec%%=*} bin=${spec#*=}
  "$bin" serve --listen 127.0.0.1:0 --data-dir "$work/$name" --shards 2 \
    --set ringbroker.metrics.listen=none >"$work/$name.out" 2>"$work/$name.err" &
  pids[$name]=$!
done
sleep 5
tick=$(getconf CLK_TCK)
for name in "${!pids[@]}"; do start[$name]=$(awk '{print $14+$15}' "/proc/${pids[$name]}/stat"); done
sleep "$SECS"
for name in "${!pids[@]}"; do
  end=$(awk '{print $14+$15}' "/proc/${pids[$name]}/stat")
  ticks=$((end - ${start[$name]}))
  echo "$name cpu_ms=$((ticks * 1000 / tick)) over ${SECS}s"
done
for name in "${!pids[@]}"; do
  timeout 10 strace -c -f -p "${pids[$name]}" -o "$work/$name.strace" 2>/dev/null &
done
sleep 11
for name in "${!pids[@]}"; do echo "== $name: syscalls in 10 s"; head -12 "$work/$name.strace"; done
