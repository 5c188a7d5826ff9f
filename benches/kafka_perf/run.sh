#!/usr/bin/env bash
# Produce / fetch throughput and produce latency of ringbroker, measured with librdkafka's
# `rdkafka_performance` (built by build_rdkafka_performance.sh next to this file).
#
#   bash benches/kafka_perf/run.sh                              # default variant
#   bash benches/kafka_perf/run.sh --variants default,durable   # + acks=all waits for fdatasync
#   bash benches/kafka_perf/run.sh --msgs 200000                # quick run
#
# Per variant: start `ringbroker serve` (release build) on 127.0.0.1 with a fresh data dir,
# create the topics, then
#   1. codec probe     a few batches with `-d msg`: does librdkafka really compress for this broker?
#   2. produce acks=1  MSGS x SIZE bytes, CODEC, to topic perf-acks1
#   3. produce acks=all  the same, to perf-acksall
#   4. consume         perf-acks1 from the beginning to the end of every partition (-e)
#   5. latency         acks=all at each of LAT_FRACTIONS of the measured acks=all rate, and at
#                      each of LAT_RATES msg/s, ~LAT_SECONDS each (rdkafka_performance -r: above
#                      1000 msg/s it busy-polls to pace), with a consumer running alongside:
#                      producer latency (produce -> delivery report), end-to-end latency
#                      (produce -> consumed), p50/p99/p99.9/max, and the broker round trip
#                      that librdkafka's statistics report (-T 1000)
# then SIGTERM the broker and require exit status 0. Every step runs under `timeout`.
# The machine may not be ours alone: every step also reports "other CPU %", the busy time that
# neither the broker nor the measured client used (other processes, the consumer of a latency
# step, softirq/kworkers), and names the top other processes. A summary table (markdown) is
# printed and written to target/kafka_perf/runs/<stamp>/summary.md, next to every step's logs.
#
# Options (or the environment variable in brackets):
#   --variants LIST     default,durable,direct,buffered       [VARIANTS=default]
#                       or baseline: the default settings with the binary $BASELINE_BIN
#                       (e.g. a release build of an older commit), to compare two builds
#   --msgs N            messages per produce run              [MSGS=2000000]
#   --size BYTES        message size                          [SIZE=1024]
#   --codec C           none|gzip|snappy|lz4|zstd             [CODEC=lz4]
#   --partitions N      partitions per topic                  [PARTITIONS=4]
#   --shards N          broker shards                         [SHARDS=2]
#   --port N            listen port (default: a free one)     [PORT]
#   --linger-ms N       producer linger.ms                    [LINGER_MS=5]
#   --lat-seconds N     length of the latency run             [LAT_SECONDS=20]
#   --lat-fractions L   latency-run rates / max acks=all rate [LAT_FRACTIONS=0.5,0.1]
#   --lat-rates L       more latency runs at fixed msg/s; at <= 1000 msg/s the tool sleeps
#                       between messages instead of busy-polling ("" for none) [LAT_RATES=1000]
#   --step-timeout S    bound for each produce/consume step   [STEP_TIMEOUT=300]
#   --data-parent DIR   where the temp data dir goes          [DATA_PARENT=${TMPDIR:-/tmp}]
#   --wait-quiet S      before each variant, wait up to S s for the machine to be idle (other
#                       processes < 20% of a core over 2 s)     [WAIT_QUIET=120]
#   --nice N            run broker and clients under `nice -n N` (e.g. -10 on a machine shared
#                       with builds: negative needs root)       [NICE=0]
#   --keep              keep the broker data dir
#   --no-build          use the existing target/release/ringbroker
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

VARIANTS="${VARIANTS:-default}"
MSGS="${MSGS:-2000000}"
SIZE="${SIZE:-1024}"
CODEC="${CODEC:-lz4}"
PARTITIONS="${PARTITIONS:-4}"
SHARDS="${SHARDS:-2}"
PORT="${PORT:-}"
LINGER_MS="${LINGER_MS:-5}"
LAT_SECONDS="${LAT_SECONDS:-20}"
LAT_FRACTIONS="${LAT_FRACTIONS:-0.5,0.1}"
LAT_RATES="${LAT_RATES:-1000}"
STEP_TIMEOUT="${STEP_TIMEOUT:-300}"
WAIT_QUIET="${WAIT_QUIET:-120}"
NICE="${NICE:-0}"
DATA_PARENT="${DATA_PARENT:-${TMPDIR:-/tmp}}"
KEEP=0
BUILD=1

