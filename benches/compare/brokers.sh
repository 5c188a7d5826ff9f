# Brokers for benches/compare/run.sh (sourced): start, stop, create topics, and what the broker
# processes cost (CPU ticks, resident memory). One broker (or one 3-node cluster) at a time.
#
# After start_broker: $b (bootstrap servers), bpids (every broker process: one per node; for
# the JVM the java process, whose /proc/PID/stat counts all its threads), $bname, $bnodes.

bpids=()
bname=
bnodes=1
kafka_dir=

# Every process this file starts is in started_pids (cleanup kills what is left).
started_pids=()

start_ringbroker_single() {
  local port; port=$(free_ports 1)
  local d="$out/data/ringbroker"
  rm -rf "$d"; mkdir -p "$d"
  : >"$out/logs/ringbroker.log"
  nice -n "$NICE" "$rb" serve --listen "127.0.0.1:$port" --data-dir "$d" --shards "$SHARDS" \
    --set ringbroker.metrics.listen=none >>"$out/logs/ringbroker.log" 2>&1 &
  bpids=($!); started_pids+=($!)
  wait_port "$port" "${bpids[0]}" 30 || die "ringbroker did not start (see $out/logs/ringbroker.log)"
  b="127.0.0.1:$port"
}

# As tests/interop/cluster_nodes.py starts a cluster: every node broker and controller, one
# unpinned shard each, its own data dir, metrics off; default timeouts.
start_ringbroker_cluster() { # $1 nodes
  local n=$1 ps voters="" i
  read -r -a ps <<<"$(free_ports $((2 * n)))"
  b=""
  for i in $(seq 1 "$n"); do
    voters+="${voters:+,}$i@127.0.0.1:${ps[$((n + i - 1))]}"
    b+="${b:+,}127.0.0.1:${ps[$((i - 1))]}"
  done
  bpids=()
  for i in $(seq 1 "$n"); do
    local d="$out/data/ringbroker-$i" port=${ps[$((i - 1))]} cport=${ps[$((n + i - 1))]}
    rm -rf "$d"; mkdir -p "$d"
    : >"$out/logs/ringbroker-$i.log"
    RUST_LOG="${RUST_LOG:-info,openraft=warn}" nice -n "$NICE" "$rb" serve --data-dir "$d" --shards 1 \
      --set "node.id=$i" --set process.roles=broker,controller \
      --set "controller.quorum.voters=$voters" \
      --set "listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport" \
      --set "advertised.listeners=PLAINTEXT://127.0.0.1:$port" \
      --set ringbroker.pin.shards=false --set ringbroker.metrics.listen=none \
      >>"$out/logs/ringbroker-$i.log" 2>&1 &
    bpids+=($!); started_pids+=($!)
  done
  for i in $(seq 1 "$n"); do
    wait_port "${ps[$((i - 1))]}" "${bpids[$((i - 1))]}" 60 \
      || die "ringbroker node $i did not start (see $out/logs/ringbroker-$i.log)"
  done
}

start_tansu() {
  local port; port=$(free_ports 1)
  nice -n "$NICE" "$tansu" broker --listener-url "tcp://127.0.0.1:$port" \
    --advertised-listener-url "tcp://127.0.0.1:$port" --storage-engine memory://tansu/ \
    >>"$out/logs/tansu.log" 2>&1 &
  bpids=($!); started_pids+=($!)
  wait_port "$port" "${bpids[0]}" 30 || die "tansu did not start (see $out/logs/tansu.log)"
  b="127.0.0.1:$port"
}

# kafka (heap KAFKA_HEAP, 1G by default: Kafka's own default) or kafka-<HEAP> (e.g. kafka-6G:
# that heap with the JVM flags Kafka's documentation recommends for production).
start_kafka() { # $1 heap $2 nodes
  local heap=$1 n=$2 jopts=""
  kafka_dir="$out/data/kafka"
  rm -rf "$kafka_dir"
  [[ "$heap" == 1G ]] || jopts="-XX:G1HeapRegionSize=16M -XX:MetaspaceSize=96m -XX:MinMetaspaceFreeRatio=50 -XX:MaxMetaspaceFreeRatio=80"
  b=$(KAFKA_JAVA_OPTS="$jopts" timeout 300 nice -n "$NICE" bash "$kafka_sh" start "$kafka_dir" --nodes "$n" \
        --heap "$heap" 2>>"$out/logs/kafka-start.log") || die "kafka did not start (see $out/logs/kafka-start.log)"
  bpids=()
  local i
  for i in $(seq 1 "$n"); do bpids+=("$(cat "$kafka_dir/node-$i/pid")"); done
}

