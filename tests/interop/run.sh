#!/usr/bin/env bash
# Interop suite: real third-party Kafka clients (kcat, confluent-kafka, kafka-python, Go's Sarama
# and kafka-go from Debian's packages, kafkajs 2 from npm) against a
# real ringbroker process.
#
#   bash tests/interop/run.sh            builds the release binary if needed, then runs everything
#   RINGBROKER_BIN=path bash tests/interop/run.sh     use that binary instead of building
#   INTEROP_VERBOSE=1 ...                 print every PASS line too (they are always in the logs)
#   INTEROP_ONLY=go,go-modules,kgo-suite ...   run only these clients (run_client names; java and
#                                         kafka-diff too), checking and building only what they
#                                         need; the broker start, refusal and restart checks always run
#
# Starts a broker (2 shards) on a free loopback port with a temp data dir, checks that a second
# broker on the same data dir or port is refused, runs each client's `before` phase, restarts
# the broker (SIGTERM must exit 0) and runs each client's `after` phase (all data intact), then
# stops it again. The consumer-group scripts (groups_*.py) run in the same before/after phases
# (groups_cli.py, our own `consume --group` next to librdkafka, in the after phase only);
# idempotence_test.py then runs with a broker of its own behind a connection-cutting proxy, and
# cluster_test.py and replication_test.py (RF 3 under kill -9 / SIGSTOP / cut links, a
# Jepsen-style checker) each with a cluster of their own; RINGBROKER_REPLICATION_SOAK_SECS=N
# makes the replication test a long run. controller_fault_test.py (a cluster of its own) kill -9s
# and SIGSTOPs the active controller during ISR changes, producer-id allocation and topic
# creation; RINGBROKER_CONTROLLER_FAULT_ROUNDS=N runs N rounds of each instead of 4.
# partition_test.py (root, iproute2 and nftables; a SKIP otherwise) puts each broker of a cluster
# of its own in a network namespace and cuts particular links with nftables: replication, the
# controller quorum, a whole broker, flapping, packet loss; RINGBROKER_PARTITION_SOAK_SECS=N makes
# it a long run. replication_test.py runs twice more with kafkajs and
# rskafka (examples/rskafka_failover.rs, built here in debug; RSKAFKA_FAILOVER_BIN=path uses that
# binary) as the client, under kill -9 of partition leaders.
# Current Go clients (IBM/sarama, segmentio/kafka-go, twmb/franz-go + kadm; tests/interop/gomod,
# a Go module built in module mode, GOFLAGS=-mod=readonly, modules from the Go module proxy) run
# next to Debian's, and franz-go's own kgo test suite (tests/interop/kgo_suite.sh, ~70 s) runs
# with a broker of its own at the end; RINGBROKER_KGO_SUITE=0 leaves the latter out.
# The Java client (tests/interop/java: kafka-clients 4.1.1, a Maven module built here; client
# `java`, before and after the restart) runs every codec, a consumer group through a rebalance,
# an idempotent producer and the admin calls. `kafka-diff` (tests/interop/kafka_diff.py) starts
# Apache Kafka 4.1.1 (tests/kafka/kafka.sh, one node, from Maven Central) and a ringbroker of its
# own, runs the same Java scenarios and Kafka's own CLI classes (kafka-topics, kafka-configs,
# kafka-consumer-groups, kafka-get-offsets, kafka-log-dirs, kafka-delete-records) against both and
# compares the answers field by field, with an allowlist of explained differences; it stops Kafka
# and its broker at the end, also on failure.
# Every wait is bounded. Ends with `interop: N passed, M failed`; exits non-zero on any failure.
# Needs kcat, python3 with confluent-kafka, kafka-python, lz4, python-snappy, zstandard, and
# Debian's golang-go, golang-github-shopify-sarama-dev, golang-github-segmentio-kafka-go-dev,
# node with tests/interop/kafkajs/node_modules (npm install there; .ci/run installs them all),
# and a Go at least as new as tests/interop/gomod/go.mod's go line, with the module proxy reachable;
# for `java` and `kafka-diff`, a JDK (17+) and Maven with Maven Central reachable (or its cache).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
HERE=$ROOT/tests/interop
T_START=$(date +%s)