while (($#)); do
    case "$1" in
    --variants) VARIANTS="$2"; shift 2 ;;
    --msgs) MSGS="$2"; shift 2 ;;
    --size) SIZE="$2"; shift 2 ;;
    --codec) CODEC="$2"; shift 2 ;;
    --partitions) PARTITIONS="$2"; shift 2 ;;
    --shards) SHARDS="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    --linger-ms) LINGER_MS="$2"; shift 2 ;;
    --lat-seconds) LAT_SECONDS="$2"; shift 2 ;;
    --lat-fractions) LAT_FRACTIONS="$2"; shift 2 ;;
    --lat-rates) LAT_RATES="$2"; shift 2 ;;
    --step-timeout) STEP_TIMEOUT="$2"; shift 2 ;;
    --wait-quiet) WAIT_QUIET="$2"; shift 2 ;;
    --nice) NICE="$2"; shift 2 ;;
    --data-parent) DATA_PARENT="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --no-build) BUILD=0; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf '[kafka_perf %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }

perf="$repo/target/kafka_perf/bin/rdkafka_performance"
broker_bin="$repo/target/release/ringbroker"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
run_dir="$repo/target/kafka_perf/runs/$stamp"
mkdir -p "$run_dir"
clk_tck="$(getconf CLK_TCK)"

# --- build --------------------------------------------------------------------------------------
timeout 1800 bash "$here/build_rdkafka_performance.sh" || die "building rdkafka_performance failed"
if ((BUILD)); then
    log "cargo build --release"
    (cd "$repo" && timeout 1800 cargo build --release --quiet) || die "cargo build --release failed"
fi
[[ -x "$broker_bin" ]] || die "no $broker_bin"
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo 19092
}

# --- broker lifecycle ---------------------------------------------------------------------------
broker_pid=""
data_dir=""
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    if [[ -n "$broker_pid" ]] && kill -0 "$broker_pid" 2>/dev/null; then
        log "cleanup: stopping broker pid $broker_pid"
        kill -TERM "$broker_pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$broker_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$broker_pid" 2>/dev/null || true
    fi
    if [[ -n "$data_dir" && -d "$data_dir" && $KEEP -eq 0 ]]; then rm -rf "$data_dir"; fi
    [[ -z "${broker_copy:-}" ]] || rm -f "$broker_copy"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# test one build for the whole run even if someone rebuilds target/release meanwhile
broker_copy="$(mktemp "$DATA_PARENT/ringbroker-kafka-perf-bin.XXXXXX")"
cp "$broker_bin" "$broker_copy"
chmod 0755 "$broker_copy"
broker_bin="$broker_copy"
git_rev="$(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
git_dirty="$(cd "$repo" && git status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null | wc -l)"
((git_dirty == 0)) || git_rev="$git_rev + $git_dirty uncommitted change(s) in src/"

broker_cpu_ticks() { # utime + stime of the broker (all threads), in clock ticks
    awk '{print $14 + $15}' "/proc/$broker_pid/stat" 2>/dev/null || echo 0
}

system_busy_ticks() { # all CPUs, busy (not idle/iowait) clock ticks
    awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
}
steal_ticks() { # all CPUs, time stolen by the hypervisor
    awk '/^cpu / {print $9}' /proc/stat
}

proc_ticks() { # "pid comm ticks" of every process (utime + stime, all threads)
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } |
        awk '{c = $0; sub(/^[0-9]+ \(/, "", c); sub(/\) [^)]*$/, "", c); n = split($0, a, ") ");
              split(a[n], r, " "); gsub(/ /, "_", c); print $1, c, r[12] + r[13]}'
}

# top CPU users between two proc_ticks snapshots, the broker excluded: "comm NN%, ..."
top_others() { # $1 before $2 after $3 wall seconds
    awk -v w="$3" -v hz="$clk_tck" -v bp="$broker_pid" 'BEGIN {if (w < 0.1) w = 0.1}
        NR == FNR {before[$1] = $3; next}
        $1 != bp {d = $3 - ($1 in before ? before[$1] : 0); if (d > 0) t[$2] += d}
        END {for (c in t) printf "%d %s\n", 100 * t[c] / hz / w, c}' "$1" "$2" |
        sort -rn | awk '$1 >= 3 && n++ < 4 {printf "%s%s %d%%", (n > 1 ? ", " : ""), $2, $1}'
}

