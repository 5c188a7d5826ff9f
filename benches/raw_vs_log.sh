#!/usr/bin/env bash
# Raw sequential write bandwidth (dd) against the partition log (examples/log_throughput), on
# the same file system, in one run.
#
#   bash benches/raw_vs_log.sh [DIR] [TOTAL_MIB] [EACH_TOTAL_MIB]
#
#   DIR             where the test files go (default target/raw-vs-log); removed afterwards
#   TOTAL_MIB       size of the streaming comparison (default 2048 = 2 GiB)
#   EACH_TOTAL_MIB  size of the fsync-per-write comparison (default 512)
#   REPEATS=N       runs of each method (default 3), alternating; the median is reported
#   LOG_EXTRA_ARGS  more log_throughput flags for both log runs, e.g. "--inflight 4"
#   WRITE_BEHIND    size for the extra log_end_wb row (default 8M; 0 leaves the row out)
#
# Comparison 1 (streaming, one fdatasync at the end):
#   raw_direct    dd if=/dev/zero of=FILE bs=1M count=N oflag=direct conv=fdatasync
#   raw_buffered  dd if=/dev/zero of=FILE bs=1M count=N conv=fdatasync
#   log_end       log_throughput --batch-size 1048576 --total N MiB --sync end
#   log_end_wb    the same with --write-behind 8M: an experiment, not the log's own behaviour
#                 (the example starts write-back of the segment every 8 MiB, sync_file_range)
# Comparison 2 (durable every 1 MiB):
#   raw_dsync     dd if=/dev/zero of=FILE bs=1M count=M oflag=direct,dsync
#   log_each      log_throughput --batch-size 1048576 --total M MiB --sync each
#
# One untimed round of comparison 1 runs first: on a VM, the first buffered writes after a
# while are much slower (the guest's free pages are not backed by the host until touched).
# The example is built once (cargo build --release --example log_throughput) and its binary
# run directly, so that a rebuild can not land between runs; it times itself (first append to
# the end of the final flush), dd times itself (open to the end of its fdatasync).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${1:-target/raw-vs-log}
TOTAL_MIB=${2:-2048}
EACH_TOTAL_MIB=${3:-512}
REPEATS=${REPEATS:-3}
WRITE_BEHIND=${WRITE_BEHIND:-8M}
read -r -a LOG_EXTRA <<<"${LOG_EXTRA_ARGS:-}"
TARGET_RATIO=0.85

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
# Everything goes into a fresh subdirectory, the only thing removed at the end (with DIR itself
# if that is then empty).
WORK=$(mktemp -d "$DIR/raw-vs-log.XXXXXX")
RAW_FILE="$WORK/dd.bin"
LOG_DIR="$WORK/log"

cleanup() { rm -rf "$WORK"; rmdir "$DIR" 2>/dev/null || true; }
trap cleanup EXIT

echo "== building examples/log_throughput (release)" >&2
cargo build --release --quiet --example log_throughput
BIN="$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
  sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
BIN="${BIN:-target}/release/examples/log_throughput"
[[ -x "$BIN" ]] || { echo "log_throughput binary not found at $BIN" >&2; exit 1; }

# Lets the previous run's deletion (ext4 here is mounted with `discard`) and write-back settle.
settle() { sync; sleep 1; }

# dd ARGS... -> MiB/s (from dd's own byte count and elapsed time)
run_dd() {
  rm -f "$RAW_FILE"
  settle
  local out
  out=$(LC_ALL=C dd if=/dev/zero of="$RAW_FILE" "$@" 2>&1 | tail -n 1)
  rm -f "$RAW_FILE"
  # "2147483648 bytes (2.1 GB, 2.0 GiB) copied, 2.1 s, 1.0 GB/s"
  awk -v line="$out" 'BEGIN {
    n = split(line, f, " "); bytes = f[1];
    for (i = 1; i <= n; i++) if (f[i] == "s," || f[i] == "s") secs = f[i - 1];
    gsub(",", "", secs);
    if (secs + 0 <= 0) { print "dd output not understood: " line > "/dev/stderr"; exit 1 }
    printf "%.1f\n", bytes / 1048576 / secs }'
}

