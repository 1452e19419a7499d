package denormd.kstreams;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * What bench/run.py drives the peer with, each a command (one JVM each, outside the timed
 * application):
 *
 * <pre>
 *   setup --bootstrap B --input T --partitions N --output-prefix P
 *       the input topic (N partitions) and the four compacted output topics
 *   fill --bootstrap B --topic T FILE
 *       one record per line, keyed "type:id", Java's default partitioner (murmur2)
 *   lag --bootstrap B --group APP_ID --input T [--poll-ms 50] [--stall-ms 300000]
 *       waits until the application has consumed and committed everything: for the input
 *       topic and each of its internal source topics (repartition, foreign-key subscription
 *       and response), the group's committed offset is at the partition's end offset; prints
 *       "caught_up at_ms=..." and exits 0 (exit 3 when no offset moved for --stall-ms)
 *   fresh --bootstrap B --output-prefix P
 *       a read_committed consumer from the output topics' ends; prints "ready", then, when its
 *       standard input closes, one JSON line: for every output record received, the time from
 *       its timestamp (the produce time of the newest event it reflects) to its receipt
 *   dump --bootstrap B --output-prefix P --dir D
 *       reads the output topics from the start (read_committed) to their ends; writes the last
 *       value of every live key to D/COLLECTION.tsv ("id \x02 json" lines, for psql \copy)
 *   cleanup --bootstrap B --group APP_ID --prefix P
 *       deletes the topics whose names start with P or with "APP_ID-" (the run's input, output
 *       and internal topics) and the consumer group APP_ID
 * </pre>
 */
