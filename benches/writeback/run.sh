#!/usr/bin/env bash
# Produce throughput and broker CPU per record with a clean page cache and with the machine in
# writeback, in alternating rounds, for several storage variants (issue 41).
#
#   sudo -E bash benches/writeback/run.sh                         # 3 rounds, every variant
#   ROUNDS=1 RECORDS=200000 VARIANTS="buffered direct" bash benches/writeback/run.sh   # smoke
#
# Each measurement is one fresh release broker and topic (`serve --shards 2`, unpinned, data dir on the
# real disk: the script refuses a tmpfs) and one producer: 4 partitions, 1 KiB records, acks=1,
# no compression, linger 5 ms, 1 MiB batches. Before it, the page cache is brought to one of
# two states:
#   clean  `sync`, then `echo 1 > /proc/sys/vm/drop_caches` (needs root)
#   dirty  the same, then DIRTY_MB of other writes (`dd` to a file on the same file system,
#          no sync): the kernel is writing back while the broker takes the producer's data
#   synced the same DIRTY_MB written and synced (`conv=fsync`): as much memory taken by the
#          page cache as in `dirty`, but nothing left to write back (tells the two apart)
# Variants (the broker's --set flags):
#   buffered  the defaults (page cache, write-behind every 8 MiB with sync_file_range)
#   nowb      ringbroker.log.write.behind.bytes=0 (no sync_file_range)
#   prealloc  the topic created with preallocate=true (segments fallocated, KEEP_SIZE)
#   direct    ringbroker.log.io=direct (O_DIRECT from aligned buffers)
# Order: per round, every variant in every state (STATES, default "clean dirty"); the variant
# order rotates each round.
#
# Broker CPU: utime+stime of the broker over the producer's run. Threads are sampled every
# 0.2 s from /proc/PID/task/*/stat (io_uring's workers come and go) and split by name:
# shard = ringbroker-shar*, iou = iou-wrk-*, other = the process total (/proc/PID/stat, exited
# threads included) minus both. STACKS=1 also samples the kernel stacks of the iou-wrk
# threads (/proc/PID/task/TID/stack) into stacks-<variant>-<state>.txt; PERF=1 counts
# io_uring's submissions and hand-offs to workers (tracepoints io_uring_submit_req and
# io_uring_queue_async_work, `perf stat`) per round.
#
# Prints one markdown row per measurement (load average before it) and the medians per variant
# and state with the dirty/clean ratio. Files: target/writeback/<UTC stamp>/ (rounds.tsv, logs).
#
# Env: ROUNDS (3), RECORDS (1000000), DIRTY_MB (2048), VARIANTS (buffered nowb prealloc direct),
#      PORT (29292), RINGBROKER (target/release/ringbroker), WORK (target/writeback/<stamp>),
#      STATES (clean dirty), CONSUME (0; 1: then read the topic back, MB/s and CPU per record),
#      STACKS (0), PERF (0), EXTRA_SET (more --set flags for every broker)
#
# Also recorded per measurement: the MiB the guest reported free to the hypervisor during it
# (virtio-balloon free page reporting, /sys/module/page_reporting/parameters/reported_kib, where
# the kernel has it): a page reported is discarded by the host, and its next first touch faults
# there, which the guest sees as a slow copy (docs/internals/writeback.md).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
: "${ROUNDS:=3}" "${RECORDS:=1000000}" "${DIRTY_MB:=2048}" "${PORT:=29292}"
: "${VARIANTS:=buffered nowb prealloc direct}" "${STATES:=clean dirty}" "${CONSUME:=0}" "${STACKS:=0}" "${PERF:=0}" "${EXTRA_SET:=}"
: "${RINGBROKER:=${CARGO_TARGET_DIR:-$repo/target}/release/ringbroker}"
: "${WORK:=$repo/target/writeback/$(date -u +%Y%m%dT%H%M%SZ)}"
addr="127.0.0.1:$PORT"

[[ -x "$RINGBROKER" ]] || { echo "missing $RINGBROKER (cargo build --release)" >&2; exit 2; }
[[ -w /proc/sys/vm/drop_caches ]] || { echo "needs root (drop_caches)" >&2; exit 2; }
mkdir -p "$WORK"
fs=$(stat -f -c %T "$WORK")
[[ "$fs" != tmpfs ]] || { echo "$WORK is on tmpfs: writeback needs a real disk" >&2; exit 2; }
# A copy: a concurrent rebuild of target/release cannot change what is measured.
cp "$RINGBROKER" "$WORK/ringbroker"
rb="$WORK/ringbroker"

broker= sampler= perf_pid=
stop_all() {
    [[ -n "$perf_pid" ]] && { kill -INT "$perf_pid" 2>/dev/null || true; wait "$perf_pid" 2>/dev/null || true; }
    [[ -n "$sampler" ]] && { kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; }
    if [[ -n "$broker" ]]; then
        kill "$broker" 2>/dev/null || true
        for _ in $(seq 300); do kill -0 "$broker" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$broker" 2>/dev/null || true
        wait "$broker" 2>/dev/null || true
    fi
    broker= sampler= perf_pid=
    rm -rf "$WORK/data" "$WORK/dirty.bin"
}
trap stop_all EXIT

