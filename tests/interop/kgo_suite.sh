#!/usr/bin/env bash
# franz-go's own kgo test suite (github.com/twmb/franz-go/pkg/kgo, the version pinned in
# tests/interop/gomod/go.mod) against a ringbroker of its own on loopback.
#
#   bash tests/interop/kgo_suite.sh                    the tests known to pass (KGO_PASSING below)
#   KGO_RUN='^TestGroupETL$' bash tests/interop/kgo_suite.sh     a -run regex of your own
#   KGO_RUN=all ...                                    every test of the package (transactional
#                                                      ones fail: no transactions, issue 33)
#   RINGBROKER_BIN=path ...     the broker binary (default: target/release/ringbroker, built if missing)
#   KGO_WORK=dir ...            where the broker's data, logs and the test binary go (default: a temp
#                               dir, removed after a run without failures unless KGO_KEEP=1)
#   KGO_TIMEOUT=secs ...        bound of the whole go test run (default 600)
#   KGO_TEST_RECORDS=N ...      records the ETL tests produce (default: the suite's own, 500000)
#
# Module source from the Go module proxy (go mod download; GOFLAGS=-mod=readonly), the test
# binary built with `go test -c` under $KGO_WORK. Prints `PASS kgo: TestX (secs)`, `FAIL kgo:
# TestX ...`, `KNOWN-FAIL kgo: ...` lines for tests/interop/run.sh's parser, then
# `kgo: N passed, M failed`; exits non-zero on any failure. Every wait is bounded; the broker is
# stopped on every exit (trap).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
GOMOD=$ROOT/tests/interop/gomod

# Every test of the package that talks to a broker, but the transactional one: all pass against
# ringbroker, or skip themselves (share groups, KIP-848, the Produce v0-v2 removal of Kafka 4).
# docs/testing.md has the list, and the reasons of the failures and skips.
KGO_PASSING='^(TestPing|TestIssue1034|TestUnknownGroupOffsetFetchPinned|TestShareGroup|TestIssue325|TestConsumeTopicRetrieval|TestConsumeTopicRetrieval_Many|TestConsumeRegex|TestConsumeRegexShareSkipsInternal|Test848RegexBrokerResolves|TestIssue337|TestDirectPartitionPurge|TestIssue434|TestAddRemovePartitions|TestPauseIssue489|TestPauseIssueOct2023|TestIssue523|TestIssue648|TestIssue810|TestIssue865|TestIssueFetchLargerThanBrokerMaxReadBytes|TestPooling|TestGroupSimple|TestHookPollStart|TestPollWaitStateNoUnderflow|TestLookbackMilli|TestConsumeMaxDecompressBatchBytes|TestClient_Produce|TestIssue769|TestIssueProduceBrokerTooOldFailsRecords|TestIssueProduceSyncManualPartitionNegativeDoesNotPanic|TestIssue831|TestClient_ProduceLargeMessages|TestShareGroupETL|TestShareGroupAckOnClose|TestShareGroupOffsetsAdmin|TestGroupETL)$'
# Tests that fail for a feature ringbroker does not have: reported as KNOWN-FAIL when run.
# TestTxnEtl: transactions (issue 33; InitProducerId with a transactional id is refused).
KGO_KNOWN_FAIL=' TestTxnEtl '

T0=$(date +%s)
PASSED=0
FAILED=0
KNOWN=0
fail() { FAILED=$((FAILED + 1)); echo "FAIL kgo: $*"; }
summary() {
  [ "$KNOWN" -gt 0 ] && echo "kgo: $KNOWN known failures (missing broker features)"
  echo "kgo: took $(($(date +%s) - T0))s; logs in $WORK"
  echo "kgo: $PASSED passed, $FAILED failed"
}

if [ -n "${KGO_WORK:-}" ]; then
  WORK=$KGO_WORK
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/ringbroker-kgo.XXXXXX")
  OWN_WORK=1 # removed at the end unless something failed or KGO_KEEP=1
fi
BPID=
cleanup() {
  if [ -n "$BPID" ] && kill -0 "$BPID" 2>/dev/null; then
    kill -TERM "$BPID" 2>/dev/null
    for _ in $(seq 1 200); do kill -0 "$BPID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$BPID" 2>/dev/null
    wait "$BPID" 2>/dev/null
  fi
  if [ -n "${OWN_WORK:-}" ] && [ "$FAILED" -eq 0 ] && [ -z "${KGO_KEEP:-}" ]; then
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'echo "kgo: interrupted"; exit 130' INT TERM

export GOFLAGS=-mod=readonly GO111MODULE=on
export GOCACHE=${GOCACHE:-$WORK/go-cache}
# The franz-go module's source, from the module cache or the proxy.
if ! FRANZ=$(cd "$GOMOD" && timeout 300 go mod download -json github.com/twmb/franz-go 2>"$WORK/go-download.err" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])' 2>>"$WORK/go-download.err"); then
  fail "go mod download github.com/twmb/franz-go failed (is the Go module proxy $(go env GOPROXY) reachable?): $(tail -3 "$WORK/go-download.err" | tr '\n' ' ')"
  summary
  exit 1