PASSED=0
FAILED=0
KNOWN=0
SKIPPED=0
pass() { PASSED=$((PASSED + 1)); [ -n "${INTEROP_VERBOSE:-}" ] && echo "PASS interop: $*"; return 0; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL interop: $*"; }
summary() {
  [ $((KNOWN + SKIPPED)) -gt 0 ] && echo "interop: $KNOWN known failures (missing broker features), $SKIPPED skipped"
  echo "interop: took $(($(date +%s) - T_START))s; logs in $WORK (kept on failure or with INTEROP_KEEP=1)"
  echo "interop: $PASSED passed, $FAILED failed"
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ringbroker-interop.XXXXXX")
DATA=$WORK/data
STATE=$WORK/state
mkdir -p "$DATA" "$STATE"
BPID=
PORT=
BROKER_N=0

# ---------------------------------------------------------------- prerequisites
# Each client's needs are checked when it is selected (INTEROP_ONLY), all of them without it.
selected() { [ -z "${INTEROP_ONLY:-}" ] || [[ ",$INTEROP_ONLY," == *",$1,"* ]]; }
any_selected() {
  local n
  for n in "$@"; do selected "$n" && return 0; done
  return 1
}
GO_CLIENTS=(go go-modules kgo-suite)
PY_CLIENTS=(confluent-kafka-before confluent-kafka-after kafka-python-before kafka-python-after
  groups-confluent-before groups-confluent-after groups-kafka-python-before groups-kafka-python-after
  groups-cli idempotence cluster jepsen-checker replication controller-fault partition failover-kafkajs
  failover-rskafka)
missing=
if any_selected kcat-before kcat-after; then
  command -v kcat >/dev/null 2>&1 || missing="$missing kcat"
fi
if any_selected "${PY_CLIENTS[@]}"; then
  python3 -c 'import confluent_kafka, kafka, lz4, snappy, zstandard' 2>/dev/null ||
    missing="$missing python3-modules(confluent-kafka,kafka-python,lz4,python-snappy,zstandard)"
fi
GOPATH_DEBIAN=/usr/share/gocode
if any_selected "${GO_CLIENTS[@]}"; then
  command -v go >/dev/null 2>&1 && [ -d $GOPATH_DEBIAN/src/github.com/Shopify/sarama ] &&
    [ -d $GOPATH_DEBIAN/src/github.com/segmentio/kafka-go ] ||
    missing="$missing go(golang-go,golang-github-shopify-sarama-dev,golang-github-segmentio-kafka-go-dev)"
fi
if any_selected kafkajs failover-kafkajs; then
  command -v node >/dev/null 2>&1 && [ -d "$HERE/kafkajs/node_modules/kafkajs" ] ||
    missing="$missing node-kafkajs(nodejs; npm install in tests/interop/kafkajs)"
fi
if selected java || selected kafka-diff; then
  command -v javac >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || missing="$missing java(a JDK 17+ and maven)"
fi
if [ -n "$missing" ]; then
  fail "missing prerequisites:$missing (.ci/run installs them)"
  summary
  exit 1
fi

target_dir() {
  cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}
if [ -n "${RINGBROKER_BIN:-}" ]; then
  BIN=$RINGBROKER_BIN
else
  echo "== interop: cargo build --release"
  if ! cargo build --release --bin ringbroker --quiet; then
    fail "cargo build --release"
    summary
    exit 1
  fi
  BIN=$(target_dir)/release/ringbroker
fi
[ -x "$BIN" ] || { fail "no broker binary at $BIN"; summary; exit 1; }
# The rskafka failover client (examples/rskafka_failover.rs; rskafka is a dev-dependency), a debug
# build: CI's `cargo test --examples` has built it already.
if ! selected failover-rskafka; then
  RSK_BIN=
elif [ -n "${RSKAFKA_FAILOVER_BIN:-}" ]; then
  RSK_BIN=$RSKAFKA_FAILOVER_BIN
elif cargo build --example rskafka_failover --quiet; then
  RSK_BIN=$(target_dir)/debug/examples/rskafka_failover
else
  fail "cargo build --example rskafka_failover"
  RSK_BIN=
fi
# The Go client check (tests/interop/go), against Debian's packages in GOPATH mode.
# Built only when a Go client is selected.
GO_BIN=$WORK/interop-go
GOMOD_BIN=$WORK/interop-gomod
if any_selected "${GO_CLIENTS[@]}"; then
if ! (cd "$HERE/go" && GO111MODULE=off GOPATH=$GOPATH_DEBIAN GOCACHE=$WORK/go-cache GOFLAGS= \
  go build -o "$GO_BIN" . >"$WORK/go-build.log" 2>&1); then
  fail "go build tests/interop/go: $(grep -v -e warning -e note: -e '^ ' "$WORK/go-build.log" | tail -3 | tr '\n' ' ')"
fi
# The current Go clients (tests/interop/gomod), in module mode: the versions pinned in its go.mod
# and go.sum, from the Go module proxy (the module cache is the default one, so that a rerun
# needs no download), the build cache under $WORK.
GOMOD_GO=$(sed -n 's/^go //p' "$HERE/gomod/go.mod")
GO_HAVE=$(go env GOVERSION 2>/dev/null)
GO_HAVE=${GO_HAVE#go}
gomod() { (cd "$HERE/gomod" && GO111MODULE=on GOFLAGS=-mod=readonly GOCACHE=$WORK/go-cache "$@"); }
if [ "$(printf '%s\n%s\n' "$GOMOD_GO" "${GO_HAVE:-0}" | sort -V | head -1)" != "$GOMOD_GO" ]; then
  fail "tests/interop/gomod needs Go >= $GOMOD_GO (go.mod), the go on PATH is ${GO_HAVE:-missing} (.ci/run checks this)"
elif ! gomod timeout 300 go mod download >"$WORK/gomod-download.log" 2>&1; then
  fail "go mod download in tests/interop/gomod failed: is the Go module proxy ($(go env GOPROXY)) reachable? $(tail -2 "$WORK/gomod-download.log" | tr '\n' ' ')"
elif ! gomod timeout 600 go build -o "$GOMOD_BIN" . >"$WORK/gomod-build.log" 2>&1; then
  fail "go build tests/interop/gomod: $(tail -3 "$WORK/gomod-build.log" | tr '\n' ' ')"
fi
fi # the Go clients
# The Java client (tests/interop/java, Maven: kafka-clients 4.1.1 from Maven Central, cached in
# ~/.m2 after the first build) and, for kafka-diff, Apache Kafka's jars (tests/kafka/kafka.sh
# install: target/kafka/4.1.1, also from Maven).
JAVA_OK=
if selected java || selected kafka-diff; then
  if (cd "$HERE/java" && timeout 600 mvn -q -B package) >"$WORK/java-build.log" 2>&1; then
    JAVA_CP=$HERE/java/target/classes:$(cat "$HERE/java/target/classpath.txt")
    JAVA_OK=1
  else
    fail "mvn package in tests/interop/java: is Maven Central reachable? $(grep -m3 -E 'ERROR' "$WORK/java-build.log" | tr '\n' ' ' | cut -c1-400)"
  fi
  if selected kafka-diff && ! timeout 600 bash "$ROOT/tests/kafka/kafka.sh" install >"$WORK/kafka-install.log" 2>&1; then
    fail "tests/kafka/kafka.sh install (Apache Kafka's jars from Maven Central): $(tail -3 "$WORK/kafka-install.log" | tr '\n' ' ')"
  fi
fi
# The Java client's scenarios (tests/interop/java's Main), with --bootstrap and --phase to add.
JAVA_CLIENT=(java -Xmx384m -XX:TieredStopAtLevel=1 -Dorg.slf4j.simpleLogger.defaultLogLevel=warn
  -cp "${JAVA_CP:-}" dev.ringbroker.interop.Main --prefix java --state "$STATE/java.state")
T_START=$(date +%s) # the suite's own time, without the build

# ---------------------------------------------------------------- broker properties for the group tests
# Short group timings keep the consumer-group scripts fast. Each property is passed only if this
# binary accepts it: `serve` checks its --set properties in order and exits 2 on the first bad one
# before it binds anything, so with a malformed second --set it complains about that one only if
# the first was accepted (and never starts a broker).
BROKER_SETS=()
knows_property() {
  local out
  mkdir -p "$WORK/probe"
  out=$(timeout 5 "$BIN" serve --listen 127.0.0.1:0 --data-dir "$WORK/probe" --set "$1" --set probe-end 2>&1)
  [[ $out == *probe-end* ]]
}
GROUP_SESSION_MS=6000 # Kafka's default group.min.session.timeout.ms
for prop in group.initial.rebalance.delay.ms=200 group.min.session.timeout.ms=1000; do
  if knows_property "$prop"; then
    BROKER_SETS+=(--set "$prop")
    [ "$prop" = group.min.session.timeout.ms=1000 ] && GROUP_SESSION_MS=3000
  fi
done
echo "== interop: broker properties:${BROKER_SETS[*]:- none}; group session.timeout.ms=$GROUP_SESSION_MS"

# ---------------------------------------------------------------- broker control
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

can_connect() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_broker PORT DATA_DIR LOGNAME: runs the broker in the background, sets LAST_PID; returns 0
# once it printed its "listening on" line and accepts connections (bounded: 20 s), 1 if it
# exited or never got there. READY_AT_LINE=1 if a connection made right when the line appeared
# was accepted (the line is the readiness signal scripts wait for).
start_broker() {
  local port=$1 dir=$2 log=$WORK/$3 i
  # No metrics endpoint: the default port (9644) is one per machine, and another broker there
  # (a second suite, a developer's broker) would make this one refuse to start.
  "$BIN" serve --listen "127.0.0.1:$port" --data-dir "$dir" --shards 2 ${BROKER_SETS[@]+"${BROKER_SETS[@]}"} \
    --set ringbroker.metrics.listen=none >"$log.out" 2>"$log.err" &
  LAST_PID=$!
  READY_AT_LINE=0
  for i in $(seq 1 1000); do
    if grep -q "listening on" "$log.out" 2>/dev/null; then
      can_connect "$port" && READY_AT_LINE=1
      for i in $(seq 1 1000); do
        can_connect "$port" && return 0
        kill -0 "$LAST_PID" 2>/dev/null || return 1
        sleep 0.02
      done
      return 1
    fi
    kill -0 "$LAST_PID" 2>/dev/null || return 1
    sleep 0.02
  done
  return 1
}

# wait_exit PID SECONDS: waits for the process to end, sets EXIT_RC; 1 on timeout.
wait_exit() {
  local pid=$1 i
  for i in $(seq 1 $(($2 * 10))); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null
      EXIT_RC=$?
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# stop_broker WHAT: SIGTERM, then the exit code must be 0 within 20 s.
stop_broker() {
  [ -n "$BPID" ] || return 0
  kill -TERM "$BPID" 2>/dev/null
  if wait_exit "$BPID" 20; then
    if [ "$EXIT_RC" = 0 ]; then pass "$1: SIGTERM -> exit 0"; else fail "$1: SIGTERM -> exit code $EXIT_RC"; fi
  else
    fail "$1: still running 20 s after SIGTERM (killed)"
    kill -KILL "$BPID" 2>/dev/null
    wait "$BPID" 2>/dev/null
  fi
  BPID=
}

check_ready_at_line() {
  if [ "$READY_AT_LINE" = 1 ]; then
    pass "$1: connections accepted as soon as 'listening on' is printed"
  else
    fail "$1: connection refused right after the broker printed 'listening on' (the line comes before the shards bind)"
  fi
}

start_main_broker() {
  BROKER_N=$((BROKER_N + 1))
  local tries
  for tries in 1 2 3; do
    [ -n "$PORT" ] || PORT=$(free_port)
    if start_broker "$PORT" "$DATA" "broker$BROKER_N"; then
      BPID=$LAST_PID
      pass "$1: broker listening on 127.0.0.1:$PORT"
      check_ready_at_line "$1"
      return 0
    fi
    kill -KILL "$LAST_PID" 2>/dev/null
    wait "$LAST_PID" 2>/dev/null
    echo "interop: broker did not start on port $PORT (try $tries):"
    tail -5 "$WORK/broker$BROKER_N.err"
    PORT= # the port may have been taken meanwhile: pick another
  done
  fail "$1: broker did not start (see $WORK/broker$BROKER_N.err)"
  return 1
}

cleanup() {
  if [ -n "$BPID" ] && kill -0 "$BPID" 2>/dev/null; then
    kill -TERM "$BPID" 2>/dev/null
    wait_exit "$BPID" 20 || { kill -KILL "$BPID" 2>/dev/null; wait "$BPID" 2>/dev/null; }
  fi
  if [ "$FAILED" -eq 0 ] && [ -z "${INTEROP_KEEP:-}" ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'echo "interop: interrupted"; exit 130' INT TERM

# run_client NAME TIMEOUT CMD...: runs a client script, echoes its non-PASS lines, counts its
# PASS/FAIL/SKIP/KNOWN-FAIL lines. A script that fails without a FAIL line counts as one failure.
# NAME:PHASE (java:before) is selected by NAME and logged as NAME-PHASE.
run_client() {
  local name=${1/:/-} limit=$2 log=$WORK/${1/:/-}.log rc t0=$SECONDS
  selected "${1%%:*}" || return 0
  shift 2
  echo "== interop: $name"
  timeout "$limit" "$@" >"$log" 2>&1
  rc=$?
  if [ -n "${INTEROP_VERBOSE:-}" ]; then
    grep -E '^(PASS|FAIL|SKIP|KNOWN-FAIL|==) ' "$log"
  else
    grep -E '^(FAIL|SKIP|KNOWN-FAIL|==) ' "$log"
  fi
  echo "== interop: $name took $((SECONDS - t0))s"
  local p f
  p=$(grep -c '^PASS ' "$log")
  f=$(grep -c '^FAIL ' "$log")
  PASSED=$((PASSED + p))
  FAILED=$((FAILED + f))
  SKIPPED=$((SKIPPED + $(grep -c '^SKIP ' "$log")))
  KNOWN=$((KNOWN + $(grep -c '^KNOWN-FAIL ' "$log")))
  if [ $rc -eq 124 ]; then
    fail "$name: timed out after ${limit}s (log: $log)"
    tail -5 "$log"
  elif [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
    fail "$name: exited $rc without a FAIL line (log: $log)"
    tail -15 "$log"
  fi
}

check_no_panic() {
  local f
  for f in "$WORK"/broker*.err; do
    if grep -qiE 'panicked|RUST_BACKTRACE' "$f"; then
      fail "broker log $(basename "$f") has a panic: $(grep -iE -m1 -A2 'panicked' "$f" | tr '\n' ' ' | head -c 400)"
    else
      pass "broker log $(basename "$f"): no panic"
    fi
  done
}

# ---------------------------------------------------------------- the suite
echo "== interop: broker $BIN, data $DATA"
start_main_broker "start" || { summary; exit 1; }
B=127.0.0.1:$PORT

# A second broker on the same data dir, or on the same port, must be refused.
other_port=$(free_port)
if start_broker "$other_port" "$DATA" second-same-dir; then
  fail "second broker on the same data dir was not refused"
  kill -TERM "$LAST_PID"; wait_exit "$LAST_PID" 20 || kill -KILL "$LAST_PID"
elif wait_exit "$LAST_PID" 10 && [ "$EXIT_RC" != 0 ]; then
  if grep -qiE 'data dir.*(in use|lock)' "$WORK/second-same-dir.err"; then
    pass "second broker on the same data dir refused (exit $EXIT_RC, says the dir is in use)"
  else
    fail "second broker on the same data dir: exit $EXIT_RC but no 'in use' message: $(tail -2 "$WORK/second-same-dir.err")"
  fi
else
  fail "second broker on the same data dir: neither listening nor exited non-zero"
  kill -KILL "$LAST_PID" 2>/dev/null
fi
mkdir -p "$WORK/other-data"
if start_broker "$PORT" "$WORK/other-data" second-same-port; then
  fail "second broker on the same port was not refused"
  kill -TERM "$LAST_PID"; wait_exit "$LAST_PID" 20 || kill -KILL "$LAST_PID"
elif wait_exit "$LAST_PID" 10 && [ "$EXIT_RC" != 0 ]; then
  if grep -qiE 'listen.*in use' "$WORK/second-same-port.err"; then
    pass "second broker on the same port refused (exit $EXIT_RC, says the address is in use)"
  else
    fail "second broker on the same port: exit $EXIT_RC but no 'in use' message: $(tail -2 "$WORK/second-same-port.err")"
  fi
else
  fail "second broker on the same port: neither listening nor exited non-zero"
  kill -KILL "$LAST_PID" 2>/dev/null
fi
if python3 -c "import sys; sys.path.insert(0, '$HERE'); import common; common.api_versions('$B', 5)" 2>/dev/null; then
  pass "first broker still answers after the refused starts"
else
  fail "first broker stopped answering after the refused starts"
fi

run_client kcat-before 90 bash "$HERE/kcat.sh" "$B" before "$STATE"
run_client confluent-kafka-before 120 python3 "$HERE/confluent_kafka_test.py" --bootstrap "$B" --phase before --state "$STATE/confluent.json"
[ -n "$JAVA_OK" ] && run_client java:before 120 "${JAVA_CLIENT[@]}" --bootstrap "$B" --phase before \
  --session-timeout-ms "$GROUP_SESSION_MS"
run_client kafka-python-before 120 python3 "$HERE/kafka_python_test.py" --bootstrap "$B" --phase before --state "$STATE/kafka_python.json"
# Sarama 1.22 and kafka-go 0.2.1: the oldest request versions (Fetch v2/v3, CreateTopics v0/v1,
# DescribeConfigs v0, OffsetCommit v1), every codec, a consumer group with its commits checked.
[ -x "$GO_BIN" ] && run_client go 120 "$GO_BIN" -bootstrap "$B" -prefix go -timeout 30s
# Sarama 1.61 (protocol 4.0), kafka-go 0.4.51, franz-go 1.22 + kadm: every codec read back
# exactly (franz-go checks each batch's codec, the other clients' too), a consumer group that
# commits, leaves and resumes at the commit, idempotent producers, kadm's admin calls.
[ -x "$GOMOD_BIN" ] && run_client go-modules 180 "$GOMOD_BIN" -bootstrap "$B" -prefix gomod -timeout 30s
# kafkajs 2: gzip and uncompressed produce, a committing consumer group checked with
# fetchOffsets, list/describe topics and configs, delete.
run_client kafkajs 120 node "$HERE/kafkajs/kafkajs_test.js" --bootstrap "$B" --prefix kafkajs --timeout-ms 30000
# Consumer groups (fail fast with FAIL lines while the broker does not advertise the group APIs).
run_client groups-confluent-before 150 python3 "$HERE/groups_confluent.py" --bootstrap "$B" --phase before \
  --state "$STATE/groups_confluent.json" --session-timeout-ms "$GROUP_SESSION_MS"
run_client groups-kafka-python-before 120 python3 "$HERE/groups_kafka_python.py" --bootstrap "$B" --phase before \
  --state "$STATE/groups_kafka_python.json" --session-timeout-ms "$GROUP_SESSION_MS"

# Restart on the same port and data dir while a client still holds an (idle) connection, as
# clients that reconnect in a loop do: the new broker must be able to bind the port again.
echo "== interop: restarting the broker"
exec 7<>"/dev/tcp/127.0.0.1/$PORT" || fail "could not open a connection to hold across the restart"
stop_broker "restart"
BROKER_N=$((BROKER_N + 1))
if start_broker "$PORT" "$DATA" "broker$BROKER_N"; then
  BPID=$LAST_PID
  pass "restart on the same port while a client connection was still open"
  check_ready_at_line "restart"
  exec 7>&-
else
  fail "restart on the same port while a client connection was still open: $(grep -m1 -i error "$WORK/broker$BROKER_N.err")"
  kill -KILL "$LAST_PID" 2>/dev/null
  wait "$LAST_PID" 2>/dev/null
  exec 7>&-
  PORT= # go on with the rest of the suite on another port
  start_main_broker "restart (other port)" || { summary; exit 1; }
fi
B=127.0.0.1:$PORT

run_client kcat-after 60 bash "$HERE/kcat.sh" "$B" after "$STATE"
run_client confluent-kafka-after 90 python3 "$HERE/confluent_kafka_test.py" --bootstrap "$B" --phase after --state "$STATE/confluent.json"
[ -n "$JAVA_OK" ] && run_client java:after 90 "${JAVA_CLIENT[@]}" --bootstrap "$B" --phase after \
  --session-timeout-ms "$GROUP_SESSION_MS"
run_client kafka-python-after 90 python3 "$HERE/kafka_python_test.py" --bootstrap "$B" --phase after --state "$STATE/kafka_python.json"
run_client groups-confluent-after 90 python3 "$HERE/groups_confluent.py" --bootstrap "$B" --phase after \
  --state "$STATE/groups_confluent.json" --session-timeout-ms "$GROUP_SESSION_MS"
run_client groups-kafka-python-after 90 python3 "$HERE/groups_kafka_python.py" --bootstrap "$B" --phase after \
  --state "$STATE/groups_kafka_python.json" --session-timeout-ms "$GROUP_SESSION_MS"
# `ringbroker consume --group` sharing a group with a confluent-kafka consumer (either leads).
run_client groups-cli 150 python3 "$HERE/groups_cli.py" --bootstrap "$B" --bin "$BIN" \
  --session-timeout-ms "$GROUP_SESSION_MS"

stop_broker "final stop"

# The differential test against Apache Kafka: Kafka (one node, target/kafka/4.1.1) and a broker of
# its own ($WORK/kafka-diff, logs $WORK/broker-kafka-diff.*), the Java scenarios and Kafka's CLI
# classes against both, the answers compared (tests/interop/kafka_diff.py's allowlist); 40-70 s.
[ -n "$JAVA_OK" ] && run_client kafka-diff 420 python3 "$HERE/kafka_diff.py" --bin "$BIN" --work "$WORK"

# Idempotent producers through a connection-cutting proxy, with broker restarts: the script starts
# and stops its own broker (data in $WORK/idem-data, logs $WORK/broker-idem-N.*, checked below).
run_client idempotence 300 python3 "$HERE/idempotence_test.py" --bin "$BIN" --work "$WORK"
# Cluster mode: 3 voters + 1 broker-only node of its own (data $WORK/cluster-N, logs
# $WORK/broker-cluster-N-*.{out,err}): topics through any node, produce/consume, groups,
# kill -9 of the active controller, a dead broker's partitions leaderless until its restart.
run_client cluster 240 python3 "$HERE/cluster_test.py" --bin "$BIN" --work "$WORK"
# The Jepsen-style checker's own synthetic histories (pure, a second): every anomaly is detected.
run_client jepsen-checker 30 python3 "$HERE/jepsen_checker.py" --self-test
# Replication under faults: 3 brokers of its own (data $WORK/repl-N, logs $WORK/broker-repl-N-*),
# RF 3 / min.insync.replicas=2, idempotent acks=all producers, kill -9 / SIGSTOP / cut links, the
# checker over the history. RINGBROKER_REPLICATION_SOAK_SECS=N makes its fault loop N seconds
# long instead of 100.
run_client replication $((${RINGBROKER_REPLICATION_SOAK_SECS:-0} + 420)) \
  python3 "$HERE/replication_test.py" --bin "$BIN" --work "$WORK"
# Faults of the active controller (kill -9 / SIGSTOP, found with `ringbroker cluster status`): during
# ISR changes (a follower killed too), producer-id allocation (short-lived idempotent producers,
# each producer id's batches checked in the dumped logs) and CreateTopics; 3 nodes of its own (data
# $WORK/ctrl-N, logs $WORK/broker-ctrl-N-*, $WORK/controller-fault-clients.log).
# RINGBROKER_CONTROLLER_FAULT_ROUNDS=N runs N rounds of each phase instead of 4 (about 2 minutes).
run_client controller-fault $((${RINGBROKER_CONTROLLER_FAULT_ROUNDS:-4} * 60 + 180)) \
  python3 "$HERE/controller_fault_test.py" --bin "$BIN" --work "$WORK"
# Network partitions between brokers: 3 brokers of its own, each in a network namespace of its own
# (a hub namespace with a bridge for the clients), faults as nftables rules in a broker's namespace:
# a leader cut from its followers' replication, or from the controller quorum, a broker isolated,
# a flapping link, packet loss; the checker over the history (data $WORK/part-N, logs
# $WORK/broker-part-N-*). Needs root, ip (iproute2) and nft (nftables): a SKIP line otherwise.
# RINGBROKER_PARTITION_SOAK_SECS=N repeats the faults for N seconds.
run_client partition $((${RINGBROKER_PARTITION_SOAK_SECS:-0} + 300)) \
  python3 "$HERE/partition_test.py" --bin "$BIN" --work "$WORK"
# The same cluster and checker with kafkajs (tests/interop/kafkajs/failover.js: idempotent producers)
# and rskafka (examples/rskafka_failover.rs: no idempotence, retried by the program) as the client:
# 4 kill -9s of a partition leader each; the client must fail over by itself (data
# $WORK/repl-<client>-N, logs $WORK/broker-repl-<client>-*, $WORK/replication-<client>-client.err).
run_client failover-kafkajs 300 python3 "$HERE/replication_test.py" --bin "$BIN" --work "$WORK" --client kafkajs
[ -n "$RSK_BIN" ] && run_client failover-rskafka 300 \
  python3 "$HERE/replication_test.py" --bin "$BIN" --work "$WORK" --client rskafka --client-bin "$RSK_BIN"
# franz-go's own kgo tests, a broker of its own (logs and data in $WORK/kgo, checked for panics there).
if [ "${RINGBROKER_KGO_SUITE:-1}" != 0 ]; then
  run_client kgo-suite 720 env KGO_WORK="$WORK/kgo" RINGBROKER_BIN="$BIN" GOCACHE="$WORK/go-cache" \
    KGO_TIMEOUT=600 bash "$HERE/kgo_suite.sh"
fi
check_no_panic
summary
[ "$FAILED" -eq 0 ]