variant_flags() {
    case "$1" in
        buffered) ;;
        nowb) echo "--set ringbroker.log.write.behind.bytes=0" ;;
        prealloc) ;; # a topic config (`preallocate`): topic_configs
        direct) echo "--set ringbroker.log.io=direct" ;;
        *) echo "unknown variant $1" >&2; exit 2 ;;
    esac
}

topic_configs() {
    case "$1" in
        prealloc) echo "-c preallocate=true" ;;
    esac
}

prepare() { # state
    sync
    echo 1 >/proc/sys/vm/drop_caches
    case "$1" in
        dirty) dd if=/dev/zero of="$WORK/dirty.bin" bs=1M count="$DIRTY_MB" status=none ;;
        synced) dd if=/dev/zero of="$WORK/dirty.bin" bs=1M count="$DIRTY_MB" conv=fsync status=none ;;
    esac
}

# "tid comm ticks" of every thread of the broker, one block per sample.
snapshot() {
    awk '{ s = $0; t = s; sub(/ .*/, "", t); sub(/^[0-9]+ \(/, "", s); c = substr(s, 1, index(s, ") ") - 1);
           sub(/^.*\) /, "", s); split(s, f, " "); gsub(/ /, "_", c); print t, c, f[12] + f[13] }' \
        /proc/"$broker"/task/*/stat 2>/dev/null || true
}
reported_kib() { cat /sys/module/page_reporting/parameters/reported_kib 2>/dev/null || echo 0; }
process_ticks() { awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[12] + f[13] }' /proc/"$broker"/stat; }

sample_loop() { # out file; bounded: at most 10 minutes of samples
    local out=$1 stacks=$2
    for _ in $(seq 3000); do
        snapshot >>"$out"
        if [[ "$STACKS" == 1 ]]; then
            for t in /proc/"$broker"/task/*; do
                [[ "$(cat "$t/comm" 2>/dev/null)" == iou-wrk-* ]] || continue
                { echo "== ${t##*/} $(cat "$t/wchan" 2>/dev/null)"; cat "$t/stack" 2>/dev/null; } >>"$stacks" || true
            done
        fi
        sleep 0.2
    done
}