fi
VERSION=${FRANZ##*@}
echo "== kgo: franz-go $VERSION ($FRANZ), go test -c"
if ! (cd "$FRANZ" && timeout 600 go test -c -o "$WORK/kgo.test" ./pkg/kgo/ >"$WORK/go-test-build.log" 2>&1); then
  fail "go test -c ./pkg/kgo/ (franz-go $VERSION): $(tail -3 "$WORK/go-test-build.log" | tr '\n' ' ')"
  summary
  exit 1
fi

if [ -n "${RINGBROKER_BIN:-}" ]; then
  BIN=$RINGBROKER_BIN
else
  BIN=$ROOT/target/release/ringbroker
  if [ -n "${CARGO_TARGET_DIR:-}" ]; then BIN=$CARGO_TARGET_DIR/release/ringbroker; fi
  [ -x "$BIN" ] || cargo build --release --bin ringbroker --quiet || { fail "cargo build --release"; summary; exit 1; }
fi
[ -x "$BIN" ] || { fail "no broker binary at $BIN"; summary; exit 1; }

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$WORK/data"
"$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" --shards 2 \
  --set group.initial.rebalance.delay.ms=200 --set group.min.session.timeout.ms=1000 \
  --set ringbroker.metrics.listen=none \
  >"$WORK/broker.out" 2>"$WORK/broker.err" &
BPID=$!
ready=
for _ in $(seq 1 500); do
  if grep -q "listening on" "$WORK/broker.out" 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    ready=1
    break
  fi
  kill -0 "$BPID" 2>/dev/null || break
  sleep 0.04
done
if [ -z "$ready" ]; then
  fail "broker did not start on 127.0.0.1:$PORT: $(tail -3 "$WORK/broker.err" | tr '\n' ' ')"
  summary
  exit 1
fi

RUN=${KGO_RUN:-$KGO_PASSING}
[ "$RUN" = all ] && RUN=.
LIMIT=${KGO_TIMEOUT:-600}
echo "== kgo: go test -run '$RUN' against 127.0.0.1:$PORT (bound ${LIMIT}s)"
# The test binary runs in the package directory (testdata, if any); KGO_TEST_RF=1: one broker.
(cd "$FRANZ/pkg/kgo" && KGO_SEEDS=127.0.0.1:$PORT KGO_TEST_RF=1 KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-500000} \
  KGO_LOG_LEVEL=${KGO_LOG_LEVEL:-none} timeout -k 10 "$LIMIT" "$WORK/kgo.test" -test.run "$RUN" -test.v \
  -test.timeout "$((LIMIT - 5))s" -test.count 1 >"$WORK/kgo-test.log" 2>&1)
rc=$?
while read -r verdict name secs; do
  case $verdict in
    PASS) PASSED=$((PASSED + 1)); echo "PASS kgo: $name $secs" ;;
    FAIL)
      if [[ $KGO_KNOWN_FAIL == *" ${name%%/*} "* ]]; then
        KNOWN=$((KNOWN + 1))
        echo "KNOWN-FAIL kgo: $name $secs (needs transactions, issue 33)"
        continue
      fi
      fail "$name $secs: $(grep -m1 -E "^\s+\S+_test\.go:[0-9]+: " <(sed -n "/^=== RUN   $name\$/,/^--- FAIL: $name /p" "$WORK/kgo-test.log") | sed 's/^\s*//' | head -c 300)" ;;
    SKIP) echo "SKIP kgo: $name $secs" ;;
  esac
done < <(sed -nE 's/^--- (PASS|FAIL|SKIP): (Test[^ ]*) (\(.*\))$/\1 \2 \3/p' "$WORK/kgo-test.log")
if [ $rc -eq 124 ] || [ $rc -eq 137 ] || grep -q '^panic: test timed out' "$WORK/kgo-test.log"; then
  # go test's own bound (-test.timeout) lists the tests still running; the outer timeout does not.
  running=$(sed -n '/^\trunning tests:/,/^$/p' "$WORK/kgo-test.log" | sed -nE 's/^\t\t(Test[^ /]*).*/\1/p' | sort -u | tr '\n' ' ')
  [ -n "$running" ] || running=$(grep -E '^=== (RUN|CONT) ' "$WORK/kgo-test.log" | tail -1 | awk '{print $3}')
  for name in $running; do
    if [[ $KGO_KNOWN_FAIL == *" ${name%%/*} "* ]]; then
      KNOWN=$((KNOWN + 1))
      echo "KNOWN-FAIL kgo: $name did not finish within ${LIMIT}s (needs transactions, issue 33)"
    else
      fail "$name did not finish within ${LIMIT}s (go test timed out)"
    fi
  done
elif [ $rc -ne 0 ] && [ $FAILED -eq 0 ]; then
  fail "go test exited $rc without a failing test: $(tail -5 "$WORK/kgo-test.log" | tr '\n' ' ')"
fi
if grep -qiE 'panicked' "$WORK/broker.err"; then
  fail "broker log has a panic: $(grep -iE -m1 -A2 'panicked' "$WORK/broker.err" | tr '\n' ' ' | head -c 400)"
fi
summary
[ "$FAILED" -eq 0 ]