wait_quiet() { # waits up to $1 s for other processes to use < 20% of a core over 2 s
    local deadline=$((SECONDS + $1)) a b busy said=-100
    while :; do
        a="$(system_busy_ticks)"; sleep 2; b="$(system_busy_ticks)"
        busy=$(((b - a) * 100 / clk_tck / 2))
        if ((busy < 20)); then log "machine quiet (${busy}% of a core busy)"; return 0; fi
        if ((SECONDS >= deadline)); then
            log "machine still busy after $1 s (${busy}% of a core): measuring anyway"
            notes+=("machine busy before a variant: ${busy}% of a core used by other processes ($(ps -eo pcpu,comm --sort=-pcpu | awk 'NR > 1 && $2 != "ps" && n++ < 3 {printf "%s %s%%; ", $2, $1}'))")
            return 0
        fi
        if ((SECONDS - said >= 30)); then
            log "machine busy (${busy}% of a core by others), waiting up to $1 s..."
            said=$SECONDS
        fi
    done
}

broker_alive() { kill -0 "$broker_pid" 2>/dev/null; }

start_broker() { # $1 = variant
    local variant="$1" extra=()
    [[ "$variant" == durable ]] && extra+=(--set ringbroker.acks.all.fsync=true)
    # direct / buffered: the two ways segment files are written (ringbroker.log.io), side by side.
    [[ "$variant" == direct || "$variant" == buffered ]] && extra+=(--set "ringbroker.log.io=$variant")
    data_dir="$(mktemp -d "$DATA_PARENT/ringbroker-kafka-perf.XXXXXX")"
    port="${PORT:-$(free_port)}"
    broker="127.0.0.1:$port"
    local bin="$broker_bin"
    if [[ "$variant" == baseline ]]; then
        bin="${BASELINE_BIN:?baseline variant needs BASELINE_BIN}"
    fi
    broker_cmd=("$bin" serve --listen "$broker" --data-dir "$data_dir/data" --shards "$SHARDS"
        --set "num.partitions=$PARTITIONS" "${extra[@]}")
    log "start: ${broker_cmd[*]}"
    NO_COLOR=1 RUST_LOG="${RUST_LOG:-info}" nice -n "$NICE" "${broker_cmd[@]}" >"$vdir/broker.log" 2>&1 &
    broker_pid=$!
    for _ in $(seq 150); do
        broker_alive || die "broker exited at start: $(tail -5 "$vdir/broker.log")"
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    die "broker not listening on $broker after 15 s"
}

stop_broker() { # sets broker_exit
    log "SIGTERM broker pid $broker_pid"
    broker_rss_kb="$(awk '/VmHWM/ {print $2}' "/proc/$broker_pid/status" 2>/dev/null || echo '?')"
    kill -TERM "$broker_pid"
    local waited=0
    while broker_alive && ((waited < 600)); do sleep 0.1; waited=$((waited + 1)); done
    if broker_alive; then
        log "broker still running 60 s after SIGTERM: SIGKILL"
        kill -KILL "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
        broker_exit="hung (killed)"
    else
        set +e
        wait "$broker_pid"
        broker_exit=$?
        set -e
    fi
    broker_stop_s="$(awk -v t="$waited" 'BEGIN {printf "%.1f", t / 10}')"
    broker_pid=""
}

create_topics() { # metadata request with auto-create, via kcat if there is one
    local t
    for t in "$@"; do
        if command -v kcat >/dev/null; then
            timeout 30 kcat -b "$broker" -L -t "$t" -X allow.auto.create.topics=true \
                >>"$vdir/create_topics.log" 2>&1 || die "kcat metadata for $t failed"
        else
            # no kcat: one tiny message creates it (the broker auto-creates on Metadata)
            timeout 60 "$perf" -P -t "$t" -b "$broker" -s 16 -c 1 -a 1 -X linger.ms=0 \
                >>"$vdir/create_topics.log" 2>&1 || die "creating $t failed"
            precreated_msgs[$t]=1
        fi
    done
}

