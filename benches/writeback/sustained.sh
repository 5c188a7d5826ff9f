#!/usr/bin/env bash
# Sustained produce: one broker takes GB after GB without a pause, and the broker's CPU per
# record is reported per GB from its own /metrics (ringbroker_process_cpu_seconds_total by
# thread kind), so the steady state shows, not the burst that starts from a clean page cache
# (issue 41).
#
#   sudo -E bash benches/writeback/sustained.sh                # buffered, direct, buffered, direct
#   GBS=3 VARIANTS="buffered" bash benches/writeback/sustained.sh
#
# Per variant (alternating, each twice by default): `sync; drop_caches`, a fresh release broker
# (`serve --shards 2`, data dir on the real disk, a 4-partition topic), then GBS producer runs
# back to back of 1M x 1 KiB records (acks=1, no compression, linger 5 ms, 1 MiB batches; each
# run 1 GB). Each row: the load average, MB/s of that GB, broker CPU per record over it (sum of
# the three thread kinds) and its split, and Dirty / Cached of /proc/meminfo after it.
#
# Env: GBS (6), VARIANTS (buffered direct buffered direct), PORT (29495), METRICS_PORT (29746),
#      RINGBROKER (target/release/ringbroker), WORK (target/writeback/sustained-<stamp>)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${GBS:=6}" "${VARIANTS:=buffered direct buffered direct}" "${PORT:=29495}" "${METRICS_PORT:=29746}"
: "${RINGBROKER:=${CARGO_TARGET_DIR:-$repo/target}/release/ringbroker}"
: "${WORK:=$repo/target/writeback/sustained-$(date -u +%Y%m%dT%H%M%SZ)}"
addr="127.0.0.1:$PORT" metrics="127.0.0.1:$METRICS_PORT"
[[ -x "$RINGBROKER" ]] || { echo "missing $RINGBROKER (cargo build --release)" >&2; exit 2; }
[[ -w /proc/sys/vm/drop_caches ]] || { echo "needs root (drop_caches)" >&2; exit 2; }
mkdir -p "$WORK"
[[ "$(stat -f -c %T "$WORK")" != tmpfs ]] || { echo "$WORK is on tmpfs" >&2; exit 2; }
cp "$RINGBROKER" "$WORK/ringbroker"
rb="$WORK/ringbroker"

broker=
stop_broker() {
    if [[ -n "$broker" ]]; then
        kill "$broker" 2>/dev/null || true
        for _ in $(seq 300); do kill -0 "$broker" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$broker" 2>/dev/null || true
        wait "$broker" 2>/dev/null || true
    fi
    broker=
    rm -rf "$WORK/data"
}
trap stop_broker EXIT

cpu() { # "shard io_worker other" in seconds, from the broker's own metrics
    curl -s --max-time 10 "http://$metrics/metrics" | awk '/^ringbroker_process_cpu_seconds_total/ {
        split($1, a, "\""); v[a[2]] = $2 } END { printf "%s %s %s", v["shard"] + 0, v["io_worker"] + 0, v["other"] + 0 }'
}
meminfo_mib() { awk -v k="$1:" '$1 == k { printf "%d", $2 / 1024 }' /proc/meminfo; }

echo "| variant | GB written | load avg | MB/s | CPU ns/record | shard | io_worker | other | Dirty MiB | Cached MiB |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for v in $VARIANTS; do
    sync
    echo 1 >/proc/sys/vm/drop_caches
    "$rb" serve --listen "$addr" --data-dir "$WORK/data" --shards 2 --set num.partitions=4 \
        --set "ringbroker.metrics.listen=$metrics" --set "ringbroker.log.io=$v" >"$WORK/broker-$v.log" 2>&1 &
    broker=$!
    for _ in $(seq 200); do grep -qs "listening on" "$WORK/broker-$v.log" && break; sleep 0.05; done
    timeout 60 "$rb" topic create wb -p 4 -b "$addr" >/dev/null
    for gb in $(seq "$GBS"); do
        read -r s0 i0 o0 <<<"$(cpu)"
        load=$(cut -d' ' -f1 /proc/loadavg)
        mbs=$(timeout 300 "$rb" bench produce --bootstrap "$addr" --topic wb --partitions 4 \
            --records 1000000 --record-size 1024 --acks 1 --compression none --linger-ms 5 \
            --batch-size 1048576 --quiet --broker-metrics none | sed -n 's/^produced: .*, \([0-9.]*\) MB\/s.*/\1/p')
        read -r s1 i1 o1 <<<"$(cpu)"
        awk -v v="$v" -v gb="$gb" -v l="$load" -v m="${mbs:-0}" -v s="$s0 $s1" -v i="$i0 $i1" -v o="$o0 $o1" \
            -v d="$(meminfo_mib Dirty)" -v c="$(meminfo_mib Cached)" 'BEGIN {
                split(s, S, " "); split(i, I, " "); split(o, O, " ")
                sh = (S[2] - S[1]) * 1000; io = (I[2] - I[1]) * 1000; ot = (O[2] - O[1]) * 1000
                printf "| %s | %d | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %d | %d |\n", v, gb, l, m, sh + io + ot, sh, io, ot, d, c
            }'
    done
    stop_broker
done
echo
echo "files: $WORK (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
