#!/usr/bin/env bash
# Which io_uring operations of the broker go to io-wq workers (iou-wrk-*), from where, and what
# the workers spend their CPU on, with a clean page cache and in writeback (issue 41).
#
#   sudo -E bash benches/writeback/handoff.sh                 # buffered; VARIANT=direct for O_DIRECT
#
# One fresh release broker per state (as benches/writeback/run.sh: `serve --shards 2`, a
# 4-partition topic, RECORDS 1 KiB records acks=1 from `ringbroker bench produce`), recorded by
#   perf record -g -e io_uring:io_uring_queue_async_work -e cpu-clock -F 499 -p <broker>
# and reported per state: the handed-off operations by opcode (every event, from the
# tracepoint), the kernel call chain that queued the segment writes, and the iou-wrk threads'
# top symbols (cpu-clock samples; hardware counters are not available in this VM).
# Needs root (drop_caches, tracepoints; tracefs is mounted at /sys/kernel/tracing if missing).
#
# Env: RECORDS (1000000), DIRTY_MB (2048), VARIANT (buffered|direct), PORT (29393),
#      RINGBROKER (target/release/ringbroker), WORK (target/writeback/handoff-<stamp>)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${RECORDS:=1000000}" "${DIRTY_MB:=2048}" "${VARIANT:=buffered}" "${PORT:=29393}"
: "${RINGBROKER:=${CARGO_TARGET_DIR:-$repo/target}/release/ringbroker}"
: "${WORK:=$repo/target/writeback/handoff-$(date -u +%Y%m%dT%H%M%SZ)}"
addr="127.0.0.1:$PORT"
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 2; }
[[ -x "$RINGBROKER" ]] || { echo "missing $RINGBROKER (cargo build --release)" >&2; exit 2; }
[[ -d /sys/kernel/tracing/events ]] || mount -t tracefs nodev /sys/kernel/tracing
mkdir -p "$WORK"
cp "$RINGBROKER" "$WORK/ringbroker"
rb="$WORK/ringbroker"
flags=()
[[ "$VARIANT" == direct ]] && flags=(--set ringbroker.log.io=direct)

broker= perf_pid=
stop_all() {
    [[ -n "$perf_pid" ]] && { kill -INT "$perf_pid" 2>/dev/null || true; wait "$perf_pid" 2>/dev/null || true; }
    if [[ -n "$broker" ]]; then
        kill "$broker" 2>/dev/null || true
        for _ in $(seq 300); do kill -0 "$broker" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$broker" 2>/dev/null || true
        wait "$broker" 2>/dev/null || true
    fi
    broker= perf_pid=
    rm -rf "$WORK/data" "$WORK/dirty.bin"
}
trap stop_all EXIT

for st in clean dirty; do
    sync
    echo 1 >/proc/sys/vm/drop_caches
    [[ "$st" == dirty ]] && dd if=/dev/zero of="$WORK/dirty.bin" bs=1M count="$DIRTY_MB" status=none
    "$rb" serve --listen "$addr" --data-dir "$WORK/data" --shards 2 --set num.partitions=4 \
        --set ringbroker.metrics.listen=none "${flags[@]}" >"$WORK/broker-$st.log" 2>&1 &
    broker=$!
    for _ in $(seq 200); do grep -qs "listening on" "$WORK/broker-$st.log" && break; sleep 0.05; done
    timeout 60 "$rb" topic create wb -p 4 -b "$addr" >/dev/null
    perf record -g -e io_uring:io_uring_queue_async_work -e cpu-clock -F 499 -p "$broker" \
        -o "$WORK/perf-$st.data" >"$WORK/perf-$st.log" 2>&1 &
    perf_pid=$!
    sleep 0.5
    timeout 300 "$rb" bench produce --bootstrap "$addr" --topic wb --partitions 4 \
        --records "$RECORDS" --record-size 1024 --acks 1 --compression none --linger-ms 5 \
        --batch-size 1048576 --quiet --broker-metrics none >"$WORK/client-$st.log" 2>&1 || true
    stop_all

    echo "## $VARIANT, $st page cache ($(grep -o '[0-9.]* MB/s' "$WORK/client-$st.log" | head -1))"
    echo
    echo "handed to io-wq workers, by opcode (io_uring_queue_async_work):"
    perf script -i "$WORK/perf-$st.data" -F event,trace 2>/dev/null | grep queue_async_work |
        sed 's/.*opcode \([A-Z_]*\).*, \([a-z]*\) queue.*/\1 (\2 queue)/' | sort | uniq -c | sort -rn
    echo
    echo "where the segment writes were queued (callee first):"
    perf script -i "$WORK/perf-$st.data" -F event,ip,sym 2>/dev/null |
        awk '/queue_async_work/ {grab = 1; n = 0; chain = ""; next}
             grab && NF == 0 {if (chain != "") print chain; grab = 0; next}
             grab && n < 6 {chain = chain (n ? " <- " : "") $2; n++}' | sort | uniq -c | sort -rn | head -3
    echo
    echo "iou-wrk threads' top symbols (cpu-clock):"
    perf report -i "$WORK/perf-$st.data" --stdio --no-children --comms "$(perf script -i "$WORK/perf-$st.data" -F comm 2>/dev/null | grep '^ *iou-wrk' | sort -u | tr -d ' ' | paste -sd,)" \
        --sort sym -g none 2>/dev/null | grep '%' | grep -v '^#' | head -12
    echo
    echo "samples by thread kind (cpu-clock):"
    perf script -i "$WORK/perf-$st.data" -F comm,event 2>/dev/null | grep cpu-clock |
        awk '{c = $1; k = (c ~ /^ringbroker-shar/) ? "shard" : (c ~ /^iou-wrk/) ? "iou-wrk" : c; n[k]++}
             END {for (k in n) print "  " k, n[k]}' | sort
    echo
done
echo "files: $WORK"