# --- one measured step ---------------------------------------------------------------------------
# run_step NAME TIMEOUT -- CMD...   runs CMD with output to $vdir/NAME.log and records wall time,
# client CPU and broker CPU. Sets step_rc, step_wall, step_client_cpu, step_broker_cpu (% of core).
run_step() {
    local name="$1" tmo="$2"
    shift 3
    local b0 b1 s0 s1 st0 st1 t0 t1 tf="$vdir/$name.time"
    echo "\$ $*" >"$vdir/$name.log"
    proc_ticks >"$vdir/$name.procs0"
    b0="$(broker_cpu_ticks)"
    s0="$(system_busy_ticks)"
    st0="$(steal_ticks)"
    t0="$(date +%s.%N)"
    set +e
    { TIMEFORMAT='%R %U %S'; time timeout -s INT -k 10 "$tmo" nice -n "$NICE" "$@" >>"$vdir/$name.log" 2>&1; } 2>"$tf"
    step_rc=$?
    set -e
    t1="$(date +%s.%N)"
    b1="$(broker_cpu_ticks)"
    s1="$(system_busy_ticks)"
    st1="$(steal_ticks)"
    proc_ticks >"$vdir/$name.procs1"
    step_wall="$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')"
    step_client_cpu="$(awk -v w="$step_wall" '{printf "%.0f", 100 * ($2 + $3) / (w > 0 ? w : 1)}' "$tf")"
    step_broker_cpu="$(awk -v a="$b0" -v b="$b1" -v w="$step_wall" -v hz="$clk_tck" \
        'BEGIN {printf "%.0f", 100 * (b - a) / hz / (w > 0 ? w : 1)}')"
    step_other_cpu="$(awk -v a="$s0" -v b="$s1" -v w="$step_wall" -v hz="$clk_tck" -v br="$step_broker_cpu" -v cl="$step_client_cpu" \
        'BEGIN {o = 100 * (b - a) / hz / (w > 0 ? w : 1) - br - cl; printf "%.0f", o < 0 ? 0 : o}')"
    step_top="$(top_others "$vdir/$name.procs0" "$vdir/$name.procs1" "$step_wall")"
    rm -f "$vdir/$name.procs0" "$vdir/$name.procs1"
    echo "$name: wall ${step_wall}s, CPU % of a core: client $step_client_cpu, broker $step_broker_cpu, other $step_other_cpu (of which steal $(awk -v a="$st0" -v b="$st1" -v w="$step_wall" -v hz="$clk_tck" 'BEGIN {printf "%.0f", 100 * (b - a) / hz / (w > 0 ? w : 1)}')); top processes but the broker: ${step_top:-none >= 3%}" >>"$vdir/cpu.txt"
    ((step_rc == 124)) && log "$name: TIMED OUT after ${tmo}s"
    broker_alive || log "$name: BROKER DIED (see $vdir/broker.log)"
    return 0
}