measure() { # round variant state → one row
    local r=$1 v=$2 st=$3 tag="$1-$2-$3"
    local rep0; rep0=$(reported_kib)
    prepare "$st"
    local load; load=$(cut -d' ' -f1 /proc/loadavg)
    local dirty_kb; dirty_kb=$(awk '/^Dirty:/ {print $2}' /proc/meminfo)
    # shellcheck disable=SC2046
    "$rb" serve --listen "$addr" --data-dir "$WORK/data" --shards 2 --set num.partitions=4 \
        --set ringbroker.metrics.listen=none $(variant_flags "$v") $EXTRA_SET \
        >"$WORK/broker-$tag.log" 2>&1 &
    broker=$!
    for _ in $(seq 200); do
        grep -qs "listening on" "$WORK/broker-$tag.log" && break
        kill -0 "$broker" 2>/dev/null || { echo "broker exited: $WORK/broker-$tag.log" >&2; exit 1; }
        sleep 0.05
    done
    # shellcheck disable=SC2046
    timeout 60 "$rb" topic create wb -p 4 -b "$addr" $(topic_configs "$v") >"$WORK/topic-$tag.log" 2>&1 ||
        { echo "topic create failed: $WORK/topic-$tag.log" >&2; exit 1; }
    snapshot >"$WORK/start-$tag.txt"
    local p0; p0=$(process_ticks)
    : >"$WORK/samples-$tag.txt"
    sample_loop "$WORK/samples-$tag.txt" "$WORK/stacks-$v-$st.txt" &
    sampler=$!
    if [[ "$PERF" == 1 ]]; then
        perf stat -e io_uring:io_uring_submit_req,io_uring:io_uring_queue_async_work -p "$broker" \
            -x, -o "$WORK/perf-$tag.txt" >/dev/null 2>&1 &
        perf_pid=$!
        sleep 0.3
    fi
    timeout 300 "$rb" bench produce --bootstrap "$addr" --topic "wb" --partitions 4 \
        --records "$RECORDS" --record-size 1024 --acks 1 --compression none --linger-ms 5 \
        --batch-size 1048576 --quiet --broker-metrics none >"$WORK/client-$tag.log" 2>&1 || true
    # The sampler stops with the producer (the split is the produce's); the threads are read
    # last before the process, so the total never lags the sum of its parts.
    kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; sampler=
    snapshot >>"$WORK/samples-$tag.txt"
    local p1; p1=$(process_ticks)
    local handed=- submitted=-
    if [[ -n "$perf_pid" ]]; then
        kill -INT "$perf_pid" 2>/dev/null || true; wait "$perf_pid" 2>/dev/null || true; perf_pid=
        submitted=$(awk -F, '/submit_req/ {print $1}' "$WORK/perf-$tag.txt")
        handed=$(awk -F, '/queue_async_work/ {print $1}' "$WORK/perf-$tag.txt")
    fi
    local crps=- cns=-
    if [[ "$CONSUME" == 1 ]]; then
        # What a consumer catching up gets: the whole topic from the start, right after it was
        # written (buffered: from the page cache; direct: the tail cache, then the disk).
        timeout 300 "$rb" bench consume --bootstrap "$addr" --topic wb --quiet \
            --broker-metrics none >"$WORK/consume-$tag.log" 2>&1 || true
        crps=$(sed -n 's/^consumed: .*, \([0-9]*\) records\/s.*/\1/p' "$WORK/consume-$tag.log")
        cns=$(awk -v d=$(($(process_ticks) - p1)) -v n="$RECORDS" -v tck="$(getconf CLK_TCK)" \
            'BEGIN { printf "%.0f", d * 1e9 / tck / n }')
        crps=$(awk -v r="${crps:-0}" 'BEGIN { printf "%.0f", r * 1024 / 1e6 }')
    fi
    local rps; rps=$(sed -n 's/^produced: .*, \([0-9]*\) records\/s.*/\1/p' "$WORK/client-$tag.log")
    [[ -n "$rps" ]] || { echo "producer failed: $WORK/client-$tag.log" >&2; rps=0; }
    local reported=$((($(reported_kib) - rep0) / 1024))
    stop_all
    # Per thread: the last value seen minus the value at the start (0 for a thread born
    # during the run), summed by kind.
    local split
    split=$(awk -v total=$((p1 - p0)) -v n="$RECORDS" -v tck="$(getconf CLK_TCK)" '
        FNR == NR { start[$1] = $3; next }
        { last[$1] = $3; comm[$1] = $2 }
        END {
            for (t in last) {
                d = last[t] - ((t in start) ? start[t] : 0)
                if (comm[t] ~ /^ringbroker-shar/) shard += d; else if (comm[t] ~ /^iou-wrk-/) iou += d
            }
            other = total - shard - iou; if (other < 0) other = 0
            ns = 1e9 / tck / n
            printf "%.0f\t%.0f\t%.0f\t%.0f", total * ns, shard * ns, iou * ns, other * ns
        }' "$WORK/start-$tag.txt" "$WORK/samples-$tag.txt")
    local mbs; mbs=$(awk -v r="$rps" 'BEGIN { printf "%.0f", r * 1024 / 1e6 }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$v" "$st" "$load" "$dirty_kb" "$mbs" \
        "$split" "$submitted" "$handed" "$rps" "$reported" "$crps" "$cns" >>"$WORK/rounds.tsv"
    IFS=$'\t' read -r tot sh io ot <<<"$split"
    echo "| $r | $v | $st | $load | $((dirty_kb / 1024)) | $mbs | $tot | $sh | $io | $ot | $submitted | $handed | $reported | $crps | $cns |"
}

printf 'round\tvariant\tstate\tload1\tdirty_kb_before\tmb_s\tcpu_ns\tshard_ns\tiou_ns\tother_ns\tsubmitted\thanded_off\trecords_s\treported_mib\tconsume_mb_s\tconsume_cpu_ns\n' >"$WORK/rounds.tsv"
echo "machine: $(nproc) CPUs, $(uname -r), data dir on $(df --output=source "$WORK" | tail -1) ($fs)," \
    "vm.dirty_background_ratio=$(cat /proc/sys/vm/dirty_background_ratio) vm.dirty_ratio=$(cat /proc/sys/vm/dirty_ratio)"
echo
echo "| round | variant | page cache | load avg | dirty MiB before | MB/s | CPU ns/record | shard | iou-wrk | other | io_uring submits | handed to workers | MiB reported to host | consume MB/s | consume CPU ns/record |"
echo "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
read -r -a vs <<<"$VARIANTS"
for r in $(seq "$ROUNDS"); do
    # Rotate the order so no variant always runs first (or right after another's dirty round).
    for i in "${!vs[@]}"; do
        v=${vs[$(((i + r - 1) % ${#vs[@]}))]}
        for st in $STATES; do
            measure "$r" "$v" "$st"
        done
    done
done

echo
echo "| variant | page cache | median MB/s | median CPU ns/record | shard | iou-wrk | other |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
for v in "${vs[@]}"; do
    for st in $STATES; do
        awk -F'\t' -v v="$v" -v st="$st" '
            function med(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
                                           return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
            NR > 1 && $2 == v && $3 == st { n++; m[n] = $6; c[n] = $7; s[n] = $8; i[n] = $9; o[n] = $10 }
            END { if (n) printf "| %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f |\n", v, st, med(m, n), med(c, n), med(s, n), med(i, n), med(o, n) }' \
            "$WORK/rounds.tsv"
    done
done
echo
echo "files: $WORK (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