start_broker() { # $1 broker name, $2 nodes
  bname=$1; bnodes=$2
  case "$1" in
    ringbroker) if (( $2 == 1 )); then start_ringbroker_single; else start_ringbroker_cluster "$2"; fi ;;
    tansu) (( $2 == 1 )) || die "tansu runs as a single broker only"; start_tansu ;;
    kafka) start_kafka "$KAFKA_HEAP" "$2" ;;
    kafka-*) start_kafka "${1#kafka-}" "$2" ;;
    *) die "unknown broker $1" ;;
  esac
  log "$bname ($2 node(s)) at $b, pids ${bpids[*]}"
}

# The data goes with the broker: each throughput phase writes a few GB.
stop_broker() {
  case "$bname" in
    kafka*) timeout 120 bash "$kafka_sh" stop "$kafka_dir" || true ;;
    *)
      local p
      for p in "${bpids[@]}"; do kill "$p" 2>/dev/null || true; done
      for p in "${bpids[@]}"; do
        for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
      done
      ;;
  esac
  bpids=()
  rm -rf "$out/data"
  mkdir -p "$out/data"
}

brokers_alive() { local p; for p in "${bpids[@]}"; do kill -0 "$p" 2>/dev/null || return 1; done; }

# Topics are created up front (auto-created, a topic would get the broker's default partition
# count), with ringbroker's CLI for every broker (it speaks CreateTopics); on a cluster with
# replication factor 3 and min.insync.replicas=2, as the OpenMessaging Benchmark's Kafka driver
# sets them. Retried while the cluster is still forming.
create_topic() { # $1 name $2 partitions
  local extra=()
  (( bnodes == 1 )) || extra=(-r 3 -c min.insync.replicas=2)
  local i
  for i in $(seq 1 40); do
    if timeout 120 "$rb" topic create "$1" -p "$2" "${extra[@]}" --if-not-exists -b "$b" \
      >>"$out/logs/topics.log" 2>&1; then
      return 0
    fi
    sleep 1
  done
  log "could not create $1 on $bname (see $out/logs/topics.log)"
  return 1
}

# ------------------------------------------------------------------ cost of the broker processes
hz=$(getconf CLK_TCK)
broker_ticks() { # utime + stime of every broker process (all its threads), in clock ticks
  local p t=0 v
  for p in "${bpids[@]}"; do
    v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    t=$((t + v))
  done
  echo "$t"
}
# Broker CPU ns per record between two tick readings: $1 before, $2 after, $3 records.
cpu_ns() {
  awk -v a="$1" -v b="$2" -v n="$3" -v hz="$hz" \
    'BEGIN { if (n + 0 > 0) printf "%.0f\n", (b - a) * 1e9 / hz / n; else print "-" }'
}

# Resident memory: the sum of VmRSS over the broker processes, sampled every 0.25 s into a
# file while a step runs (a bounded loop: at most RSS_MAX_SAMPLES samples).
rss_pid=
rss_file=
rss_start() { # $1 file
  rss_file=$1
  : >"$rss_file"
  (
    for _ in $(seq 1 "${RSS_MAX_SAMPLES:-7200}"); do
      s=0
      for p in "${bpids[@]}"; do
        v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
        s=$((s + ${v:-0}))
      done
      echo "$s" >>"$rss_file"
      sleep 0.25
    done
  ) &
  rss_pid=$!
}
rss_stop() { # sets rss_peak and rss_med (MiB)
  [[ -n "$rss_pid" ]] && { kill "$rss_pid" 2>/dev/null || true; wait "$rss_pid" 2>/dev/null || true; }
  rss_pid=
  read -r rss_peak rss_med < <(sort -n "$rss_file" | awk '{v[NR] = $1}
    END { if (NR == 0) { print "- -"; exit } printf "%.0f %.0f\n", v[NR] / 1024, v[int((NR + 1) / 2)] / 1024 }')
}
