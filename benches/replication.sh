#!/usr/bin/env bash
# Produce throughput and broker CPU with replication: one 3-broker cluster on loopback (every
# broker a voter, 1 shard each, unpinned), topics with RF 1 and RF 3 (min.insync.replicas 2),
# `ringbroker bench produce --acks all` against each, alternating rounds.
#
#   bash benches/replication.sh [RECORDS] [ROUNDS]
#
#   RECORDS  records per run (default 500000, 1 KiB each)
#   ROUNDS   rounds of (RF 1, RF 3) (default 3); the medians are reported
#   BIN      the broker binary (default target/release/ringbroker, built if missing)
#
# Broker CPU is the three brokers' user+system time (from /proc/PID/stat) over the run, per
# record acknowledged: with RF 3 it includes the two followers' fetching and appending. A
# third row, RF 1 read by one consumer as it is written (`bench e2e`), is the yardstick: a
# follower should cost no more than that consumer's reads (the row minus the RF 1 row).
# Everything runs on this machine, so the load generator competes with the brokers for cores:
# compare the two rows of one run, not with other machines.
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${1:-500000}
ROUNDS=${2:-3}
BIN=${BIN:-target/release/ringbroker}
[ -x "$BIN" ] || cargo build --release --bin ringbroker
WORK=$(mktemp -d /tmp/ringbroker-replication-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
declare -A PORT CPORT
for n in 1 2 3; do PORT[$n]=$(free_port); CPORT[$n]=$(free_port); done
VOTERS="1@127.0.0.1:${CPORT[1]},2@127.0.0.1:${CPORT[2]},3@127.0.0.1:${CPORT[3]}"
for n in 1 2 3; do
  mkdir -p "$WORK/data-$n"
  "$BIN" serve --data-dir "$WORK/data-$n" --shards 1 \
    --set "node.id=$n" --set process.roles=broker,controller \
    --set "controller.quorum.voters=$VOTERS" \
    --set "listeners=PLAINTEXT://127.0.0.1:${PORT[$n]},CONTROLLER://127.0.0.1:${CPORT[$n]}" \
    --set "advertised.listeners=PLAINTEXT://127.0.0.1:${PORT[$n]}" \
    --set ringbroker.pin.shards=false --set ringbroker.metrics.listen=none \
    >"$WORK/broker-$n.out" 2>"$WORK/broker-$n.err" &
  PIDS+=($!)
done
BOOT="127.0.0.1:${PORT[1]}"
for _ in $(seq 100); do
  if "$BIN" topic create rf1 --bootstrap "$BOOT" -p 3 -r 1 >/dev/null 2>&1; then break; fi
  sleep 0.3
done
"$BIN" topic create rf3 --bootstrap "$BOOT" -p 3 -r 3 -c min.insync.replicas=2 >/dev/null
sleep 3

cpu_ticks() {
  local total=0
  for p in "${PIDS[@]}"; do
    read -r -a f <"/proc/$p/stat"
    total=$((total + f[13] + f[14]))
  done
  echo "$total"
}
HZ=$(getconf CLK_TCK)

run() {
  local mode=$1 topic=$2 before after out
  before=$(cpu_ticks)
  out=$("$BIN" bench "$mode" --bootstrap "$BOOT" --topic "$topic" --records "$RECORDS" \
    --record-size 1024 --acks all --quiet 2>&1)
  after=$(cpu_ticks)
  local rate
  rate=$(echo "$out" | grep -oE '[0-9.]+ records/s' | head -1 | cut -d' ' -f1)
  local us
  us=$(python3 -c "print(round(($after - $before) / $HZ * 1e6 / $RECORDS, 2))")
  echo "$topic $rate $us"
}

declare -a R1 R3 RC C1 C3 CC
for round in $(seq "$ROUNDS"); do
  read -r _ rate cpu < <(run produce rf1); R1+=("$rate"); C1+=("$cpu")
  echo "round $round rf1: $rate rec/s, broker CPU $cpu us/record"
  read -r _ rate cpu < <(run produce rf3); R3+=("$rate"); C3+=("$cpu")
  echo "round $round rf3: $rate rec/s, broker CPU $cpu us/record"
  # The yardstick for a follower's cost: RF 1 read by a consumer as it is written (e2e).
  read -r _ rate cpu < <(run e2e rf1); RC+=("$rate"); CC+=("$cpu")
  echo "round $round rf1 e2e (1 consumer): $rate rec/s, broker CPU $cpu us/record"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median rf1: $(median "${R1[@]}") rec/s, $(median "${C1[@]}") us broker CPU/record"
echo "median rf3: $(median "${R3[@]}") rec/s, $(median "${C3[@]}") us broker CPU/record"
echo "median rf1 e2e (1 consumer): $(median "${RC[@]}") rec/s, $(median "${CC[@]}") us broker CPU/record"
