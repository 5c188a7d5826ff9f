#!/usr/bin/env bash
# Apache Kafka beside ringbroker: the reference for behaviour (differential tests) and for
# performance (benches/compare). Resolved from Maven Central, cached under target/kafka/, run
# with `java -cp` in KRaft combined mode (every node is broker and controller), loopback only.
#
#   bash tests/kafka/kafka.sh install            # resolve the jars; prints KAFKA_HOME
#   bash tests/kafka/kafka.sh start DIR [--nodes N] [--heap 1G] [key=value ...]
#                                                # prints the bootstrap servers
#   bash tests/kafka/kafka.sh stop DIR           # SIGTERM, then SIGKILL after 30 s
#   bash tests/kafka/kafka.sh tool kafka-topics --bootstrap-server ... --list
#
# KAFKA_HOME (target/kafka/<version>) holds libs/ (every jar, Kafka's own `libs/`), config/
# (log4j2.yaml) and bin/ with Kafka's script names (kafka-topics.sh, kafka-configs.sh,
# kafka-run-class.sh, ...) as thin wrappers, so tools that expect a Kafka distribution
# (librdkafka's KAFKA_PATH tests) find one. Kafka's release tarball is not on Maven Central; the
# jars are the same ones it ships.
#
# Env: KAFKA_VERSION (4.1.1, the version the project measured against first), KAFKA_JAVA_OPTS
# (extra JVM flags), JAVA (java). The JVM is started as Kafka's kafka-server-start.sh starts it:
# G1, -Xmx/-Xms from --heap (Kafka's default 1G), MaxGCPauseMillis=20.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
JAVA="${JAVA:-java}"
home="$repo/target/kafka/$KAFKA_VERSION"

