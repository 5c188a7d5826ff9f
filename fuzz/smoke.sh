#!/usr/bin/env bash
# Bounded fuzzing of every target: a CI smoke run, not a search (fuzz/README.md says how to run
# long). Builds the targets once, then fuzzes each for FUZZ_SECONDS (default 12; 7 targets make
# about 84 s) starting from the committed seeds, and prints per target the inputs executed (from
# libFuzzer's final "Done N runs" line) and the crashes. Exits non-zero if any target crashed,
# leaked, timed out or ran out of memory; the input is left in fuzz/artifacts/<target>/.
#
#   bash fuzz/smoke.sh                  all targets
#   FUZZ_SECONDS=60 bash fuzz/smoke.sh frame_header legacy
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${FUZZ_SECONDS:-12}
TOOLCHAIN=${FUZZ_TOOLCHAIN:-nightly}
# Build flags for `cargo fuzz build` and `run` (they must match, or `run` rebuilds). CI uses
# `--sanitizer none --dev`: coverage-guided all the same, with overflow checks, and a clean
# build takes 2 min 40 s instead of 7 min (optimized, 2 cores); it executes 5-25x fewer inputs
# in its 12 s per target, which a smoke run can spare. The long runs in fuzz/README.md keep
# optimizations and AddressSanitizer.
read -r -a BUILD_FLAGS <<<"${FUZZ_BUILD_FLAGS:-}"
# Memory: the broker's alloc_guard turns wire-sized allocations of >= 1 GiB into lazy mappings
# that libFuzzer's malloc hooks never see, so no limit is needed for them; a plain malloc of
# >= 1 GiB (one that bypassed the guard) is a finding. RSS stays libFuzzer's default 2 GiB.
LIBFUZZER_ARGS=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10
  -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1)

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +"$TOOLCHAIN" fuzz list)
fi

echo "== fuzz: building ${#targets[@]} targets"
if ! cargo +"$TOOLCHAIN" fuzz build "${BUILD_FLAGS[@]}"; then
  echo "fuzz: build failed" >&2
  exit 2
fi

# New inputs libFuzzer finds go to a scratch corpus; the committed seeds are only read.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ringbroker-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

failed=0
printf '%-20s %12s %8s  %s\n' target executions crashes result
for t in "${targets[@]}"; do
  mkdir -p "$scratch/$t" "fuzz/corpus/$t" "fuzz/artifacts/$t"
  before=$(find "fuzz/artifacts/$t" -type f | wc -l)
  cargo +"$TOOLCHAIN" fuzz run "${BUILD_FLAGS[@]}" "$t" "$scratch/$t" "fuzz/corpus/$t" -- "${LIBFUZZER_ARGS[@]}" \
    >"$scratch/$t.log" 2>&1
  rc=$?
  runs=$(grep -oE '^Done [0-9]+ runs' "$scratch/$t.log" | tail -1 | grep -oE '[0-9]+')
  [ -n "$runs" ] || runs=$(grep -oE '^stat::number_of_executed_units: *[0-9]+' "$scratch/$t.log" |
    grep -oE '[0-9]+$' | tail -1)
  crashes=$(($(find "fuzz/artifacts/$t" -type f | wc -l) - before))
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    result="FAILED (exit $rc)"
  else
    result=ok
  fi
  printf '%-20s %12s %8s  %s\n' "$t" "${runs:-?}" "$crashes" "$result"
  if [ "$rc" -ne 0 ]; then
    # The sanitizer or panic report and the artifact path.
    grep -E 'panicked|ERROR: |SUMMARY|Test unit written|artifact_prefix' "$scratch/$t.log" | head -20
  fi
done

if [ "$failed" -ne 0 ]; then
  echo "fuzz: FAILED; reproduce with: cargo +$TOOLCHAIN fuzz run <target> fuzz/artifacts/<target>/<file>"
  exit 1
fi
echo "fuzz: smoke run passed"
