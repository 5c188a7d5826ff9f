#!/usr/bin/env bash
# Produce throughput and broker CPU with replication: one 3-broker cluster on loopback (every
# broker a voter, 1 shard each, unpinned). Broker 1 leads every partition of both topics
# (`--replica-assignment`), so the CPU of each role is that process's CPU:
#
#   rf1      3 partitions on broker 1 alone             `bench produce --acks all`
#   rf3      3 partitions on 1 (leader), 2 and 3         the same; min.insync.replicas 2
#   rf1 e2e  rf1 read by one consumer as it is written   `bench e2e`: the yardstick
#
#   bash benches/replication.sh [RECORDS] [ROUNDS]
#
#   RECORDS  records per run (default 500000, 1 KiB each)
#   ROUNDS   rounds of (rf1, rf3, rf1 e2e), alternating (default 3); medians are reported
#   BIN      the broker binary (default target/release/ringbroker, built if missing)
#   ACKS     the producers' acks (default all); with 1, RF 3 costs the leader only the
#            followers' fetches, not the acks=all produces it parks and answers as the HW moves
#   BROKER_SETS  extra `--set NAME=VALUE` arguments for every broker, e.g.
#            BROKER_SETS="--set ringbroker.log.io=direct"
#
# CPU is user+system time from /proc/PID/stat over the run, per record acknowledged. What the
# rows give: a consumer's cost at the leader is `e2e leader - rf1 leader`; a follower's cost
# at the leader is `(rf3 leader - rf1 leader) / 2`; its own cost (fetching and appending) is
# the follower column. Fetches and produces per 1000 records come from the brokers' metrics:
# round trips are most of the cost. Everything runs on this machine, so the load generator
# competes with the brokers for cores: compare rows of one run, not with other machines.
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${1:-500000}
ROUNDS=${2:-3}
BIN=${BIN:-target/release/ringbroker}
ACKS=${ACKS:-all}
read -r -a EXTRA <<<"${BROKER_SETS:-}"
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
declare -A PORT CPORT MPORT
for n in 1 2 3; do PORT[$n]=$(free_port); CPORT[$n]=$(free_port); MPORT[$n]=$(free_port); done
VOTERS="1@127.0.0.1:${CPORT[1]},2@127.0.0.1:${CPORT[2]},3@127.0.0.1:${CPORT[3]}"
for n in 1 2 3; do
  mkdir -p "$WORK/data-$n"
  "$BIN" serve --data-dir "$WORK/data-$n" --shards 1 \
    --set "node.id=$n" --set process.roles=broker,controller \
    --set "controller.quorum.voters=$VOTERS" \
    --set "listeners=PLAINTEXT://127.0.0.1:${PORT[$n]},CONTROLLER://127.0.0.1:${CPORT[$n]}" \
    --set "advertised.listeners=PLAINTEXT://127.0.0.1:${PORT[$n]}" \
    --set ringbroker.pin.shards=false --set "ringbroker.metrics.listen=127.0.0.1:${MPORT[$n]}" \
    "${EXTRA[@]}" >"$WORK/broker-$n.out" 2>"$WORK/broker-$n.err" &
  PIDS+=($!)
done
BOOT="127.0.0.1:${PORT[1]}"
for _ in $(seq 100); do
  if "$BIN" topic create rf1 --bootstrap "$BOOT" --replica-assignment 1,1,1 >/dev/null 2>&1; then break; fi
  sleep 0.3
done
"$BIN" topic create rf3 --bootstrap "$BOOT" --replica-assignment 1:2:3,1:3:2,1:2:3 \
  -c min.insync.replicas=2 >/dev/null
sleep 3

# CPU ticks of broker N.
cpu_ticks() {
  local f
  read -r -a f <"/proc/${PIDS[$(($1 - 1))]}/stat"
  echo $((f[13] + f[14]))
}
HZ=$(getconf CLK_TCK)

# Minor page faults of broker N: new memory touched (a buffer the allocator got afresh).
minor_faults() {
  local f
  read -r -a f <"/proc/${PIDS[$(($1 - 1))]}/stat"
  echo "${f[9]}"
}

