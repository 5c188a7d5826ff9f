package dev.ringbroker.interop;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Exit;

/**
 * Runs Kafka's command-line tools (the classes behind kafka-topics.sh, kafka-configs.sh, ...) one
 * after the other in this JVM, as their scripts would, and writes what each printed and its exit
 * code. One JVM instead of one per command: a JVM start costs ~2 s on a busy 2-core machine.
 *
 * <pre>
 *   java -cp classes:$KAFKA_HOME/libs/* dev.ringbroker.interop.ToolRunner
 *        --kafka-home DIR --bootstrap HOST:PORT --script FILE --out FILE --t0 MS
 * </pre>
 *
 * The script: one command a line, {@code ID TOOL ARG...} (blank lines and {@code #} comments
 * skipped); TOOL is a script name of $KAFKA_HOME/bin (its class is read from the wrapper
 * tests/kafka/kafka.sh wrote) or a built-in: {@code produce TOPIC N} (keys k0.., timestamps
 * T0+i*1000, acks=all), {@code consume GROUP TOPIC N} (a group member that reads N records,
 * commits and leaves), {@code file NAME TEXT} (writes TEXT to NAME in the output's directory).
 * In arguments, {@code {B}} is the bootstrap address, {@code {NODE}} the broker's node id,
 * {@code {T0+n}} a timestamp, {@code {DIR}} the output's directory. The tools' System.exit goes
 * through Kafka's {@code Exit}, which is pointed at an exception here.
 */
public final class ToolRunner {
  /** Where System.out / System.err (and Scala's Console, which keeps the first) write. */
  static final class Switch extends OutputStream {
    volatile OutputStream target;

    Switch(OutputStream t) {
      target = t;
    }

    @Override
    public void write(int b) throws java.io.IOException {
      target.write(b);
    }

    @Override
    public void write(byte[] b, int off, int len) throws java.io.IOException {
      target.write(b, off, len);
    }
  }

  static final class ExitCalled extends RuntimeException {
    final int code;

    ExitCalled(int code) {
      super("exit " + code, null, false, false);
      this.code = code;
    }
  }

  static volatile Integer firstExit;

