# Clients for benches/compare/run.sh (sourced). Every function runs one client against $b and
# sets: rate (records/s, or 0 when it failed), recs (records it moved), and for latency runs
# lat ("p50 p99 p99.9 max" in ms, or "- - - -"), lat_ack (produce acknowledgement, bench e2e).
# $1 is always the run's file prefix (under $out/runs/), then the topic, then what varies.
# The workload's SIZE and the acks value come from the caller's $size and $acks.

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
ms4="' '.join('%.2f' % (d['latency'][K][k] / 1000) for k in ('p50','p99','p99_9','max'))"

# librdkafka's rdkafka_performance -P, as fast as it goes (or at -r $4 with -l: produce latency
# per message, from its -A file).
rdkafka_produce() { # $1 prefix $2 topic $3 records [$4 rate]
  rate=0; recs=0; lat="- - - -"
  [[ -n "$perf" ]] || return 0
  local a=$acks; [[ "$a" == all ]] && a=-1
  local extra=()
  [[ -n "${4:-}" ]] && extra=(-r "$4" -l -A "$1.lat_us")
  timeout "${STEP_TIMEOUT}" nice -n "$NICE" "$perf" -P -t "$2" -b "$b" -s "$size" -z none \
    -X linger.ms=5 -c "$3" -a "$a" -i 5000 "${extra[@]}" >"$1.txt" 2>&1 || { log "rdkafka_performance failed ($1.txt)"; return 0; }
  rate=$(grep -a 'messages produced' "$1.txt" | tail -1 | sed -nE 's/.*: ([0-9]+) msgs\/s and .*/\1/p')
  rate=${rate:-0}; recs=$3
  if [[ -n "${4:-}" && -s "$1.lat_us" ]]; then
    lat=$(sort -n "$1.lat_us" | awk '{v[NR] = $1}
      function q(p,  i) { i = int(p * NR + 0.999999); if (i < 1) i = 1; if (i > NR) i = NR; return v[i] / 1000 }
      END { printf "%.2f %.2f %.2f %.2f\n", q(0.50), q(0.99), q(0.999), v[NR] / 1000 }')
    rm -f "$1.lat_us"
  fi
}

# Kafka's kafka-producer-perf-test (Java client, the jars of tests/kafka/kafka.sh), batch.size
# 1 MiB and linger.ms 5 as the other clients; --throughput -1 (max) or a rate. Its latency
# figures are per record, from send() to the callback.
kafka_produce() { # $1 prefix $2 topic $3 records [$4 rate]
  rate=0; recs=0; lat="- - - -"
  timeout "${STEP_TIMEOUT}" nice -n "$NICE" bash "$kafka_sh" tool kafka-producer-perf-test --topic "$2" --num-records "$3" \
    --record-size "$size" --throughput "${4:--1}" --producer-props "bootstrap.servers=$b" "acks=$acks" \
    linger.ms=5 batch.size=1048576 compression.type=none >"$1.txt" 2>&1 || { log "kafka-producer-perf-test failed ($1.txt)"; return 0; }
  # N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, p50 ms 50th, p95 ms 95th, p99 ms 99th, p999 ms 99.9th.
  local last; last=$(grep -a 'records sent' "$1.txt" | tail -1)
  [[ -n "$last" ]] || return 0
  read -r recs rate lat < <(sed -nE 's/^([0-9]+) records sent, ([0-9.]+) records\/sec .*, ([0-9.]+) ms max latency, ([0-9]+) ms 50th, ([0-9]+) ms 95th, ([0-9]+) ms 99th, ([0-9]+) ms 99.9th.*/\1 \2 \4 \6 \7 \3/p' <<<"$last")
  rate=${rate%.*}; rate=${rate:-0}; recs=${recs:-0}
}

# Kafka's kafka-consumer-perf-test: a group consumer from the earliest offset; the rate is its
# fetch.nMsg.sec (without the group join).
kafka_consume() { # $1 prefix $2 topic $3 records
  rate=0; recs=0
  timeout "${STEP_TIMEOUT}" nice -n "$NICE" bash "$kafka_sh" tool kafka-consumer-perf-test --bootstrap-server "$b" --topic "$2" \
    --messages "$3" --timeout 30000 --group "cmp-$RANDOM$RANDOM" >"$1.txt" 2>&1 || { log "kafka-consumer-perf-test failed ($1.txt)"; return 0; }
  # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
  local row; row=$(grep -aE '^[0-9]{4}-' "$1.txt" | tail -1)
  [[ -n "$row" ]] || return 0
  recs=$(awk -F', *' '{print $5}' <<<"$row"); rate=$(awk -F', *' '{printf "%.0f", $10}' <<<"$row")
}

bench_produce() { # $1 prefix $2 topic $3 records
  rate=0; recs=0
  timeout "${STEP_TIMEOUT}" nice -n "$NICE" "$rb" bench produce --bootstrap "$b" --topic "$2" \
    --record-size "$size" --records "$3" --acks "$acks" --compression none --batch-size 1048576 \
    --broker-metrics none --quiet --out "$1" >"$1.txt" 2>&1 || { log "bench produce failed ($1.txt)"; return 0; }
  rate=$(json "$1/results.json" "round(d['throughput']['records_per_sec'])")
  recs=$(json "$1/results.json" "d['throughput']['records']")
}

bench_consume() { # $1 prefix $2 topic $3 records
  rate=0; recs=0
  timeout "${STEP_TIMEOUT}" nice -n "$NICE" "$rb" bench consume --bootstrap "$b" --topic "$2" \
    --records "$3" --broker-metrics none --quiet --out "$1" >"$1.txt" 2>&1 || { log "bench consume failed ($1.txt)"; return 0; }
  rate=$(json "$1/results.json" "round(d['throughput']['records_per_sec'])")
  recs=$(json "$1/results.json" "d['throughput']['records']")
}

# ringbroker bench e2e: open loop at $3 records/s (latency from each record's scheduled time:
# coordinated omission corrected), produce acknowledgement and end to end.
bench_e2e() { # $1 prefix $2 topic $3 rate
  rate=0; recs=0; lat="- - - -"; lat_ack="- - - -"
  timeout "${STEP_TIMEOUT}" nice -n "$NICE" "$rb" bench e2e --bootstrap "$b" --topic "$2" \
    --record-size "$size" --duration "${LAT_SECONDS}s" --warmup "${LAT_WARMUP}s" --rate "$3" \
    --acks "$acks" --compression none --batch-size 1048576 --broker-metrics none --quiet --out "$1" \
    >"$1.txt" 2>&1 || { log "bench e2e failed ($1.txt)"; return 0; }
  lat_ack=$(json "$1/results.json" "${ms4//K/\'produce_ack\'}")
  lat=$(json "$1/results.json" "${ms4//K/\'end_to_end\'}")
  recs=$(json "$1/results.json" "d['totals']['records_acked']")
  rate=$(json "$1/results.json" "round(d['throughput']['records_per_sec'])")
}

# Keyed records (10,000 keys), librdkafka's Java-compatible murmur2 partitioner, through
# confluent-kafka (Python; installed with pip when missing).
keyed_produce() { # $1 prefix $2 topic $3 records
  rate=0; recs=0
  timeout "${STEP_TIMEOUT}" nice -n "$NICE" python3 "$here/keyed_producer.py" --bootstrap "$b" --topic "$2" \
    --records "$3" --size "$size" --acks "$acks" >"$1.txt" 2>&1 || { log "keyed producer failed ($1.txt)"; return 0; }
  rate=$(json "$1.txt" "round(d['records_per_sec'])" 2>/dev/null || echo 0)
  recs=$(json "$1.txt" "d['delivered']" 2>/dev/null || echo 0)
}