# run_log ARGS... -> MiB/s (the example's mib_per_s)
run_log() {
  rm -rf "$LOG_DIR"
  settle
  local out
  out=$("$BIN" --dir "$LOG_DIR" "$@" ${LOG_EXTRA[@]+"${LOG_EXTRA[@]}"})
  rm -rf "$LOG_DIR"
  echo "$out" >&2
  sed -n 's/.* mib_per_s=\([0-9.]*\).*/\1/p' <<<"$out"
}

declare -A RESULTS
record() { RESULTS[$1]="${RESULTS[$1]:-}${RESULTS[$1]:+ }$2"; }

# median_of NAME -> the median of NAME's runs
median_of() {
  local -a values
  read -r -a values <<<"${RESULTS[$1]}"
  printf '%s\n' "${values[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

# row NAME -> "| name | r1 r2 r3 | median |"
row() { printf '| %-13s | %-32s | %9s |\n' "$1" "${RESULTS[$1]}" "$(median_of "$1")"; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
verdict() { awk -v r="$1" -v t="$TARGET_RATIO" 'BEGIN { print (r >= t ? "meets" : "BELOW") }'; }

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== machine: $(nproc) cores, kernel $(uname -r), $(findmnt -n -o FSTYPE -T "$DIR") on $(findmnt -n -o SOURCE -T "$DIR"), load $LOAD_BEFORE" >&2
round1() {
  record raw_direct "$(run_dd bs=1M count="$TOTAL_MIB" oflag=direct conv=fdatasync)"
  record log_end "$(run_log --batch-size 1048576 --total "${TOTAL_MIB}M" --sync end)"
  record raw_buffered "$(run_dd bs=1M count="$TOTAL_MIB" conv=fdatasync)"
  if [[ $WRITE_BEHIND != 0 ]]; then
    record log_end_wb "$(run_log --batch-size 1048576 --total "${TOTAL_MIB}M" --sync end \
      --write-behind "$WRITE_BEHIND")"
  fi
}

echo "== comparison 1: ${TOTAL_MIB} MiB in 1 MiB writes, fdatasync at the end; ${REPEATS} runs each" >&2
echo "-- warm-up round (not counted)" >&2
round1
RESULTS=()
for run in $(seq 1 "$REPEATS"); do
  echo "-- run $run" >&2
  round1
done

echo "== comparison 2: ${EACH_TOTAL_MIB} MiB in 1 MiB writes, each durable; ${REPEATS} runs each" >&2
for run in $(seq 1 "$REPEATS"); do
  echo "-- run $run" >&2
  record raw_dsync "$(run_dd bs=1M count="$EACH_TOTAL_MIB" oflag=direct,dsync)"
  record log_each "$(run_log --batch-size 1048576 --total "${EACH_TOTAL_MIB}M" --sync each)"
done

raw=$(median_of raw_direct)
buffered=$(median_of raw_buffered)
log_end=$(median_of log_end)
raw_dsync=$(median_of raw_dsync)
log_each=$(median_of log_each)
r1=$(ratio "$log_end" "$raw")
r1b=$(ratio "$log_end" "$buffered")
r2=$(ratio "$log_each" "$raw_dsync")

echo
echo "raw vs log, MiB/s ($(nproc) cores, kernel $(uname -r), $(findmnt -n -o FSTYPE -T "$DIR") on $(findmnt -n -o SOURCE -T "$DIR"))"
echo "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg)${LOG_EXTRA_ARGS:+; log flags: $LOG_EXTRA_ARGS}"
echo
echo "| method        | runs (MiB/s)                     |    median |"
echo "|---------------|----------------------------------|-----------|"
for name in raw_direct raw_buffered log_end log_end_wb raw_dsync log_each; do
  [[ -n ${RESULTS[$name]:-} ]] && row "$name"
done
echo
echo "streaming ${TOTAL_MIB} MiB:  log_end / raw_direct   = $r1  ($(verdict "$r1") the ${TARGET_RATIO} target)"
echo "                     log_end / raw_buffered = $r1b"
if [[ -n ${RESULTS[log_end_wb]:-} ]]; then
  echo "                     log_end_wb / raw_direct = $(ratio "$(median_of log_end_wb)" "$raw")  (experiment: write-behind $WRITE_BEHIND)"
fi
echo "durable ${EACH_TOTAL_MIB} MiB:    log_each / raw_dsync   = $r2  ($(verdict "$r2") the ${TARGET_RATIO} target)"
