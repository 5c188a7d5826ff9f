package dev.ringbroker.interop;

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.DescribeProducersResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * kafka-clients (the Java client) against a broker, in scripted scenarios.
 *
 * <pre>
 *   java -cp ... dev.ringbroker.interop.Main --bootstrap HOST:PORT --phase before|after|all
 *        [--prefix java] [--record FILE] [--session-timeout-ms 6000]
 * </pre>
 *
 * <p>{@code before} creates and writes everything (every codec, a consumer group of two members
 * through a rebalance, an idempotent producer) and runs the admin scenarios (topics, configs of a
 * topic and of the broker, groups, DeleteRecords, ListOffsets); {@code after} (the broker
 * restarted on the same data dir) reads back what {@code before} wrote: the same records, the
 * group's committed offsets, the idempotent producer's records and state. {@code all} is both
 * without a restart (the differential test, tests/interop/kafka_diff.py). Prints PASS/FAIL lines
 * (the checks expect what Apache Kafka 4.1 answers) and, with --record, writes every answer
 * normalized (no topic ids, node ids, ports, producer ids or wall-clock timestamps) as sorted
 * {@code key=value} lines, which kafka_diff.py compares between ringbroker and Kafka.
 */
public final class Main {
  static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
  /** Base of the records' timestamps: a minute before the `before` phase (a fixed date would be
   * past retention.ms), kept in the state file for `after`; recorded relative to it. */
  static long T0;
  static final Duration POLL = Duration.ofMillis(100);

  final String bootstrap;
  final String prefix;
  final int sessionTimeoutMs;
  final Map<String, String> record = new TreeMap<>();
  int passed;
  int failed;
  Admin admin;

  Main(String bootstrap, String prefix, int sessionTimeoutMs) {
    this.bootstrap = bootstrap;
    this.prefix = prefix;
    this.sessionTimeoutMs = sessionTimeoutMs;
  }