log() { printf '[kafka %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }

# Kafka's script names and the classes they run (kafka-run-class.sh takes any class).
declare -A TOOLS=(
  [kafka-topics]=org.apache.kafka.tools.TopicCommand
  [kafka-configs]=kafka.admin.ConfigCommand
  [kafka-consumer-groups]=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
  [kafka-get-offsets]=org.apache.kafka.tools.GetOffsetShell
  [kafka-log-dirs]=org.apache.kafka.tools.LogDirsCommand
  [kafka-delete-records]=org.apache.kafka.tools.DeleteRecordsCommand
  [kafka-console-producer]=org.apache.kafka.tools.ConsoleProducer
  [kafka-console-consumer]=org.apache.kafka.tools.consumer.ConsoleConsumer
  [kafka-producer-perf-test]=org.apache.kafka.tools.ProducerPerformance
  [kafka-consumer-perf-test]=org.apache.kafka.tools.ConsumerPerformance
  [kafka-e2e-latency]=org.apache.kafka.tools.EndToEndLatency
  [kafka-acls]=org.apache.kafka.tools.AclCommand
  [kafka-leader-election]=org.apache.kafka.tools.LeaderElectionCommand
  [kafka-reassign-partitions]=org.apache.kafka.tools.reassign.ReassignPartitionsCommand
  [kafka-features]=org.apache.kafka.tools.FeatureCommand
  [kafka-metadata-quorum]=org.apache.kafka.tools.MetadataQuorumCommand
  [kafka-transactions]=org.apache.kafka.tools.TransactionsCommand
  [kafka-broker-api-versions]=org.apache.kafka.tools.BrokerApiVersionsCommand
  [kafka-storage]=kafka.tools.StorageTool
  [kafka-server-start]=kafka.Kafka
)

install() {
  if [[ -f "$home/.complete" ]]; then write_bin; echo "$home"; return; fi
  command -v mvn >/dev/null || die "mvn is not installed"
  mkdir -p "$home/config" "$home/bin"
  cat > "$home/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.ringbroker</groupId>
  <artifactId>kafka-reference</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.24.3</version></dependency>
  </dependencies>
</project>
EOF
  log "resolving Apache Kafka $KAFKA_VERSION from Maven"
  rm -rf "$home/libs"
  (cd "$home" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$home/libs") >&2 \
    || die "mvn could not resolve org.apache.kafka:kafka_2.13:$KAFKA_VERSION"
  cat > "$home/config/log4j2.yaml" <<'EOF'
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
EOF
  write_bin
  touch "$home/.complete"
  echo "$home"
}

# bin/: kafka-run-class.sh and a script per TOOLS entry, rewritten at every install (cheap), so
# that a cached install gets the scripts of today's TOOLS table. As Kafka's kafka-run-class.sh,
# $CLASSPATH goes before Kafka's jars (librdkafka's tests/java/run-class.sh sets it).
write_bin() {
  mkdir -p "$home/bin"
  # Each written beside and renamed over the old one: a tool starting meanwhile reads either whole.
  cat > "$home/bin/kafka-run-class.sh.tmp" <<EOF
#!/usr/bin/env bash
exec "\${JAVA:-java}" \${KAFKA_HEAP_OPTS:--Xmx512M} \${KAFKA_OPTS:-} \\
  -Dlog4j2.configurationFile="$home/config/log4j2.yaml" -cp "\${CLASSPATH:+\$CLASSPATH:}$home/libs/*" "\$@"
EOF
  local name
  for name in "${!TOOLS[@]}"; do
    printf '#!/usr/bin/env bash\nexec "%s/bin/kafka-run-class.sh" %s "$@"\n' \
      "$home" "${TOOLS[$name]}" > "$home/bin/$name.sh.tmp"
  done
  chmod +x "$home"/bin/*.sh.tmp
  for name in "$home"/bin/*.sh.tmp; do mv -f "$name" "${name%.tmp}"; done
}

free_ports() { # $1 count: distinct free loopback ports
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

wait_port() { # $1 port, $2 pid, $3 seconds
  local i
  for i in $(seq 1 $(($3 * 10))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

start() {
  local dir="" nodes=1 heap=1G extra=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --nodes) nodes="$2"; shift 2 ;;
      --heap) heap="$2"; shift 2 ;;
      *=*) extra+=("$1"); shift ;;
      *) [[ -z "$dir" ]] || die "unexpected argument $1"; dir="$1"; shift ;;
    esac
  done
  [[ -n "$dir" ]] || die "start needs a directory"
  install >/dev/null
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  [[ ! -e "$dir/node-1/pid" ]] || die "$dir already holds a started cluster (stop it first)"
  local ports=($(free_ports $((2 * nodes)))) voters="" bootstrap="" i rf=$((nodes < 3 ? nodes : 3))
  for i in $(seq 1 "$nodes"); do
    voters+="${voters:+,}$i@127.0.0.1:${ports[$((2 * i - 1))]}"
    bootstrap+="${bootstrap:+,}127.0.0.1:${ports[$((2 * i - 2))]}"
  done
  local cluster_id
  cluster_id="$("$home/bin/kafka-storage.sh" random-uuid 2>/dev/null)"
  for i in $(seq 1 "$nodes"); do
    local nd="$dir/node-$i" port="${ports[$((2 * i - 2))]}" cport="${ports[$((2 * i - 1))]}"
    mkdir -p "$nd"
    {
      echo "process.roles=broker,controller"
      echo "node.id=$i"
      echo "controller.quorum.voters=$voters"
      echo "listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
      echo "advertised.listeners=PLAINTEXT://127.0.0.1:$port"
      echo "controller.listener.names=CONTROLLER"
      echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
      echo "inter.broker.listener.name=PLAINTEXT"
      echo "log.dirs=$nd/data"
      echo "offsets.topic.replication.factor=$rf"
      echo "transaction.state.log.replication.factor=$rf"
      echo "transaction.state.log.min.isr=$((rf < 2 ? 1 : 2))"
      echo "group.initial.rebalance.delay.ms=0"
      local kv
      for kv in "${extra[@]}"; do echo "$kv"; done
    } > "$nd/server.properties"
    "$home/bin/kafka-storage.sh" format -t "$cluster_id" -c "$nd/server.properties" \
      > "$nd/format.log" 2>&1 || { cat "$nd/format.log" >&2; die "format of node $i failed"; }
  done
  for i in $(seq 1 "$nodes"); do
    local nd="$dir/node-$i"
    # As kafka-server-start.sh: G1 with Kafka's pause target, the heap given.
    KAFKA_HEAP_OPTS="-Xmx$heap -Xms$heap" \
      KAFKA_OPTS="-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true ${KAFKA_JAVA_OPTS:-}" \
      setsid "$home/bin/kafka-server-start.sh" "$nd/server.properties" > "$nd/kafka.log" 2>&1 &
    echo $! > "$nd/pid"
  done
  for i in $(seq 1 "$nodes"); do
    local nd="$dir/node-$i"
    wait_port "${ports[$((2 * i - 2))]}" "$(cat "$nd/pid")" 120 \
      || { tail -20 "$nd/kafka.log" >&2; stop "$dir"; die "node $i did not start"; }
  done
  # The listener opens before the broker has caught up with the metadata log: wait until it
  # answers a metadata request naming every broker.
  local t
  for t in $(seq 1 120); do
    local n
    n="$("$home/bin/kafka-broker-api-versions.sh" --bootstrap-server "$bootstrap" 2>/dev/null \
      | grep -c '^127.0.0.1:' || true)"
    [[ "$n" -ge "$nodes" ]] && break
    [[ $t -lt 120 ]] || { stop "$dir"; die "the cluster did not list $nodes brokers"; }
    sleep 0.5
  done
  echo "$bootstrap" > "$dir/bootstrap"
  echo "$bootstrap"
}

stop() {
  local dir="$1" nd pid
  for nd in "$dir"/node-*; do
    [[ -f "$nd/pid" ]] || continue
    pid="$(cat "$nd/pid")"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  done
  for nd in "$dir"/node-*; do
    [[ -f "$nd/pid" ]] || continue
    pid="$(cat "$nd/pid")"
    local i
    for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    rm -f "$nd/pid"
  done
}

cmd="${1:-}"
shift || true
case "$cmd" in
  install) install ;;
  start) start "$@" ;;
  stop) [[ $# -eq 1 ]] || die "stop DIR"; stop "$1" ;;
  tool)
    [[ $# -ge 1 ]] || die "tool NAME [args]"
    install >/dev/null
    name="${1%.sh}"; shift
    [[ -n "${TOOLS[$name]:-}" ]] || die "unknown tool $name (known: ${!TOOLS[*]})"
    exec "$home/bin/$name.sh" "$@"
    ;;
  *) die "usage: kafka.sh install | start DIR [--nodes N] [--heap 1G] [k=v ...] | stop DIR | tool NAME [args]" ;;
esac