public final class Tools {
    static final String[] COLLECTIONS = {"authors", "books", "posts", "post_comments"};

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            System.err.println("usage: Tools setup|fill|lag|fresh|dump [--options]");
            System.exit(2);
        }
        Map<String, String> o = options(Arrays.copyOfRange(args, 1, args.length));
        switch (args[0]) {
            case "setup" -> setup(o);
            case "fill" -> fill(o);
            case "lag" -> lag(o);
            case "fresh" -> fresh(o);
            case "dump" -> dump(o);
            case "cleanup" -> cleanup(o);
            default -> {
                System.err.println("unknown command " + args[0]);
                System.exit(2);
            }
        }
        System.exit(0);
    }

    /** "--name value" pairs; a bare "--name" maps to ""; other arguments under "arg0", "arg1"... */
    static Map<String, String> options(String[] args) {
        Map<String, String> m = new LinkedHashMap<>();
        int positional = 0;
        for (int i = 0; i < args.length; i++) {
            if (args[i].startsWith("--")) {
                String name = args[i].substring(2);
                if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                    m.put(name, args[++i]);
                } else {
                    m.put(name, "");
                }
            } else {
                m.put("arg" + positional++, args[i]);
            }
        }
        return m;
    }

    static Properties client(Map<String, String> o) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, o.getOrDefault("bootstrap", "127.0.0.1:9092"));
        return p;
    }

    static void setup(Map<String, String> o) throws Exception {
        int partitions = Integer.parseInt(o.getOrDefault("partitions", "4"));
        List<NewTopic> topics = new ArrayList<>();
        topics.add(new NewTopic(o.get("input"), partitions, (short) 1));
        for (String c : COLLECTIONS) {
            topics.add(new NewTopic(o.get("output-prefix") + "." + c, partitions, (short) 1)
                    .configs(Map.of("cleanup.policy", "compact")));
        }
        try (Admin admin = Admin.create(client(o))) {
            for (NewTopic t : topics) {
                try {
                    admin.createTopics(List.of(t)).all().get();
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof TopicExistsException)) throw e;
                }
            }
        }
        System.out.println("topics ready: " + topics.stream().map(NewTopic::name).collect(Collectors.joining(" ")));
    }

    static void fill(Map<String, String> o) throws Exception {
        Properties p = client(o);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 20);
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, 256 * 1024);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        long n = 0, start = System.nanoTime();
        String topic = o.get("topic");
        try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(p);
             BufferedReader in = new BufferedReader(new InputStreamReader(
                     new FileInputStream(o.get("arg0")), StandardCharsets.UTF_8), 1 << 20)) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                String key = "";
                try {
                    JsonNode e = Json.MAPPER.readTree(line);
                    key = e.path("type").asText() + ":" + e.path("id").asText();
                } catch (Exception ignored) {
                    // not JSON: sent unkeyed, as denormd publish would; the peer skips it
                }
                producer.send(new ProducerRecord<>(topic, key, line.getBytes(StandardCharsets.UTF_8)));
                n++;
            }
            producer.flush();
        }
        System.out.printf("filled %d records in %.1f s%n", n, (System.nanoTime() - start) / 1e9);
    }

    static void lag(Map<String, String> o) throws Exception {
        String group = o.get("group"), input = o.get("input");
        long pollMs = Long.parseLong(o.getOrDefault("poll-ms", "50"));
        long stallMs = Long.parseLong(o.getOrDefault("stall-ms", "300000"));
        long progress = -1, progressAt = System.currentTimeMillis();
        Map<String, Integer> partitions = new HashMap<>();
        long lastReport = 0;
        try (Admin admin = Admin.create(client(o))) {
            while (true) {
                // Committed offsets first, end offsets after: when every committed offset is at an
                // end read later, all that the committed transactions wrote has been consumed too.
                Map<TopicPartition, OffsetAndMetadata> committed =
                        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                List<String> sources = new ArrayList<>();
                sources.add(input);
                for (String t : admin.listTopics().names().get()) {
                    if (t.startsWith(group + "-") && (t.endsWith("-repartition") || t.endsWith("-topic"))) {
                        sources.add(t);
                    }
                }
                List<String> unknown = sources.stream().filter(t -> !partitions.containsKey(t)).toList();
                if (!unknown.isEmpty()) {
                    for (TopicDescription d : admin.describeTopics(unknown).allTopicNames().get().values()) {
                        partitions.put(d.name(), d.partitions().size());
                    }
                }
                Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
                for (String t : sources) {
                    for (int i = 0; i < partitions.get(t); i++) specs.put(new TopicPartition(t, i), OffsetSpec.latest());
                }
                var ends = admin.listOffsets(specs, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all().get();
                long inputEnd = 0, inputDone = 0, internalLag = 0;
                boolean caughtUp = true;
                for (var e : ends.entrySet()) {
                    OffsetAndMetadata c = committed.get(e.getKey());
                    long done = c == null ? 0 : c.offset(), end = e.getValue().offset();
                    if (done < end) caughtUp = false;
                    if (e.getKey().topic().equals(input)) {
                        inputEnd += end;
                        inputDone += Math.min(done, end);
                    } else {
                        internalLag += Math.max(0, end - done);
                    }
                }
                long now = System.currentTimeMillis();
                long sum = committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
                if (sum != progress) {
                    progress = sum;
                    progressAt = now;
                } else if (now - progressAt > stallMs) {
                    System.out.printf("stalled: no offset committed for %d ms; input %d/%d committed, "
                            + "internal topics %d behind%n", stallMs, inputDone, inputEnd, internalLag);
                    System.exit(3);
                }
                if (caughtUp && inputEnd > 0) {
                    System.out.println("caught_up at_ms=" + now + " input=" + inputEnd);
                    return;
                }
                if (now - lastReport >= 10_000) {
                    System.err.printf("lag: input %d/%d committed, internal topics %d behind%n",
                            inputDone, inputEnd, internalLag);
                    lastReport = now;
                }
                Thread.sleep(pollMs);
            }
        }
    }

    static void cleanup(Map<String, String> o) throws Exception {
        String group = o.get("group"), prefix = o.get("prefix");
        try (Admin admin = Admin.create(client(o))) {
            List<String> topics = admin.listTopics().names().get().stream()
                    .filter(t -> t.startsWith(prefix) || t.startsWith(group + "-")).sorted().toList();
            if (!topics.isEmpty()) admin.deleteTopics(topics).all().get();
            try {
                admin.deleteConsumerGroups(List.of(group)).all().get();
            } catch (ExecutionException e) {
                // no such group (or not empty yet): the topics are what takes the broker's time
            }
            System.out.println("deleted " + topics.size() + " topics");
        }
    }

    static KafkaConsumer<String, byte[]> committedReader(Map<String, String> o) {
        Properties p = client(o);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 20);
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 8 << 20);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        return new KafkaConsumer<>(p);
    }

    static List<TopicPartition> partitionsOf(KafkaConsumer<?, ?> c, String topic) {
        return c.partitionsFor(topic, Duration.ofSeconds(30)).stream()
                .map(i -> new TopicPartition(topic, i.partition())).toList();
    }

    static void fresh(Map<String, String> o) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        long[] lags = new long[1 << 16];
        int n = 0;
        try (KafkaConsumer<String, byte[]> c = committedReader(o)) {
            for (String col : COLLECTIONS) tps.addAll(partitionsOf(c, o.get("output-prefix") + "." + col));
            c.assign(tps);
            c.seekToEnd(tps);
            for (TopicPartition tp : tps) c.position(tp);  // resolve now, before anything is produced
            System.out.println("ready");
            System.out.flush();
            Thread stdin = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) { /* until the harness closes it */ }
                } catch (Exception ignored) {
                    // closed
                }
            });
            stdin.setDaemon(true);
            stdin.start();
            while (stdin.isAlive()) {
                for (ConsumerRecord<String, byte[]> r : c.poll(Duration.ofMillis(20))) {
                    long lag = System.currentTimeMillis() - r.timestamp();
                    if (n == lags.length) lags = Arrays.copyOf(lags, n * 2);
                    lags[n++] = lag;
                }
            }
        }
        long[] s = Arrays.copyOf(lags, n);
        Arrays.sort(s);
        double sum = 0;
        for (long x : s) sum += x;
        System.out.printf("{\"count\": %d, \"p50_ms\": %s, \"p99_ms\": %s, \"max_ms\": %s, \"mean_ms\": %s}%n",
                n, quantile(s, 0.50), quantile(s, 0.99), n == 0 ? "null" : String.valueOf(s[n - 1]),
                n == 0 ? "null" : String.format("%.1f", sum / n));
    }

    /** The nearest-rank quantile of sorted values. */
    static String quantile(long[] sorted, double q) {
        if (sorted.length == 0) return "null";
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return String.valueOf(sorted[Math.max(0, Math.min(sorted.length - 1, i))]);
    }

    static void dump(Map<String, String> o) throws Exception {
        File dir = new File(o.get("dir"));
        dir.mkdirs();
        try (KafkaConsumer<String, byte[]> c = committedReader(o)) {
            for (String col : COLLECTIONS) {
                List<TopicPartition> tps = partitionsOf(c, o.get("output-prefix") + "." + col);
                c.assign(tps);
                c.seekToBeginning(tps);
                Map<TopicPartition, Long> ends = c.endOffsets(tps);  // read_committed: the stable offsets
                Map<String, byte[]> last = new HashMap<>();
                Set<TopicPartition> open = new java.util.HashSet<>(tps);
                long deadline = System.currentTimeMillis() + 300_000;
                while (!open.isEmpty()) {
                    for (ConsumerRecord<String, byte[]> r : c.poll(Duration.ofMillis(200))) {
                        if (r.value() == null) last.remove(r.key()); else last.put(r.key(), r.value());
                    }
                    open.removeIf(tp -> c.position(tp) >= ends.get(tp));
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("dump: timed out");
                }
                File f = new File(dir, col + ".tsv");
                try (BufferedWriter w = new BufferedWriter(new OutputStreamWriter(
                        new FileOutputStream(f), StandardCharsets.UTF_8), 1 << 20)) {
                    for (var e : last.entrySet()) {
                        w.write(e.getKey());
                        w.write('\u0002');
                        w.write(new String(e.getValue(), StandardCharsets.UTF_8));
                        w.write('\n');
                    }
                }
                System.out.println(col + " " + last.size());
            }
        }
    }
}