  public static void main(String[] args) throws Exception {
    Map<String, String> opt = new HashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      opt.put(args[i].replaceFirst("^--", ""), args[i + 1]);
    }
    String bootstrap = opt.get("bootstrap");
    String phase = opt.getOrDefault("phase", "all");
    if (bootstrap == null || !Set.of("before", "after", "all").contains(phase)) {
      System.err.println("usage: Main --bootstrap HOST:PORT --phase before|after|all [--prefix P] [--record FILE]");
      System.exit(2);
    }
    Path state = Path.of(opt.getOrDefault("state", "java-interop.state"));
    if (phase.equals("after")) {
      T0 = Long.parseLong(Files.readString(state).trim());
    } else {
      T0 = (System.currentTimeMillis() / 1000 - 60) * 1000;
      Files.writeString(state, T0 + "\n");
    }
    Main m = new Main(bootstrap, opt.getOrDefault("prefix", "java"),
        Integer.parseInt(opt.getOrDefault("session-timeout-ms", "6000")));
    long t0 = System.nanoTime();
    try (Admin a = Admin.create(m.adminProps())) {
      m.admin = a;
      if (!phase.equals("after")) {
        m.scenario("codecs-write", m::codecsWrite);
        m.scenario("codecs-read", m::codecsRead);
        m.scenario("group", m::groupBefore);
        m.scenario("idempotence", m::idempotenceWrite);
        m.scenario("idempotence-read", m::idempotenceRead);
        m.scenario("admin-topics", m::adminTopics);
        m.scenario("admin-configs", m::adminConfigs);
        m.scenario("admin-broker-configs", m::adminBrokerConfigs);
        m.scenario("admin-groups", m::adminGroups);
        m.scenario("delete-records", m::deleteRecords);
        m.scenario("list-offsets", m::listOffsetsWrite);
      }
      if (!phase.equals("before")) {
        m.scenario("after-codecs-read", m::codecsRead);
        m.scenario("after-group", m::groupAfter);
        m.scenario("after-idempotence-read", m::idempotenceRead);
        m.scenario("after-list-offsets", m::listOffsetsRead);
      }
    }
    if (opt.containsKey("record")) {
      try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(Path.of(opt.get("record")), StandardCharsets.UTF_8))) {
        for (var e : m.record.entrySet()) {
          w.println(e.getKey() + "=" + e.getValue());
        }
      }
    }
    System.out.printf("== java %s: %d passed, %d failed in %.1fs%n", phase, m.passed, m.failed,
        (System.nanoTime() - t0) / 1e9);
    System.out.flush();
    System.exit(m.failed == 0 ? 0 : 1);
  }

  // ------------------------------------------------------------------ reporting

  interface Body {
    void run() throws Exception;
  }

  void scenario(String name, Body body) {
    try {
      body.run();
    } catch (Throwable e) {
      fail(name + ": unexpected " + describe(e));
      rec(name + ".unexpected", errName(e));
      e.printStackTrace(System.out);
    }
  }

  void pass(String what) {
    passed++;
    System.out.println("PASS java: " + what);
  }

  void fail(String what) {
    failed++;
    System.out.println("FAIL java: " + what);
  }

  void check(boolean ok, String what) {
    if (ok) pass(what); else fail(what);
  }

  <T> void checkEq(T want, T got, String what) {
    if (java.util.Objects.equals(want, got)) pass(what + " = " + got);
    else fail(what + ": want " + want + ", got " + got);
  }

  void rec(String key, Object value) {
    record.put(key, String.valueOf(value));
  }

  static Throwable cause(Throwable e) {
    while ((e instanceof ExecutionException || e instanceof java.util.concurrent.CompletionException)
        && e.getCause() != null) {
      e = e.getCause();
    }
    return e;
  }

  /** The answer of a call that may fail: "ok" or the exception's class (Kafka's error code). */
  static String errName(Throwable e) {
    return cause(e).getClass().getSimpleName();
  }

  static String describe(Throwable e) {
    Throwable c = cause(e);
    return c.getClass().getSimpleName() + ": " + c.getMessage();
  }

  interface Call<T> {
    T get() throws Exception;
  }

  /** Runs a call, records "ok" or its error under key; returns the value or null. */
  <T> T outcome(String key, Call<T> call) {
    try {
      T v = call.get();
      rec(key, "ok");
      return v;
    } catch (Exception e) {
      rec(key, errName(e));
      return null;
    }
  }

  /** Expects the call to fail with the given exception class (simple name). */
  void expectError(String key, String want, Call<?> call) {
    expectError(key, want, null, call);
  }

  /** As above; a different answer is a KNOWN-FAIL (a known difference from Kafka) if `known` is set. */
  void expectError(String key, String want, String known, Call<?> call) {
    String got;
    try {
      call.get();
      got = "ok";
    } catch (Exception e) {
      got = errName(e);
    }
    rec(key, got);
    if (known != null && !want.equals(got)) {
      System.out.println("KNOWN-FAIL java: " + key + ": Kafka answers " + want + ", this broker " + got + ": " + known);
      return;
    }
    checkEq(want, got, key);
  }

  // ------------------------------------------------------------------ clients

  Properties adminProps() {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.CLIENT_ID_CONFIG, prefix + "-admin");
    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
    return p;
  }

  KafkaProducer<String, String> producer(Map<String, Object> extra) {
    Map<String, Object> p = new HashMap<>();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.CLIENT_ID_CONFIG, prefix + "-producer");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, 20);
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
    p.putAll(extra);
    return new KafkaProducer<>(p);
  }

  KafkaConsumer<String, String> consumer(String group, String clientId) {
    Map<String, Object> p = new HashMap<>();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 100);
    p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
    if (group != null) {
      p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
      p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionTimeoutMs);
      p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Math.max(300, sessionTimeoutMs / 6));
      p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 30000);
    }
    return new KafkaConsumer<>(p);
  }

  void createTopic(String name, int partitions, Map<String, String> configs) throws Exception {
    NewTopic t = new NewTopic(name, partitions, (short) 1);
    if (configs != null) t.configs(configs);
    admin.createTopics(List.of(t)).all().get(30, TimeUnit.SECONDS);
    waitForTopic(name, partitions);
  }

  /** Kafka's metadata reaches its brokers a moment after CreateTopics answers: wait (bounded). */
  void waitForTopic(String name, int partitions) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    while (true) {
      try {
        TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames().get(10, TimeUnit.SECONDS).get(name);
        if (d.partitions().size() == partitions && d.partitions().stream().allMatch(p -> p.leader() != null)) return;
      } catch (ExecutionException e) {
        if (System.nanoTime() > deadline) throw e;
      }
      if (System.nanoTime() > deadline) throw new IllegalStateException("topic " + name + " never showed " + partitions + " led partitions");
      Thread.sleep(50);
    }
  }

  record Rec(int partition, long offset, String key, String value, long timestamp, String headers) {}

  /** Reads [start, end) of each partition with assign() (no group). */
  List<Rec> readAll(String topic, int partitions) throws Exception {
    List<Rec> out = new ArrayList<>();
    try (KafkaConsumer<String, String> c = consumer(null, prefix + "-reader")) {
      List<TopicPartition> tps = new ArrayList<>();
      for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
      Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(15));
      c.assign(tps);
      c.seekToBeginning(tps);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (System.nanoTime() < deadline) {
        boolean done = true;
        for (TopicPartition tp : tps) if (c.position(tp, Duration.ofSeconds(15)) < end.get(tp)) done = false;
        if (done) break;
        for (ConsumerRecord<String, String> r : c.poll(POLL)) {
          StringBuilder h = new StringBuilder();
          for (Header x : r.headers()) h.append(x.key()).append(':').append(new String(x.value(), StandardCharsets.UTF_8)).append(';');
          out.add(new Rec(r.partition(), r.offset(), r.key(), r.value(), r.timestamp(), h.toString()));
        }
      }
    }
    return out;
  }

  // ------------------------------------------------------------------ codecs

  String codecTopic(String codec) {
    return prefix + "-codec-" + codec;
  }

  void codecsWrite() throws Exception {
    for (String codec : CODECS) {
      String topic = codecTopic(codec);
      createTopic(topic, 1, null);
      List<Long> offsets = new ArrayList<>();
      try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
          ProducerConfig.LINGER_MS_CONFIG, 100))) {
        List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
          ProducerRecord<String, String> r = new ProducerRecord<>(topic, 0, T0 + i, "k" + i,
              codec + "-value-" + i + "-" + "x".repeat(50));
          r.headers().add("h", String.valueOf(i).getBytes(StandardCharsets.UTF_8));
          fs.add(p.send(r));
        }
        for (var f : fs) offsets.add(f.get(30, TimeUnit.SECONDS).offset());
      }
      List<Long> want = new ArrayList<>();
      for (long i = 0; i < 20; i++) want.add(i);
      checkEq(want, offsets, "produce " + codec + ": offsets");
      rec("codec." + codec + ".produced_offsets", offsets);
    }
  }

  void codecsRead() throws Exception {
    for (String codec : CODECS) {
      List<Rec> got = readAll(codecTopic(codec), 1);
      boolean ok = got.size() == 20;
      for (int i = 0; ok && i < 20; i++) {
        Rec r = got.get(i);
        ok = r.offset() == i && r.key().equals("k" + i) && r.timestamp() == T0 + i
            && r.value().equals(codec + "-value-" + i + "-" + "x".repeat(50)) && r.headers().equals("h:" + i + ";");
      }
      check(ok, "consume " + codec + ": 20 records back with offset, key, value, timestamp, header (" + got.size() + " read)");
      rec("codec." + codec + ".consumed", got.size() + " records, intact=" + ok);
    }
  }

  // ------------------------------------------------------------------ consumer group

  String groupTopic() {
    return prefix + "-group";
  }

  String groupId() {
    return prefix + "-group-g";
  }

  void produceKeyed(String topic, int n, String tag) throws Exception {
    try (KafkaProducer<String, String> p = producer(Map.of())) {
      List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
      for (int i = 0; i < n; i++) fs.add(p.send(new ProducerRecord<>(topic, "k" + i, tag + i)));
      for (var f : fs) f.get(30, TimeUnit.SECONDS);
    }
  }

  void groupBefore() throws Exception {
    String topic = groupTopic();
    createTopic(topic, 4, null);
    produceKeyed(topic, 40, "g");
    Map<TopicPartition, Long> end = new HashMap<>();
    for (var e : admin.listOffsets(Map.of(tp(topic, 0), OffsetSpec.latest(), tp(topic, 1), OffsetSpec.latest(),
        tp(topic, 2), OffsetSpec.latest(), tp(topic, 3), OffsetSpec.latest())).all().get().entrySet()) {
      end.put(e.getKey(), e.getValue().offset());
    }
    rec("group.end_offsets", new TreeMap<>(toStrKeys(end)));
    Set<String> seen = new HashSet<>();
    KafkaConsumer<String, String> a = consumer(groupId(), prefix + "-member-a");
    KafkaConsumer<String, String> b = consumer(groupId(), prefix + "-member-b");
    try {
      a.subscribe(List.of(topic));
      // a alone: all 4 partitions; consume a few and commit.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (a.assignment().size() != 4 && System.nanoTime() < deadline) consumeCommit(a, seen);
      checkEq(4, a.assignment().size(), "group: first member assigned partitions");
      for (int i = 0; i < 5; i++) consumeCommit(a, seen);
      // b joins: a rebalance, 2 + 2 with the range assignor.
      b.subscribe(List.of(topic));
      deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(45);
      while (System.nanoTime() < deadline && (a.assignment().size() + b.assignment().size() != 4
          || a.assignment().isEmpty() || b.assignment().isEmpty())) {
        consumeCommit(a, seen);
        consumeCommit(b, seen);
      }
      List<Integer> sizes = new ArrayList<>(List.of(a.assignment().size(), b.assignment().size()));
      sizes.sort(null);
      checkEq(List.of(2, 2), sizes, "group: after the second member joined, assignment sizes");
      rec("group.assignment_sizes", sizes);
      deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (seen.size() < 40 && System.nanoTime() < deadline) {
        consumeCommit(a, seen);
        consumeCommit(b, seen);
      }
      checkEq(40, seen.size(), "group: distinct records consumed by the two members");
      // the commits of the last polls
      consumeCommit(a, seen);
      consumeCommit(b, seen);
      ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(groupId())).all().get().get(groupId());
      checkEq("Stable", d.groupState().toString(), "group: state with two members");
      checkEq(2, d.members().size(), "group: members");
      rec("group.described.state", d.groupState());
      rec("group.described.members", d.members().size());
      rec("group.described.assignor", d.partitionAssignor());
      rec("group.described.type", d.type());
      List<Integer> msizes = new ArrayList<>();
      d.members().forEach(m -> msizes.add(m.assignment().topicPartitions().size()));
      msizes.sort(null);
      rec("group.described.member_partitions", msizes);
    } finally {
      a.close(Duration.ofSeconds(10));
      b.close(Duration.ofSeconds(10));
    }
    Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(groupId())
        .partitionsToOffsetAndMetadata().get();
    Map<String, Long> got = new TreeMap<>();
    committed.forEach((k, v) -> got.put(k.toString(), v.offset()));
    checkEq(new TreeMap<>(toStrKeys(end)), got, "group: committed offsets read back (ListConsumerGroupOffsets)");
    rec("group.committed", got);
    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(groupId())).all().get().get(groupId());
    checkEq("Empty", d.groupState().toString(), "group: state after both members closed");
    rec("group.after_close.state", d.groupState());
    rec("group.after_close.members", d.members().size());
  }

  void consumeCommit(KafkaConsumer<String, String> c, Set<String> seen) {
    ConsumerRecords<String, String> rs = c.poll(POLL);
    for (ConsumerRecord<String, String> r : rs) seen.add(r.partition() + "/" + r.offset());
    if (!rs.isEmpty()) {
      try {
        c.commitSync(Duration.ofSeconds(10));
      } catch (Exception e) {
        // A commit during a rebalance fails (RebalanceInProgress, CommitFailed): the records are
        // then read again by whoever gets the partition, and committed then.
        System.out.println("commit: " + describe(e));
      }
    }
  }

  void groupAfter() throws Exception {
    String topic = groupTopic();
    Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(groupId())
        .partitionsToOffsetAndMetadata().get();
    Map<String, Long> got = new TreeMap<>();
    committed.forEach((k, v) -> got.put(k.toString(), v.offset()));
    long sum = got.values().stream().mapToLong(Long::longValue).sum();
    checkEq(40L, sum, "group after: committed offsets (sum over partitions) " + got);
    rec("group.after.committed", got);
    // A new member resumes at the commits: nothing left to read.
    try (KafkaConsumer<String, String> c = consumer(groupId(), prefix + "-member-c")) {
      c.subscribe(List.of(topic));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      int read = 0;
      while (c.assignment().size() != 4 && System.nanoTime() < deadline) read += c.poll(POLL).count();
      for (int i = 0; i < 5; i++) read += c.poll(POLL).count();
      checkEq(4, c.assignment().size(), "group after: the new member's assignment");
      checkEq(0, read, "group after: records read by a member that resumes at the commits");
      Map<String, Long> pos = new TreeMap<>();
      for (TopicPartition tp : c.assignment()) pos.put(tp.toString(), c.position(tp));
      checkEq(got, pos, "group after: positions = committed offsets");
      rec("group.after.positions", pos);
    }
  }

  // ------------------------------------------------------------------ idempotence

  String idemTopic() {
    return prefix + "-idem";
  }

  void idempotenceWrite() throws Exception {
    String topic = idemTopic();
    createTopic(topic, 2, null);
    int n = 2000;
    try (KafkaProducer<String, String> p = producer(Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
        ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 5, ProducerConfig.BATCH_SIZE_CONFIG, 2048,
        ProducerConfig.LINGER_MS_CONFIG, 5))) {
      List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
      for (int i = 0; i < n; i++) fs.add(p.send(new ProducerRecord<>(topic, "key-" + (i % 50), "seq-" + i)));
      int ok = 0;
      for (var f : fs) {
        f.get(30, TimeUnit.SECONDS);
        ok++;
      }
      checkEq(n, ok, "idempotence: acknowledged sends (enable.idempotence, acks=all, 5 in flight)");
    }
    DescribeProducersResult dp = admin.describeProducers(List.of(tp(topic, 0), tp(topic, 1)));
    for (int part = 0; part < 2; part++) {
      List<ProducerState> ps = dp.partitionResult(tp(topic, part)).get().activeProducers();
      checkEq(1, ps.size(), "idempotence: DescribeProducers p" + part + " producers");
      rec("idem.describe_producers.p" + part + ".count", ps.size());
      if (!ps.isEmpty()) {
        rec("idem.describe_producers.p" + part + ".epoch", ps.get(0).producerEpoch());
        rec("idem.describe_producers.p" + part + ".last_sequence", ps.get(0).lastSequence());
        rec("idem.describe_producers.p" + part + ".coordinator_epoch", ps.get(0).coordinatorEpoch());
        rec("idem.describe_producers.p" + part + ".txn_start", ps.get(0).currentTransactionStartOffset());
      }
    }
  }

  void idempotenceRead() throws Exception {
    List<Rec> got = readAll(idemTopic(), 2);
    Map<String, Integer> count = new HashMap<>();
    Map<Integer, Integer> lastSeq = new HashMap<>();
    boolean ordered = true;
    int[] perPart = new int[2];
    for (Rec r : got) {
      count.merge(r.value(), 1, Integer::sum);
      int seq = Integer.parseInt(r.value().substring(4));
      Integer prev = lastSeq.put(r.partition(), seq);
      if (prev != null && prev >= seq) ordered = false;
      perPart[r.partition()]++;
    }
    boolean once = count.size() == 2000 && count.values().stream().allMatch(c -> c == 1);
    check(once, "idempotence: every record exactly once (" + got.size() + " read, " + count.size() + " distinct)");
    check(ordered, "idempotence: in send order within each partition");
    rec("idem.read.per_partition", perPart[0] + "," + perPart[1]);
    rec("idem.read.exactly_once_in_order", once && ordered);
  }

  // ------------------------------------------------------------------ admin: topics

  static TopicPartition tp(String t, int p) {
    return new TopicPartition(t, p);
  }

  static Map<String, Long> toStrKeys(Map<TopicPartition, Long> m) {
    Map<String, Long> out = new TreeMap<>();
    m.forEach((k, v) -> out.put(k.toString(), v));
    return out;
  }

  void adminTopics() throws Exception {
    String t = prefix + "-adm-topic";
    CreateTopicsResult cr = admin.createTopics(List.of(new NewTopic(t, 3, (short) 1)
        .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "compact"))));
    cr.all().get();
    checkEq(3, cr.numPartitions(t).get(), "CreateTopics: partitions in the answer");
    checkEq(1, cr.replicationFactor(t).get(), "CreateTopics: replication factor in the answer");
    rec("topics.create.num_partitions", cr.numPartitions(t).get());
    rec("topics.create.replication_factor", cr.replicationFactor(t).get());
    // The configs the answer carries (CreateTopics v5+), every one.
    Config created = cr.config(t).get();
    rec("topics.create.answer.retention.ms", entry(created.get("retention.ms")));
    rec("topics.create.answer.cleanup.policy", entry(created.get("cleanup.policy")));
    rec("topics.create.answer.config_count", created.entries().size());
    waitForTopic(t, 3);
    expectError("topics.create.again", "TopicExistsException", () -> admin.createTopics(List.of(new NewTopic(t, 3, (short) 1))).all().get());
    expectError("topics.create.zero_partitions", "InvalidPartitionsException",
        () -> admin.createTopics(List.of(new NewTopic(prefix + "-adm-zero", 0, (short) 1))).all().get());
    expectError("topics.create.rf3_on_one_broker", "InvalidReplicationFactorException",
        () -> admin.createTopics(List.of(new NewTopic(prefix + "-adm-rf3", 1, (short) 3))).all().get());
    expectError("topics.create.bad_config_value", "InvalidConfigurationException",
        () -> admin.createTopics(List.of(new NewTopic(prefix + "-adm-badval", 1, (short) 1).configs(Map.of("retention.ms", "soon")))).all().get());
    expectError("topics.create.unknown_config", "InvalidConfigurationException",
        () -> admin.createTopics(List.of(new NewTopic(prefix + "-adm-badkey", 1, (short) 1).configs(Map.of("no.such.config", "1")))).all().get());
    expectError("topics.create.bad_name", "InvalidTopicException",
        () -> admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all().get());
    expectError("topics.create.validate_only", "ok",
        () -> admin.createTopics(List.of(new NewTopic(prefix + "-adm-validate", 2, (short) 1)), new CreateTopicsOptions().validateOnly(true)).all().get());
    Set<String> names = admin.listTopics().names().get();
    check(names.contains(t), "ListTopics lists the new topic");
    check(!names.contains(prefix + "-adm-validate"), "a validate-only CreateTopics created nothing");
    rec("topics.list.has_validate_only", names.contains(prefix + "-adm-validate"));
    rec("topics.list.has_internal_by_default", names.contains("__consumer_offsets"));
    Set<String> all = admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get();
    rec("topics.list_internal.has_new", all.contains(t));

    TopicDescription d = admin.describeTopics(List.of(t)).allTopicNames().get().get(t);
    checkEq(3, d.partitions().size(), "DescribeTopics: partitions");
    rec("topics.describe.partitions", d.partitions().size());
    rec("topics.describe.internal", d.isInternal());
    rec("topics.describe.has_topic_id", d.topicId() != null && !d.topicId().toString().equals("AAAAAAAAAAAAAAAAAAAAAA"));
    Node only = admin.describeCluster().nodes().get().iterator().next();
    for (TopicPartitionInfo p : d.partitions()) {
      rec("topics.describe.p" + p.partition(), "leader=" + (only.equals(p.leader()) ? "self" : p.leader())
          + " replicas=" + p.replicas().size() + " isr=" + p.isr().size()
          // null when the answer came from Metadata (no DescribeTopicPartitions, KIP-966)
          + " elr=" + (p.elr() == null ? "null" : p.elr().size())
          + " lastKnownElr=" + (p.lastKnownElr() == null ? "null" : p.lastKnownElr().size()));
    }
    expectError("topics.describe.unknown", "UnknownTopicOrPartitionException",
        () -> admin.describeTopics(List.of(prefix + "-no-such-topic")).allTopicNames().get());
    // The cluster as the admin client sees it.
    var cluster = admin.describeCluster();
    rec("cluster.nodes", cluster.nodes().get().size());
    rec("cluster.controller_is_a_node", cluster.nodes().get().contains(cluster.controller().get()));
    rec("cluster.has_cluster_id", cluster.clusterId().get() != null);

    // CreatePartitions
    expectError("topics.create_partitions.grow", "ok", () -> admin.createPartitions(Map.of(t, NewPartitions.increaseTo(5))).all().get());
    waitForTopic(t, 5);
    expectError("topics.create_partitions.shrink", "InvalidPartitionsException",
        () -> admin.createPartitions(Map.of(t, NewPartitions.increaseTo(2))).all().get());
    expectError("topics.create_partitions.same", "InvalidPartitionsException",
        () -> admin.createPartitions(Map.of(t, NewPartitions.increaseTo(5))).all().get());
    expectError("topics.create_partitions.unknown", "UnknownTopicOrPartitionException",
        () -> admin.createPartitions(Map.of(prefix + "-no-such-topic", NewPartitions.increaseTo(5))).all().get());
    rec("topics.describe.after_grow.partitions", admin.describeTopics(List.of(t)).allTopicNames().get().get(t).partitions().size());

    // DeleteTopics
    expectError("topics.delete", "ok", () -> admin.deleteTopics(List.of(t)).all().get());
    expectError("topics.delete.again", "UnknownTopicOrPartitionException", () -> admin.deleteTopics(List.of(t)).all().get());
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    boolean gone = false;
    while (!gone && System.nanoTime() < deadline) {
      gone = !admin.listTopics().names().get().contains(t);
      if (!gone) Thread.sleep(50);
    }
    check(gone, "a deleted topic is no longer listed");
    expectError("topics.describe.deleted", "UnknownTopicOrPartitionException",
        () -> admin.describeTopics(List.of(t)).allTopicNames().get());
  }

  // ------------------------------------------------------------------ admin: configs

  static String entry(ConfigEntry e) {
    if (e == null) return "absent";
    return e.value() + " source=" + e.source() + " readOnly=" + e.isReadOnly() + " sensitive=" + e.isSensitive()
        + " type=" + e.type();
  }

  /** The entry once `done` holds for it (bounded: 10 s, then whatever it is). Kafka's brokers
   * apply a dynamic config some time after the answer, its value later than its source. */
  String describeUntil(ConfigResource r, String key, java.util.function.Predicate<String> done) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    String now = entry(describe(r).get(key));
    while (!done.test(now) && System.nanoTime() < deadline) {
      Thread.sleep(100);
      now = entry(describe(r).get(key));
    }
    return now;
  }

  Config describe(ConfigResource r) throws Exception {
    return admin.describeConfigs(List.of(r)).all().get().get(r);
  }

  void alter(ConfigResource r, AlterConfigOp... ops) throws Exception {
    admin.incrementalAlterConfigs(Map.of(r, List.of(ops))).all().get();
  }

  static AlterConfigOp op(String k, String v, AlterConfigOp.OpType t) {
    return new AlterConfigOp(new ConfigEntry(k, v), t);
  }

  void adminConfigs() throws Exception {
    String t = prefix + "-cfg-topic";
    createTopic(t, 1, Map.of("retention.ms", "3600000", "cleanup.policy", "compact", "max.message.bytes", "200000"));
    ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, t);
    Config c = describe(r);
    for (ConfigEntry e : c.entries()) rec("configs.topic.initial." + e.name(), entry(e));
    checkEq("3600000 DYNAMIC_TOPIC_CONFIG", c.get("retention.ms").value() + " " + c.get("retention.ms").source(), "DescribeConfigs topic retention.ms");
    checkEq("604800000 DEFAULT_CONFIG", c.get("segment.ms").value() + " " + c.get("segment.ms").source(),
        "DescribeConfigs topic segment.ms (the default, 7 days)");

    expectError("configs.topic.alter.set_delete_append", "ok", () -> {
      alter(r, op("retention.ms", "7200000", AlterConfigOp.OpType.SET), op("max.message.bytes", null, AlterConfigOp.OpType.DELETE),
          op("cleanup.policy", "delete", AlterConfigOp.OpType.APPEND));
      return null;
    });
    c = describe(r);
    rec("configs.topic.after.retention.ms", entry(c.get("retention.ms")));
    rec("configs.topic.after.max.message.bytes", entry(c.get("max.message.bytes")));
    rec("configs.topic.after.cleanup.policy", entry(c.get("cleanup.policy")));
    checkEq("7200000", c.get("retention.ms").value(), "IncrementalAlterConfigs SET retention.ms");
    checkEq(ConfigEntry.ConfigSource.DEFAULT_CONFIG, c.get("max.message.bytes").source(), "IncrementalAlterConfigs DELETE max.message.bytes: back to the default");
    checkEq("compact,delete", c.get("cleanup.policy").value(), "IncrementalAlterConfigs APPEND cleanup.policy");
    expectError("configs.topic.alter.subtract", "ok", () -> {
      alter(r, op("cleanup.policy", "compact", AlterConfigOp.OpType.SUBTRACT));
      return null;
    });
    rec("configs.topic.after_subtract.cleanup.policy", entry(describe(r).get("cleanup.policy")));
    // The order of a list a value is appended to ("delete" + "compact").
    expectError("configs.topic.alter.append_after", "ok", () -> {
      alter(r, op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND));
      return null;
    });
    rec("configs.topic.after_append.cleanup.policy", entry(describe(r).get("cleanup.policy")));
    expectError("configs.topic.alter.bad_value", "InvalidConfigurationException", () -> {
      alter(r, op("retention.ms", "soon", AlterConfigOp.OpType.SET));
      return null;
    });
    expectError("configs.topic.alter.unknown_key", "InvalidConfigurationException", () -> {
      alter(r, op("no.such.config", "1", AlterConfigOp.OpType.SET));
      return null;
    });
    expectError("configs.topic.alter.append_to_non_list", "InvalidConfigurationException", () -> {
      alter(r, op("retention.ms", "5", AlterConfigOp.OpType.APPEND));
      return null;
    });
    expectError("configs.topic.alter.unknown_topic", "UnknownTopicOrPartitionException", () -> {
      alter(new ConfigResource(ConfigResource.Type.TOPIC, prefix + "-no-such-topic"), op("retention.ms", "1000", AlterConfigOp.OpType.SET));
      return null;
    });
    expectError("configs.topic.describe.unknown_topic", "UnknownTopicOrPartitionException",
        () -> describe(new ConfigResource(ConfigResource.Type.TOPIC, prefix + "-no-such-topic")));
    rec("configs.topic.after_errors.retention.ms", entry(describe(r).get("retention.ms")));
    // Synonyms (DescribeConfigs v1+): where a topic value comes from.
    var withSyn = admin.describeConfigs(List.of(r), new org.apache.kafka.clients.admin.DescribeConfigsOptions().includeSynonyms(true))
        .all().get().get(r);
    for (String k : List.of("retention.ms", "segment.bytes", "cleanup.policy")) {
      List<String> syn = new ArrayList<>();
      for (var s : withSyn.get(k).synonyms()) syn.add(s.name() + ":" + s.source() + ":" + s.value());
      rec("configs.topic.synonyms." + k, syn);
    }
    admin.deleteTopics(List.of(t)).all().get();
    // A list created in a non-canonical order reads back as given?
    String t2 = prefix + "-cfg-order";
    createTopic(t2, 1, Map.of("cleanup.policy", "delete,compact"));
    rec("configs.topic.created_order.cleanup.policy",
        entry(describe(new ConfigResource(ConfigResource.Type.TOPIC, t2)).get("cleanup.policy")));
    admin.deleteTopics(List.of(t2)).all().get();
  }

  static final List<String> BROKER_KEYS = List.of("num.partitions", "default.replication.factor", "log.retention.hours",
      "log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.hours", "message.max.bytes",
      "auto.create.topics.enable", "delete.topic.enable", "min.insync.replicas", "log.cleanup.policy", "compression.type",
      "offsets.topic.num.partitions", "offsets.retention.minutes", "group.min.session.timeout.ms",
      "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms", "log.message.timestamp.type",
      "unclean.leader.election.enable", "log.index.interval.bytes", "log.flush.interval.messages",
      "replica.lag.time.max.ms", "producer.id.expiration.ms", "transactional.id.expiration.ms",
      "log.local.retention.ms", "max.incremental.fetch.session.cache.slots", "fetch.max.bytes");

  void adminBrokerConfigs() throws Exception {
    Node node = admin.describeCluster().nodes().get().iterator().next();
    ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER, node.idString());
    Config c = describe(br);
    check(c.entries().size() > 10, "DescribeConfigs broker " + node.idString() + ": " + c.entries().size() + " entries");
    for (String k : BROKER_KEYS) rec("configs.broker." + k, entry(c.get(k)));
    // The cluster-wide default (resource name ""), a dynamic broker config Kafka takes at runtime.
    ConfigResource dflt = new ConfigResource(ConfigResource.Type.BROKER, "");
    rec("configs.broker_default.describe", outcome("configs.broker_default.describe.outcome", () -> describe(dflt).entries().size()) == null ? "error" : "entries");
    expectError("configs.broker_default.alter.set", "ok", () -> {
      alter(dflt, op("log.retention.ms", "86400000", AlterConfigOp.OpType.SET));
      return null;
    });
    // Kafka's brokers take a dynamic config from the metadata log a moment after the answer.
    String set = describeUntil(br, "log.retention.ms", v -> v.startsWith("86400000 source=DYNAMIC_DEFAULT_BROKER_CONFIG"));
    rec("configs.broker.after_default_set.log.retention.ms", set);
    String t = prefix + "-cfg-inherit";
    createTopic(t, 1, null);
    ConfigResource tr = new ConfigResource(ConfigResource.Type.TOPIC, t);
    String inherited = describeUntil(tr, "retention.ms", v -> v.startsWith("86400000 "));
    rec("configs.topic.inherited.retention.ms", inherited);
    expectError("configs.broker_default.alter.delete", "ok", () -> {
      alter(dflt, op("log.retention.ms", null, AlterConfigOp.OpType.DELETE));
      return null;
    });
    java.util.function.Predicate<String> reverted = v -> !v.startsWith("86400000 ") && v.contains("source=DEFAULT_CONFIG");
    rec("configs.broker.after_default_delete.log.retention.ms", describeUntil(br, "log.retention.ms", reverted));
    rec("configs.topic.after_default_delete.retention.ms", describeUntil(tr, "retention.ms", reverted));
    // A per-broker dynamic config and a static one (read-only: not alterable at runtime).
    expectError("configs.broker.alter.read_only", "InvalidRequestException", () -> {
      alter(br, op("log.dirs", "/tmp/elsewhere", AlterConfigOp.OpType.SET));
      return null;
    });
    // Kafka takes unknown broker properties (plugins read their own) and stores them; ringbroker
    // refuses them (INVALID_CONFIG): a known difference (kafka_diff.py's allowlist).
    String unknownKey = "ringbroker refuses broker properties it does not know (kafka_diff.py ALLOWLIST)";
    expectError("configs.broker.alter.unknown_key", "ok", unknownKey, () -> {
      alter(br, op("no.such.config", "1", AlterConfigOp.OpType.SET));
      return null;
    });
    expectError("configs.broker.alter.unknown_key_delete", "ok", unknownKey, () -> {
      alter(br, op("no.such.config", null, AlterConfigOp.OpType.DELETE));
      return null;
    });
    admin.deleteTopics(List.of(t)).all().get();
  }

  // ------------------------------------------------------------------ admin: groups

  void adminGroups() throws Exception {
    String t = prefix + "-adm-group-topic";
    String g = prefix + "-adm-group";
    createTopic(t, 3, null);
    produceKeyed(t, 30, "a");
    try (KafkaConsumer<String, String> c = consumer(g, prefix + "-adm-member")) {
      c.subscribe(List.of(t));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      int n = 0;
      while (n < 30 && System.nanoTime() < deadline) n += c.poll(POLL).count();
      checkEq(30, n, "admin groups: records consumed by the member");
      c.commitSync(Duration.ofSeconds(10));
      Collection<GroupListing> listed = admin.listGroups().all().get();
      GroupListing mine = listed.stream().filter(x -> x.groupId().equals(g)).findFirst().orElse(null);
      check(mine != null, "ListGroups lists the active group");
      if (mine != null) {
        rec("groups.list.type", mine.type().orElse(null));
        rec("groups.list.protocol", mine.protocol());
        rec("groups.list.state", mine.groupState().orElse(null));
      }
      ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(g)).all().get().get(g);
      rec("groups.describe.state", d.groupState());
      rec("groups.describe.members", d.members().size());
      rec("groups.describe.assignor", d.partitionAssignor());
      rec("groups.describe.simple", d.isSimpleConsumerGroup());
      rec("groups.describe.coordinator_is_a_node", admin.describeCluster().nodes().get().contains(d.coordinator()));
      rec("groups.describe.member.client_id", d.members().iterator().next().clientId());
      rec("groups.describe.member.partitions", d.members().iterator().next().assignment().topicPartitions().size());
      rec("groups.describe.member.host_is_loopback", d.members().iterator().next().host().contains("127.0.0.1"));
      checkEq("Stable", String.valueOf(d.groupState()), "DescribeGroups: state of the active group");
      expectError("groups.delete.active", "GroupNotEmptyException", () -> admin.deleteConsumerGroups(List.of(g)).all().get());
      expectError("groups.delete_offsets.active_subscribed", "GroupSubscribedToTopicException",
          () -> admin.deleteConsumerGroupOffsets(g, Set.of(tp(t, 0))).all().get());
    }
    Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
    Map<String, String> o = new TreeMap<>();
    offs.forEach((k, v) -> o.put(k.toString(), v.offset() + "/" + v.metadata() + "/epoch=" + v.leaderEpoch().orElse(-1)));
    rec("groups.offsets", o);
    long sum = offs.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
    checkEq(30L, sum, "ListConsumerGroupOffsets: committed offsets sum");
    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(g)).all().get().get(g);
    rec("groups.describe.after_close.state", d.groupState());
    rec("groups.describe.after_close.members", d.members().size());
    rec("groups.describe.after_close.assignor", d.partitionAssignor());
    expectError("groups.delete_offsets.empty", "ok", () -> admin.deleteConsumerGroupOffsets(g, Set.of(tp(t, 0))).all().get());
    rec("groups.offsets.after_delete_offsets",
        new TreeMap<>(toStrKeysO(admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get())));
    expectError("groups.delete", "ok", () -> admin.deleteConsumerGroups(List.of(g)).all().get());
    expectError("groups.delete.again", "GroupIdNotFoundException", () -> admin.deleteConsumerGroups(List.of(g)).all().get());
    rec("groups.describe.deleted", outcomeOrState(g));
    rec("groups.offsets.deleted", outcomeOrOffsets(g + "-never"));
    rec("groups.list.after_delete.contains", admin.listGroups().all().get().stream().anyMatch(x -> x.groupId().equals(g)));
    admin.deleteTopics(List.of(t)).all().get();
  }

  String outcomeOrState(String g) {
    try {
      return String.valueOf(admin.describeConsumerGroups(List.of(g)).all().get().get(g).groupState());
    } catch (Exception e) {
      return errName(e);
    }
  }

  String outcomeOrOffsets(String g) {
    try {
      return String.valueOf(admin.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get());
    } catch (Exception e) {
      return errName(e);
    }
  }

  static Map<String, Long> toStrKeysO(Map<TopicPartition, OffsetAndMetadata> m) {
    Map<String, Long> out = new TreeMap<>();
    m.forEach((k, v) -> out.put(k.toString(), v == null ? null : v.offset()));
    return out;
  }

  /** A timestamp relative to T0 (-1 stays -1). */
  static String rel(long ts) {
    return ts < 0 ? String.valueOf(ts) : "T0+" + (ts - T0);
  }

  // ------------------------------------------------------------------ DeleteRecords, ListOffsets

  void deleteRecords() throws Exception {
    String t = prefix + "-delrec";
    createTopic(t, 1, null);
    produceKeyed(t, 10, "d");
    TopicPartition p = tp(t, 0);
    DeletedRecords dr = admin.deleteRecords(Map.of(p, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(p).get();
    checkEq(4L, dr.lowWatermark(), "DeleteRecords before 4: low watermark");
    rec("delete_records.before4.low_watermark", dr.lowWatermark());
    rec("delete_records.earliest_after", admin.listOffsets(Map.of(p, OffsetSpec.earliest())).partitionResult(p).get().offset());
    List<Rec> left = readAll(t, 1);
    checkEq(6, left.size(), "DeleteRecords: records left to read");
    rec("delete_records.left_first_offset", left.isEmpty() ? -1 : left.get(0).offset());
    expectError("delete_records.lower_again", "ok", () -> admin.deleteRecords(Map.of(p, RecordsToDelete.beforeOffset(2))).all().get());
    rec("delete_records.lower_again.low_watermark", admin.deleteRecords(Map.of(p, RecordsToDelete.beforeOffset(2))).lowWatermarks().get(p).get().lowWatermark());
    expectError("delete_records.beyond_end", "OffsetOutOfRangeException",
        () -> admin.deleteRecords(Map.of(p, RecordsToDelete.beforeOffset(100))).all().get());
    DeletedRecords hw = admin.deleteRecords(Map.of(p, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(p).get();
    checkEq(10L, hw.lowWatermark(), "DeleteRecords before -1 (the high watermark): low watermark");
    rec("delete_records.to_hw.low_watermark", hw.lowWatermark());
    var both = admin.listOffsets(Map.of(p, OffsetSpec.earliest())).partitionResult(p).get().offset() + ".."
        + admin.listOffsets(Map.of(p, OffsetSpec.latest())).partitionResult(p).get().offset();
    rec("delete_records.to_hw.earliest_latest", both);
    admin.deleteTopics(List.of(t)).all().get();
  }

  String tsTopic() {
    return prefix + "-ts";
  }

  void listOffsetsWrite() throws Exception {
    String t = tsTopic();
    createTopic(t, 1, null);
    try (KafkaProducer<String, String> p = producer(Map.of())) {
      for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(t, 0, T0 + i * 1000L, "k" + i, "ts" + i)).get(30, TimeUnit.SECONDS);
    }
    listOffsetsRead();
  }

  void listOffsetsRead() throws Exception {
    TopicPartition p = tp(tsTopic(), 0);
    Map<String, Supplier<OffsetSpec>> specs = new LinkedHashMap<>();
    specs.put("earliest", OffsetSpec::earliest);
    specs.put("latest", OffsetSpec::latest);
    specs.put("max_timestamp", OffsetSpec::maxTimestamp);
    specs.put("earliest_local", OffsetSpec::earliestLocal);
    specs.put("ts_before_first", () -> OffsetSpec.forTimestamp(T0 - 5));
    specs.put("ts_exact_3", () -> OffsetSpec.forTimestamp(T0 + 3000));
    specs.put("ts_between_3_4", () -> OffsetSpec.forTimestamp(T0 + 3500));
    specs.put("ts_after_last", () -> OffsetSpec.forTimestamp(T0 + 99_000));
    Map<String, String> want = Map.of("earliest", "0", "latest", "10", "max_timestamp", "9@T0+9000",
        "ts_before_first", "0@T0+0", "ts_exact_3", "3@T0+3000", "ts_between_3_4", "4@T0+4000",
        "ts_after_last", "-1@-1", "earliest_local", "0");
    for (var e : specs.entrySet()) {
      String got;
      try {
        ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(p, e.getValue().get())).partitionResult(p).get();
        got = info.offset() + (e.getKey().startsWith("ts") || e.getKey().equals("max_timestamp") ? "@" + rel(info.timestamp()) : "");
      } catch (Exception ex) {
        got = errName(ex);
      }
      rec("list_offsets." + e.getKey(), got);
      checkEq(want.get(e.getKey()), got, "ListOffsets " + e.getKey());
    }
  }

}