  public static void main(String[] args) throws Exception {
    Map<String, String> opt = new HashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) opt.put(args[i].replaceFirst("^--", ""), args[i + 1]);
    Path home = Path.of(opt.get("kafka-home"));
    String bootstrap = opt.get("bootstrap");
    Path out = Path.of(opt.get("out")).toAbsolutePath();
    long t0 = Long.parseLong(opt.get("t0"));
    PrintStream realOut = System.out;
    Switch so = new Switch(realOut);
    Switch se = new Switch(System.err);
    System.setOut(new PrintStream(so, true, StandardCharsets.UTF_8));
    System.setErr(new PrintStream(se, true, StandardCharsets.UTF_8));
    // As System.exit, the first call ends the command: what a tool does after it (some catch the
    // exception and exit again with 1) is not what its script would have done.
    Exit.setExitProcedure((code, msg) -> {
      if (firstExit == null) firstExit = code;
      throw new ExitCalled(code);
    });
    Exit.setHaltProcedure((code, msg) -> {
      if (firstExit == null) firstExit = code;
      throw new ExitCalled(code);
    });
    String node;
    Properties ap = new Properties();
    ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    try (Admin a = Admin.create(ap)) {
      node = a.describeCluster().nodes().get(30, TimeUnit.SECONDS).iterator().next().idString();
    }
    StringBuilder report = new StringBuilder();
    report.append("### node ").append(node).append('\n');
    Pattern ts = Pattern.compile("\\{T0\\+(\\d+)\\}");
    for (String line : Files.readAllLines(Path.of(opt.get("script")))) {
      line = line.strip();
      if (line.isEmpty() || line.startsWith("#")) continue;
      List<String> words = new ArrayList<>(List.of(line.split("\\s+")));
      String id = words.remove(0);
      String tool = words.remove(0);
      List<String> argv = new ArrayList<>();
      for (String w : words) {
        w = w.replace("{B}", bootstrap).replace("{NODE}", node).replace("{DIR}", out.getParent().toString());
        Matcher m = ts.matcher(w);
        StringBuilder sb = new StringBuilder();
        while (m.find()) m.appendReplacement(sb, String.valueOf(t0 + Long.parseLong(m.group(1))));
        m.appendTail(sb);
        argv.add(sb.toString());
      }
      ByteArrayOutputStream bo = new ByteArrayOutputStream();
      ByteArrayOutputStream be = new ByteArrayOutputStream();
      so.target = bo;
      se.target = be;
      int code;
      firstExit = null;
      long start = System.nanoTime();
      try {
        code = run(home, tool, argv, bootstrap, t0, out.getParent());
      } catch (ExitCalled e) {
        code = e.code;
      } catch (Throwable e) {
        e.printStackTrace(System.err);
        code = -1;
      } finally {
        if (firstExit != null) code = firstExit;
        System.out.flush();
        System.err.flush();
        so.target = realOut;
        se.target = realOut;
      }
      realOut.printf("== tool %s (%s) exit %d in %.1fs%n", id, tool, code, (System.nanoTime() - start) / 1e9);
      report.append("### ").append(id).append(' ').append(tool).append(" exit=").append(code).append('\n');
      report.append(bo.toString(StandardCharsets.UTF_8));
      report.append("### ").append(id).append(" stderr\n");
      report.append(be.toString(StandardCharsets.UTF_8));
    }
    report.append("### end\n");
    Files.writeString(out, report.toString());
    realOut.flush();
    // Tools leave non-daemon threads behind now and then; this JVM's work is done.
    Runtime.getRuntime().halt(0);
  }

  static int run(Path home, String tool, List<String> argv, String bootstrap, long t0, Path dir) throws Throwable {
    switch (tool) {
      case "produce":
        produce(bootstrap, argv.get(0), Integer.parseInt(argv.get(1)), t0);
        return 0;
      case "consume":
        return consume(bootstrap, argv.get(0), argv.get(1), Integer.parseInt(argv.get(2)));
      case "join":
        join(bootstrap, argv.get(0), argv.get(1));
        return 0;
      case "leave":
        leave(argv.get(0));
        return 0;
      case "file":
        Files.writeString(dir.resolve(argv.get(0)), String.join(" ", argv.subList(1, argv.size())) + "\n");
        return 0;
      default:
        break;
    }
    Path wrapper = home.resolve("bin").resolve(tool + ".sh");
    String text = Files.readString(wrapper);
    Matcher m = Pattern.compile("kafka-run-class\\.sh\"?\\s+(\\S+)").matcher(text);
    if (!m.find()) throw new IllegalArgumentException("no class in " + wrapper);
    Class<?> cls = Class.forName(m.group(1));
    try {
      cls.getMethod("main", String[].class).invoke(null, (Object) argv.toArray(new String[0]));
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
    return 0;
  }

  static void produce(String bootstrap, String topic, int n, long t0) throws Exception {
    Map<String, Object> p = new HashMap<>();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false);
    try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
      for (int i = 0; i < n; i++) {
        pr.send(new ProducerRecord<>(topic, null, t0 + i * 1000L, "k" + i, "value-" + i)).get(30, TimeUnit.SECONDS);
      }
    }
    System.out.println("produced " + n);
  }

  static final Map<String, Thread> MEMBERS = new HashMap<>();
  static final Map<String, java.util.concurrent.atomic.AtomicBoolean> STOP = new HashMap<>();

  /** A group member in a thread of its own, polling and committing until {@code leave GROUP}; returns
   * once it has an assignment and has read what there is. */
  static void join(String bootstrap, String group, String topic) throws Exception {
    var stop = new java.util.concurrent.atomic.AtomicBoolean();
    var ready = new java.util.concurrent.CountDownLatch(1);
    Thread t = new Thread(() -> {
      Map<String, Object> p = consumerProps(bootstrap, group);
      try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
        c.subscribe(List.of(topic));
        int idle = 0;
        while (!stop.get()) {
          int n = c.poll(Duration.ofMillis(100)).count();
          if (n > 0) c.commitSync(Duration.ofSeconds(10));
          idle = n == 0 && !c.assignment().isEmpty() ? idle + 1 : 0;
          if (idle >= 5) ready.countDown();
        }
      }
    }, "member-" + group);
    t.start();
    MEMBERS.put(group, t);
    STOP.put(group, stop);
    if (!ready.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("member of " + group + " not ready in 30 s");
    System.out.println("joined " + group);
  }

  static void leave(String group) throws Exception {
    STOP.remove(group).set(true);
    MEMBERS.remove(group).join(20000);
    System.out.println("left " + group);
  }

  static Map<String, Object> consumerProps(String bootstrap, String group) {
    Map<String, Object> p = new HashMap<>();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-client");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 100);
    return p;
  }

  static int consume(String bootstrap, String group, String topic, int n) {
    Map<String, Object> p = consumerProps(bootstrap, group);
    int got = 0;
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
      c.subscribe(List.of(topic));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (got < n && System.nanoTime() < deadline) got += c.poll(Duration.ofMillis(100)).count();
      c.commitSync(Duration.ofSeconds(10));
    }
    System.out.println("consumed " + got);
    return got == n ? 0 : 1;
  }
}