# Requests of one API completed by the three brokers (their metrics endpoints).
requests() {
  local total=0 n v
  for n in 1 2 3; do
    v=$(curl -s "http://127.0.0.1:${MPORT[$n]}/metrics" |
      awk -v api="$1" '$1 ~ "^ringbroker_requests_total" && $1 ~ "api=\"" api "\"" {s += $2} END {printf "%d", s}')
    total=$((total + v))
  done
  echo "$total"
}

per_record() { python3 -c "print(round($1 / $RECORDS, 2))"; }

# One run: rate, leader µs/record, mean follower µs/record, fetches and produces per 1000.
run() {
  local mode=$1 topic=$2 out n
  local fetch_before produce_before
  fetch_before=$(requests Fetch)
  produce_before=$(requests Produce)
  local -a before after
  local -a faults_before faults_after
  for n in 1 2 3; do before[n]=$(cpu_ticks "$n") faults_before[n]=$(minor_faults "$n"); done
  out=$("$BIN" bench "$mode" --bootstrap "$BOOT" --topic "$topic" --records "$RECORDS" \
    --record-size 1024 --acks "$ACKS" --broker-metrics none --quiet 2>&1)
  for n in 1 2 3; do after[n]=$(cpu_ticks "$n") faults_after[n]=$(minor_faults "$n"); done
  local rate leader follower fetches produces
  rate=$(echo "$out" | grep -oE '[0-9.]+ records/s' | head -1 | cut -d' ' -f1)
  leader=$(per_record "(${after[1]} - ${before[1]}) / $HZ * 1e6")
  follower=$(per_record "(${after[2]} - ${before[2]} + ${after[3]} - ${before[3]}) / 2 / $HZ * 1e6")
  fetches=$(per_record "($(requests Fetch) - $fetch_before) * 1000")
  produces=$(per_record "($(requests Produce) - $produce_before) * 1000")
  local leader_faults follower_faults
  leader_faults=$(per_record "(${faults_after[1]} - ${faults_before[1]}) * 1000")
  follower_faults=$(per_record "(${faults_after[2]} - ${faults_before[2]} + ${faults_after[3]} - ${faults_before[3]}) / 2 * 1000")
  echo "$rate $leader $follower $fetches $produces $leader_faults $follower_faults"
}

declare -a RATE1 RATE3 RATEC L1 L3 LC F3
report() {
  echo "round $1 $2: $3 rec/s; CPU us/record: leader $4, each follower $5; per 1000 records: $6 fetches, $7 produces, page faults leader $8, each follower $9"
}
for round in $(seq "$ROUNDS"); do
  read -r rate l f fe pr lpf fpf < <(run produce rf1)
  RATE1+=("$rate"); L1+=("$l"); report "$round" rf1 "$rate" "$l" "$f" "$fe" "$pr" "$lpf" "$fpf"
  read -r rate l f fe pr lpf fpf < <(run produce rf3)
  RATE3+=("$rate"); L3+=("$l"); F3+=("$f"); report "$round" rf3 "$rate" "$l" "$f" "$fe" "$pr" "$lpf" "$fpf"
  read -r rate l f fe pr lpf fpf < <(run e2e rf1)
  RATEC+=("$rate"); LC+=("$l"); report "$round" "rf1 e2e" "$rate" "$l" "$f" "$fe" "$pr" "$lpf" "$fpf"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m1=$(median "${L1[@]}") m3=$(median "${L3[@]}") mc=$(median "${LC[@]}") mf=$(median "${F3[@]}")
echo "median rf1: $(median "${RATE1[@]}") rec/s, leader $m1 us CPU/record"
echo "median rf3: $(median "${RATE3[@]}") rec/s, leader $m3 us CPU/record, each follower $mf"
echo "median rf1 e2e (1 consumer): $(median "${RATEC[@]}") rec/s, leader $mc us CPU/record"
python3 - "$m1" "$m3" "$mc" "$mf" <<'EOF'
import sys
rf1, rf3, e2e, follower = map(float, sys.argv[1:])
print(f"a consumer's reads at the leader: {e2e - rf1:.2f} us/record")
print(f"a follower at the leader: {(rf3 - rf1) / 2:.2f} us/record; at the follower: {follower:.2f} us/record")
EOF