# Parses the last summary line of rdkafka_performance: sets p_msgs p_rate p_mbs p_failed.
parse_produce() {
    local line
    line="$(grep -a 'messages produced' "$1" | tail -1 || true)"
    p_msgs="$(sed -nE 's/.* ([0-9]+) delivered .*/\1/p' <<<"$line")"
    p_failed="$(sed -nE 's/.*, ([0-9]+) failed\).*/\1/p' <<<"$line")"
    p_rate="$(sed -nE 's/.*: ([0-9]+) msgs\/s and .*/\1/p' <<<"$line")"
    p_mbs="$(sed -nE 's/.* msgs\/s and ([0-9.]+) MB\/s.*/\1/p' <<<"$line")"
}
parse_consume() {
    local line
    line="$(grep -a 'consumed in' "$1" | tail -1 || true)"
    c_msgs="$(sed -nE 's/^% ([0-9]+) messages .*/\1/p' <<<"$line")"
    c_rate="$(sed -nE 's/.*ms: ([0-9]+) msgs\/s .*/\1/p' <<<"$line")"
    c_mbs="$(sed -nE 's/.*msgs\/s \(([0-9.]+) MB\/s\).*/\1/p' <<<"$line")"
}
# Percentiles of a file of microsecond values: prints "p50 p99 p99.9 max count" in ms.
percentiles() {
    [[ -s "$1" ]] || { echo "- - - - 0"; return; }
    sort -n "$1" | awk '{v[NR] = $1}
        function q(p,  i) { i = int(p * NR + 0.999999); if (i < 1) i = 1; if (i > NR) i = NR; return v[i] / 1000 }
        END {printf "%.2f %.2f %.2f %.2f %d\n", q(0.50), q(0.99), q(0.999), v[NR] / 1000, NR}'
}
# Broker round-trip times from librdkafka's statistics (-T 1000: one JSON line per second, rtt
# histograms per 1 s window): prints "p50 p99 max" in ms = medians of the windows' p50 and p99,
# overall max. "- - -" without python3.
rtt_stats() {
    grep -a '^{' "$1" | python3 -c '
import json, sys, statistics
p50, p99, mx = [], [], 0
for line in sys.stdin:
    try:
        d = json.loads(line)
    except ValueError:
        continue
    for b in d.get("brokers", {}).values():
        r = b.get("rtt", {})
        if b.get("nodeid", -1) < 0 or not r.get("cnt"):
            continue
        p50.append(r["p50"]); p99.append(r["p99"]); mx = max(mx, r["max"])
if p50:
    print("%.2f %.2f %.2f" % (statistics.median(p50) / 1e3, statistics.median(p99) / 1e3, mx / 1e3))
else:
    print("- - -")
' 2>/dev/null || echo "- - -"
}
topic_bytes() { # bytes of a topic's .log segments on disk
    cat "$data_dir"/data/"$1"-*/*.log 2>/dev/null | wc -c
}
fmt() { [[ -n "${1:-}" ]] && echo "$1" || echo "-"; }

partition_args=()
for ((i = 0; i < PARTITIONS; i++)); do partition_args+=(-p "$i"); done
common_p=(-b PLACEHOLDER -s "$SIZE" -z "$CODEC" -X "linger.ms=$LINGER_MS" -i 5000)

summary_rows=()
notes=()
start_epoch="$(date +%s)"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
overall_rc=0

run_variant() {
    local variant="$1"
    vdir="$run_dir/$variant"
    mkdir -p "$vdir"
    declare -gA precreated_msgs=()
    ((WAIT_QUIET > 0)) && wait_quiet "$WAIT_QUIET"
    start_broker "$variant"
    common_p[1]="$broker"
    create_topics perf-probe perf-acks1 perf-acksall

    # 1. codec probe
    run_step codec_probe 60 -- "$perf" -P -t perf-probe "${common_p[@]}" -c 5000 -a 1 -d msg,feature
    effective_codec="$CODEC"
    if grep -aq "does not support compression type" "$vdir/codec_probe.log"; then
        effective_codec="none (librdkafka: $(grep -aom1 'Broker does not support compression type [a-z0-9]*' "$vdir/codec_probe.log" | sed 's/Broker does not support compression type/broker lacks/'))"
        notes+=("[$variant] -z $CODEC was NOT applied: librdkafka disabled it for this broker ($(grep -aom1 "Feature ${CODEC^^}: [A-Za-z]* ([0-9.]*) NOT supported by broker" "$vdir/codec_probe.log" || echo 'see codec_probe.log')); batches went uncompressed")
    fi
    log "[$variant] codec $CODEC -> effective: $effective_codec"

    # 2./3. produce
    local acks topic
    for acks in 1 all; do
        topic="perf-acks$acks"
        local a="$acks"
        [[ "$acks" == all ]] && a=-1
        log "[$variant] produce acks=$acks: $MSGS x $SIZE B, -z $CODEC -> $topic"
        run_step "produce_acks$acks" "$STEP_TIMEOUT" -- "$perf" -P -t "$topic" "${common_p[@]}" -c "$MSGS" -a "$a"
        parse_produce "$vdir/produce_acks$acks.log"
        local disk
        disk="$(topic_bytes "$topic")"
        local ok=ok
        ((step_rc == 0)) || ok="rc=$step_rc"
        [[ "${p_msgs:-}" == "$MSGS" ]] || ok="$ok, delivered ${p_msgs:-?}/$MSGS"
        [[ "${p_failed:-0}" == 0 ]] || ok="$ok, ${p_failed} failed"
        ((step_rc == 0)) || overall_rc=1
        summary_rows+=("| $variant | produce acks=$acks | $(fmt "$p_msgs") | $(fmt "$p_rate") | $(fmt "$p_mbs") | $(awk -v b="$disk" 'BEGIN {printf "%.0f", b / 1e6}') | | | | | | $step_client_cpu | $step_broker_cpu | $step_other_cpu | $ok |")
        if [[ "$acks" == all ]]; then max_all_rate="${p_rate:-0}"; fi
        if [[ "$acks" == 1 ]]; then produced_acks1="${p_msgs:-0}"; fi
        log "[$variant]   -> $(fmt "$p_rate") msg/s, $(fmt "$p_mbs") MB/s, $ok"
        broker_alive || break
    done

    # 4. consume
    if broker_alive; then
        log "[$variant] consume perf-acks1 from the beginning (-e)"
        run_step consume "$STEP_TIMEOUT" -- "$perf" -C -t perf-acks1 -b "$broker" "${partition_args[@]}" -o beginning -e -i 5000
        parse_consume "$vdir/consume.log"
        local want=$((produced_acks1 + ${precreated_msgs[perf-acks1]:-0}))
        local ok=ok
        ((step_rc == 0)) || { ok="rc=$step_rc"; overall_rc=1; }
        [[ "${c_msgs:-}" == "$want" ]] || { ok="$ok, consumed ${c_msgs:-?}/$want"; overall_rc=1; }
        grep -aq 'Consume error' "$vdir/consume.log" && ok="$ok, consume errors (see log)"
        summary_rows+=("| $variant | consume (fetch) | $(fmt "$c_msgs") | $(fmt "$c_rate") | $(fmt "$c_mbs") | | | | | | | $step_client_cpu | $step_broker_cpu | $step_other_cpu | $ok |")
        log "[$variant]   -> $(fmt "$c_rate") msg/s, $(fmt "$c_mbs") MB/s, $ok"
    fi

    # 5. latency at fractions of the max acks=all rate, a consumer alongside
    local frac lat_runs=()
    IFS=',' read -r -a lat_fractions <<<"$LAT_FRACTIONS"
    for frac in "${lat_fractions[@]}"; do
        [[ -n "$frac" && "${max_all_rate:-0}" -gt 0 ]] || continue
        lat_runs+=("$(awk -v r="$max_all_rate" -v f="$frac" 'BEGIN {printf "%d", r * f}'):$frac x $max_all_rate")
    done
    IFS=',' read -r -a lat_rates <<<"$LAT_RATES"
    for frac in "${lat_rates[@]}"; do
        [[ -n "$frac" ]] && lat_runs+=("$frac:fixed")
    done
    local lat_run
    for lat_run in "${lat_runs[@]}"; do
        broker_alive || break
        local rate count cons_pid ltopic name
        rate="${lat_run%%:*}"
        ((rate > 0)) || continue
        count=$((rate * LAT_SECONDS))
        ltopic="perf-lat-$rate"
        name="latency_$rate"
        create_topics "$ltopic"
        local want=$((count + ${precreated_msgs[$ltopic]:-0}))
        log "[$variant] latency: acks=all at $rate msg/s (${lat_run#*:}) for $count msgs, consumer alongside"
        local cons_cmd=("$perf" -C -t "$ltopic" -b "$broker" "${partition_args[@]}" -o beginning -c "$want" -l
            -A "$vdir/${name}_e2e_us.txt" -i 5000)
        echo "\$ ${cons_cmd[*]}" >"$vdir/${name}_consumer.log"
        timeout -s INT -k 10 $((LAT_SECONDS * 3 + 60)) nice -n "$NICE" "${cons_cmd[@]}" >>"$vdir/${name}_consumer.log" 2>&1 &
        cons_pid=$!
        sleep 2
        run_step "${name}_producer" $((LAT_SECONDS * 3 + 60)) -- "$perf" -P -t "$ltopic" "${common_p[@]}" -c "$count" -a -1 \
            -r "$rate" -l -A "$vdir/${name}_produce_us.txt" -T 1000
        local prc=$step_rc pcli=$step_client_cpu pbro=$step_broker_cpu poth=$step_other_cpu
        parse_produce "$vdir/${name}_producer.log"
        # the consumer ends by itself after `want` messages; give it 15 s, then SIGINT
        for _ in $(seq 150); do kill -0 "$cons_pid" 2>/dev/null || break; sleep 0.1; done
        kill -INT "$cons_pid" 2>/dev/null || true
        wait "$cons_pid" 2>/dev/null || true
        read -r l50 l99 l999 lmax _ < <(percentiles "$vdir/${name}_produce_us.txt")
        read -r e50 e99 e999 emax ecnt < <(percentiles "$vdir/${name}_e2e_us.txt")
        read -r r50 r99 rmax < <(rtt_stats "$vdir/${name}_producer.log")
        local ok=ok
        ((prc == 0)) || { ok="rc=$prc"; overall_rc=1; }
        [[ "$ecnt" == "$count" ]] || ok="$ok, consumer saw $ecnt/$count"
        summary_rows+=("| $variant | latency acks=all, -r $rate | $(fmt "$p_msgs") | $(fmt "$p_rate") | $(fmt "$p_mbs") | | $l50 / $l99 | $l999 / $lmax | $e50 / $e99 | $e999 / $emax | $r50 / $r99 / $rmax | $pcli | $pbro | $poth | $ok |")
        log "[$variant]   -> $(fmt "$p_rate") msg/s achieved; produce p50/p99 $l50/$l99 ms, e2e p50/p99 $e50/$e99 ms, broker rtt p50/p99/max $r50/$r99/$rmax ms, $ok"
    done

    # errors and warnings in the broker log
    local warns
    warns="$(grep -acE ' (WARN|ERROR) ' "$vdir/broker.log" || true)"
    if ((warns > 0)); then
        notes+=("[$variant] broker logged $warns WARN/ERROR lines, first: $(grep -aE ' (WARN|ERROR) ' "$vdir/broker.log" | head -1 | cut -c1-300)")
    fi
    if broker_alive; then
        stop_broker
    else
        broker_exit="died during the run"
        broker_pid=""
        overall_rc=1
    fi
    [[ "$broker_exit" == 0 ]] || overall_rc=1
    if awk -v t="${broker_stop_s:-0}" 'BEGIN {exit !(t > 5)}'; then
        notes+=("[$variant] SLOW SHUTDOWN: the broker took ${broker_stop_s} s to exit after SIGTERM (see README.md, finding 2)")
    fi
    notes+=("[$variant] broker: ${broker_cmd[*]:1} -> SIGTERM exit $broker_exit after ${broker_stop_s:-?} s; peak RSS $((${broker_rss_kb:-0} / 1024)) MiB; effective codec: $effective_codec")
    log "[$variant] broker exit: $broker_exit"
    if ((KEEP == 0)); then rm -rf "$data_dir"; else log "kept data dir $data_dir"; fi
    data_dir=""
}

IFS=',' read -r -a variant_list <<<"$VARIANTS"
for v in "${variant_list[@]}"; do
    case "$v" in default | durable | direct | buffered | baseline) ;; *) die "unknown variant $v (default, durable, direct, buffered, baseline)" ;; esac
    run_variant "$v"
done

{
    echo "## ringbroker × rdkafka_performance — $stamp"
    echo
    echo "$(nproc) cores, kernel $(uname -r), data dir fs: $(df -T "$DATA_PARENT" | awk 'NR == 2 {print $2}'), $("$perf" -h 2>&1 | grep -om1 'librdkafka version [0-9.]*')"
    echo "ringbroker $git_rev; started: $(date -u -d "@$start_epoch" +%FT%TZ), load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "msgs=$MSGS size=$SIZE codec=$CODEC partitions=$PARTITIONS shards=$SHARDS linger.ms=$LINGER_MS nice=$NICE"
    echo
    echo "| variant | step | msgs | msgs/s | MB/s | on disk MB | produce lat p50 / p99 ms | p99.9 / max ms | e2e lat p50 / p99 ms | e2e p99.9 / max ms | broker rtt p50 / p99 / max ms (1 s windows: median p50, median p99, max) | client CPU % | broker CPU % | other CPU % | check |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    printf '%s\n' "${summary_rows[@]}"
    echo
    echo "MB = 10^6 bytes of message payload (rdkafka_performance's unit); CPU % of one core (200 = both cores); other = machine busy time not used by the broker or the measured client."
    for n in "${notes[@]}"; do echo "- $n"; done
    echo
    echo "CPU per step (other = busy time of the machine outside the broker and the measured client):"
    for v in "${variant_list[@]}"; do
        [[ -f "$run_dir/$v/cpu.txt" ]] && sed "s/^/- [$v] /" "$run_dir/$v/cpu.txt"
    done
    echo
    echo "logs: $run_dir"
} | tee "$run_dir/summary.md"
exit "$overall_rc"
