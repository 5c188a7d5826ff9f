#!/usr/bin/env bash
# librdkafka's own test suite (its tests/ directory, the `test-runner` binary) against a ringbroker,
# with Kafka's shell tools from tests/kafka/kafka.sh as KAFKA_PATH for the tests that call them.
#
#   bash tests/librdkafka/run.sh                    # the KAFKA_PATH tests: 0052 0077 0098 0109 0115 0119
#   bash tests/librdkafka/run.sh 0001 0012 0030     # any tests, by number
#   RINGBROKER_BIN=path ...                          # the broker binary (default target/release/ringbroker)
#
# The librdkafka sources come from the rdkafka-sys crate (as benches/kafka_perf/
# build_rdkafka_performance.sh fetches them: a throwaway manifest and `cargo fetch`), built once
# into target/librdkafka/<version>/ (configure, make: librdkafka, librdkafka++ and
# tests/test-runner; a few minutes on 2 cores). Each test runs alone (TESTS=N) against a broker of
# its own (2 shards, loopback, a temp data dir), with TEST_KAFKA_VERSION=4.1.1, BROKERS and
# KAFKA_PATH set and a test.conf naming the broker; its output goes to the work dir. Prints a
# PASS/FAIL line per test (run.sh-style) and `librdkafka: N passed, M failed`; exits non-zero on a
# failure (a test of the KNOWN table below that fails is a KNOWN-FAIL line instead). Env: RDKAFKA_SYS_VERSION (4.10.0 = librdkafka 2.12.1), LIBRDKAFKA_TEST_TIMEOUT (s per
# test, 300), LIBRDKAFKA_KEEP=1 (keep the work dir).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
version="${RDKAFKA_SYS_VERSION:-4.10.0}"
build="$repo/target/librdkafka/$version"
per_test="${LIBRDKAFKA_TEST_TIMEOUT:-300}"
tests=("$@")
[[ ${#tests[@]} -gt 0 ]] || tests=(0052 0077 0098 0109 0115 0119)

log() { printf '[librdkafka] %s\n' "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }

# --------------------------------------------------------------- build (once)
if [[ ! -x "$build/librdkafka/tests/test-runner" ]]; then
  src="$(bash "$repo/benches/kafka_perf/librdkafka_source.sh" "$version")" || die "cargo fetch failed"
  [[ -f "$src/tests/test.c" ]] || die "librdkafka's tests/ not found in $src"
  rm -rf "$build"
  mkdir -p "$build"
  cp -a "$src" "$build/librdkafka"
  cd "$build/librdkafka" || die "no $build/librdkafka"
  log "configure + make (librdkafka, librdkafka++, tests/test-runner) in $build/librdkafka"
  ./configure --disable-ssl --disable-gssapi --disable-curl --disable-lz4-ext --enable-zlib --enable-zstd \
    > "$build/configure.log" 2>&1 || { tail -20 "$build/configure.log" >&2; die "configure failed"; }
  jobs="${LIBRDKAFKA_JOBS:-2}"
  { timeout 1800 make -j"$jobs" -C src librdkafka.so &&
    timeout 1800 make -j"$jobs" -C src-cpp &&
    timeout 1800 make -j"$jobs" -C tests test-runner; } > "$build/make.log" 2>&1 ||
    { tail -30 "$build/make.log" >&2; die "make failed (log: $build/make.log)"; }
fi
tests_dir="$build/librdkafka/tests"

KAFKA_PATH="$(bash "$repo/tests/kafka/kafka.sh" install)" || die "tests/kafka/kafka.sh install failed"
BIN="${RINGBROKER_BIN:-$repo/target/release/ringbroker}"
[[ -x "$BIN" ]] || die "no broker binary at $BIN (cargo build --release, or RINGBROKER_BIN=path)"

# --------------------------------------------------------------- the broker
work="$(mktemp -d "${TMPDIR:-/tmp}/rb-librdkafka.XXXXXX")"
bpid=
stop_broker() {
  [[ -n "$bpid" ]] || return 0
  kill -TERM "$bpid" 2>/dev/null
  local i
  for i in $(seq 1 200); do kill -0 "$bpid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$bpid" 2>/dev/null
  wait "$bpid" 2>/dev/null
  bpid=
}
failed=0
cleanup() {
  stop_broker
  if [[ $failed -eq 0 && -z "${LIBRDKAFKA_KEEP:-}" ]]; then rm -rf "$work"; else log "logs in $work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_broker() { # $1 name: a fresh broker for one test; sets BROKERS
  local port dir="$work/$1-data" i
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  mkdir -p "$dir"
  "$BIN" serve --listen "127.0.0.1:$port" --data-dir "$dir" --shards 2 --set ringbroker.metrics.listen=none \
    > "$work/$1-broker.out" 2> "$work/$1-broker.err" &
  bpid=$!
  for i in $(seq 1 400); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && { BROKERS="127.0.0.1:$port"; return 0; }
    kill -0 "$bpid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# --------------------------------------------------------------- the tests
# Tests that cannot pass against ringbroker today, and why: a failure of one is a KNOWN-FAIL (not
# counted as failed); a pass of one is reported, so that the entry is removed.
declare -A KNOWN=(
  [0077]="kafka-topics 4.1 refuses the test's segment.bytes=10000 itself (Kafka 4.0 raised its minimum to 1 MiB, KIP-1030) before any request; ringbroker has no log cleaner yet either (the test waits for compaction)"
  [0098]="it creates its topics at replication factor 3 (a 3-broker cluster; here one broker: INVALID_REPLICATION_FACTOR), then its Java TransactionProducerCli needs transactions (issue 33); built without rapidjson-dev it is SKIPPED"
  [0109]="its last step adds an ACL with kafka-acls (CreateAcls): ringbroker serves no ACL APIs (UNSUPPORTED_VERSION); the auto-create steps before it pass"
  [0115]="kafka-acls (CreateAcls): ringbroker serves no ACL APIs"
  [0119]="kafka-acls (CreateAcls): ringbroker serves no ACL APIs"
)
passed=0
known=0
for t in "${tests[@]}"; do
  if ! start_broker "$t"; then
    echo "FAIL librdkafka: $t: the broker did not start ($(tail -2 "$work/$t-broker.err" | tr '\n' ' '))"
    failed=$((failed + 1))
    stop_broker
    continue
  fi
  printf 'bootstrap.servers=%s\n' "$BROKERS" > "$work/$t-test.conf"
  t0=$SECONDS
  (cd "$tests_dir" && TESTS="$t" TEST_KAFKA_VERSION=4.1.1 KAFKA_PATH="$KAFKA_PATH" BROKERS="$BROKERS" \
    RDKAFKA_TEST_CONF="$work/$t-test.conf" LD_LIBRARY_PATH="../src:../src-cpp" \
    timeout "$per_test" ./test-runner) > "$work/$t.log" 2>&1
  rc=$?
  # test-runner's summary line of the test: "| 0052_msg_timestamps | PASSED | 3.210s |", FAILED, SKIPPED
  status="$(grep -aoE "\| ${t}_[A-Za-z0-9_]+ +\| +[A-Z]+" "$work/$t.log" | tail -1 | awk '{print $NF}')"
  why="$(grep -aE 'TEST FAILURE|FAIL:|Test .* FAILED|### Test' "$work/$t.log" | grep -avE 'PASSED' | head -3 | sed 's/\x1b\[[0-9;]*m//g' | tr '\n' ' ' | cut -c1-400)"
  if [[ $rc -eq 0 && "$status" != SKIPPED ]]; then
    echo "PASS librdkafka: $t (${status:-PASSED}, $((SECONDS - t0)) s)${KNOWN[$t]:+ (listed as a known failure: remove it from KNOWN)}"
    passed=$((passed + 1))
  elif [[ $rc -ne 0 && -n "${KNOWN[$t]:-}" ]]; then
    echo "KNOWN-FAIL librdkafka: $t: ${KNOWN[$t]} (exit $rc: $why)"
    known=$((known + 1))
  elif [[ $rc -eq 0 ]]; then
    echo "SKIP librdkafka: $t: $(grep -aE 'SKIP' "$work/$t.log" | head -1 | cut -c1-300)"
  elif [[ $rc -eq 124 ]]; then
    echo "FAIL librdkafka: $t: timed out after ${per_test} s: $why (log $work/$t.log)"
    failed=$((failed + 1))
  else
    echo "FAIL librdkafka: $t: exit $rc: $why (log $work/$t.log)"
    failed=$((failed + 1))
  fi
  stop_broker
  if grep -qiE 'panicked' "$work/$t-broker.err"; then
    echo "FAIL librdkafka: $t: the broker panicked: $(grep -m1 -i panicked "$work/$t-broker.err" | cut -c1-300)"
    failed=$((failed + 1))
  fi
done
echo "librdkafka: $passed passed, $failed failed, $known known failures"
[[ $failed -eq 0 ]]
