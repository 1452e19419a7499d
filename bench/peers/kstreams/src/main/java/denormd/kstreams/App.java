package denormd.kstreams;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams peer: bench/config.yaml's four projections from the entity change topic.
 *
 * <p>Input: one topic, keyed "type:id", one JSON event per record (DESIGN.md "Events"). Output:
 * four compacted topics PREFIX.{authors,books,posts,post_comments}, keyed by document id, the
 * documents as JSON (a null value deletes the document).
 *
 * <p>Topology (docs/benchmarks.md has the picture and the reasons):
 *
 * <ul>
 *   <li>entities: one KTable per entity type, an aggregate of that type's events (version
 *       check, RFC 7396 merge patch, tombstones that keep their version), filtered to the live
 *       entities;
 *   <li>authors: the books re-keyed by each of their authors (a diffing processor turns a book's
 *       authorIds changes into link records; links KTable keyed "book|author"), grouped by
 *       author and aggregated into the sorted set of book ids; joined with the live authors;
 *   <li>books: the links KTable foreign-key-joined with the authors' views (name, thumbnail),
 *       re-grouped by book, joined with the live books, the views put in authorIds order;
 *   <li>posts and post_comments: comment changes turned into index changes keyed by post
 *       (comment-index-changes), repartitioned by post into an ordered store (post, createdAt, id): a
 *       processor keeps the count and the three newest (joined with the live posts), another
 *       writes the comments of a post in documents of 100 (packed, rewritten from the first
 *       changed bucket, once per commit interval).
 * </ul>
 */
public final class App {
    static final Serde<String> STR = Serdes.String();
    static final Serde<JsonNode> JSON = Json.serde();
    static final int BUCKET_SIZE = 100;

    public static void main(String[] args) throws Exception {
        Map<String, String> a = Tools.options(args);
        String bootstrap = a.getOrDefault("bootstrap", "127.0.0.1:9092");
        String input = a.get("input");
        String outputPrefix = a.get("output-prefix");
        String appId = a.get("application-id");
        if (input == null || outputPrefix == null || appId == null || a.get("state-dir") == null) {
            System.err.println("usage: App --bootstrap HOST:PORT --input TOPIC --output-prefix PREFIX "
                    + "--application-id ID --state-dir DIR [--threads N] [--commit-interval-ms MS] "
                    + "[--cache-mib MIB] [--rocksdb-mib MIB] [--config key=value,...]");
            System.exit(2);
        }
        long commitMs = Long.parseLong(a.getOrDefault("commit-interval-ms", "100"));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.STATE_DIR_CONFIG, a.get("state-dir"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, commitMs);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG,
                Long.parseLong(a.getOrDefault("cache-mib", "16")) << 20);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(a.getOrDefault("threads", "1")));
        p.put(StreamsConfig.ROCKSDB_CONFIG_SETTER_CLASS_CONFIG, BoundedRocksDB.class);
        p.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // Static membership: a restarted instance takes its place back at once, instead of
        // waiting for the old member's session to time out (Streams does not leave the group on
        // close) and rebalancing.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), appId + "-instance-1");
        // Every hop through an internal topic is a read_committed fetch that, by default, may
        // wait up to 500 ms for data: 20 ms halved the peer's freshness (docs/benchmarks.md), at
        // the same throughput.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG), 20);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Json.JsonSerde.class);
        for (String kv : a.getOrDefault("config", "").split(",")) {  // extra StreamsConfig, k=v,k=v
            if (!kv.isBlank()) p.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
        }
        BoundedRocksDB.totalBytes = Long.parseLong(a.getOrDefault("rocksdb-mib", "64")) << 20;

        Topology topology = topology(input, outputPrefix, commitMs, p);
        if (a.containsKey("describe")) {
            System.out.println(topology.describe());
            return;
        }
        KafkaStreams streams = new KafkaStreams(topology, p);
        CountDownLatch done = new CountDownLatch(1);
        int[] exit = {0};
        streams.setStateListener((now, before) -> {
            // bench/run.py times from the first RUNNING and reads this line
            System.out.println("kstreams_state " + now + " at_ms=" + System.currentTimeMillis());
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) done.countDown();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("kstreams: fatal: " + e);
            e.printStackTrace();
            exit[0] = 1;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        // SIGTERM (bench/run.py's stop) runs the hook: a clean close commits and checkpoints the
        // stores, so the next start restores nothing. The line printed last says it completed.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> stop(streams, exit[0])));
        streams.start();
        control(streams);
        done.await();  // ERROR, or NOT_RUNNING after a close
        stop(streams, exit[0]);
        System.exit(exit[0]);
    }

    /**
     * "pause" and "resume" lines on standard input pause and resume processing (KIP-834):
     * bench/run.py fills the input topic of the next phase while the application is paused,
     * so that the phase is timed from "kstreams_resumed" on a warm JVM.
     */
    private static void control(KafkaStreams streams) {
        Thread t = new Thread(() -> {
            try (var in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null) {
                    switch (line.trim()) {
                        case "pause" -> streams.pause();
                        case "resume" -> streams.resume();
                        default -> { continue; }
                    }
                    System.out.println("kstreams_" + line.trim() + "d at_ms=" + System.currentTimeMillis());
                    System.out.flush();
                }
            } catch (java.io.IOException ignored) {
                // no control input
            }
        }, "control");
        t.setDaemon(true);
        t.start();
    }

    private static boolean stopped;

    private static synchronized void stop(KafkaStreams streams, int exit) {
        if (stopped) return;
        streams.close(Duration.ofSeconds(60));
        System.out.println("kstreams_stopped exit=" + exit);
        System.out.flush();
        stopped = true;
    }

    static Topology topology(String input, String outputPrefix, long punctuateMs, Properties props) {
        StreamsBuilder b = new StreamsBuilder();
        KStream<String, JsonNode> events = b.stream(input, Consumed.with(STR, JSON).withName("events"))
                .filter((k, e) -> Json.validEvent(e), Named.as("valid-events"));

        KTable<String, JsonNode> authors = entities(events, "author");
        KTable<String, JsonNode> books = entities(events, "book");
        KTable<String, JsonNode> posts = entities(events, "post");
        KTable<String, JsonNode> comments = entities(events, "comment");

        // --- the books re-keyed by each of their authors: links "book:b1|author:a1" ---------
        b.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore("book-authorids-seen"), STR, JSON));
        KTable<String, JsonNode> links = books.toStream(Named.as("book-changes"))
                .process(BookLinks::new, Named.as("book-links"), "book-authorids-seen")
                .toTable(Named.as("links"), Materialized.<String, JsonNode, KeyValueStore<Bytes, byte[]>>as("links")
                        .withKeySerde(STR).withValueSerde(JSON));

        // authors: countOfBooks and books (ids ascending)
        KTable<String, JsonNode> booksByAuthor = links
                .groupBy((k, l) -> KeyValue.pair(Json.key("author", l.get("author").asText()),
                                l.get("book")), Grouped.with("links-by-author", STR, JSON))
                .aggregate(Json::arr, (author, book, ids) -> sortedIds(ids, book.asText(), true),
                        (author, book, ids) -> sortedIds(ids, book.asText(), false),
                        Materialized.<String, JsonNode, KeyValueStore<Bytes, byte[]>>as("books-by-author")
                                .withKeySerde(STR).withValueSerde(JSON));
        KTable<String, JsonNode> authorDocs = authors.leftJoin(booksByAuthor, App::authorDoc,
                Named.as("author-docs"));

        // books: authors [{id, name, thumbnailUrl}] through the links (many-to-many FK join)
        KTable<String, JsonNode> authorViews = authors.mapValues(
                a -> (JsonNode) Json.authorView(a.get("id").asText(), a), Named.as("author-views"));
        KTable<String, JsonNode> linkViews = links.join(authorViews,
                l -> Json.key("author", l.get("author").asText()),
                (l, view) -> {
                    ObjectNode v = Json.obj();
                    v.set("book", l.get("book"));
                    v.set("author", l.get("author"));
                    v.set("view", view);
                    return (JsonNode) v;
                },
                TableJoined.as("link-author-lookup"),
                Materialized.<String, JsonNode, KeyValueStore<Bytes, byte[]>>as("link-views")
                        .withKeySerde(STR).withValueSerde(JSON));
        KTable<String, JsonNode> authorViewsByBook = linkViews
                .groupBy((k, v) -> KeyValue.pair(Json.key("book", v.get("book").asText()), v),
                        Grouped.with("link-views-by-book", STR, JSON))
                .aggregate(Json::obj,
                        (book, v, m) -> {
                            ObjectNode next = ((ObjectNode) m).deepCopy();  // never the old value itself
                            next.set(v.get("author").asText(), v.get("view"));
                            return next;
                        },
                        (book, v, m) -> {
                            ObjectNode next = ((ObjectNode) m).deepCopy();
                            next.remove(v.get("author").asText());
                            return next;
                        },
                        Materialized.<String, JsonNode, KeyValueStore<Bytes, byte[]>>as("author-views-by-book")
                                .withKeySerde(STR).withValueSerde(JSON));
        KTable<String, JsonNode> bookDocs = books.leftJoin(authorViewsByBook, App::bookDoc,
                Named.as("book-docs"));

        // --- comments, indexed by post: (post, createdAt, id) -> item ------------------------
        b.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore("comment-index-seen"), STR, JSON));
        b.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore("comment-index"), STR, Serdes.ByteArray()));
        b.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore("post-comment-counts"), STR, Serdes.Long()).withCachingEnabled());
        b.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore("post-buckets-dirty"), STR, JSON));
        b.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore("post-bucket-counts"), STR, Serdes.Long()).withCachingEnabled());
        KStream<String, JsonNode> indexChanges = comments.toStream(Named.as("comment-changes"))
                .process(CommentIndexChanges::new, Named.as("comment-index-changes"), "comment-index-seen")
                .repartition(Repartitioned.<String, JsonNode>as("comment-index-changes-by-post")
                        .withKeySerde(STR).withValueSerde(JSON));

        // posts: recentComments (3 newest) and countOfComments
        KTable<String, JsonNode> postSummaries = indexChanges
                .processValues(PostIndex::new, Named.as("post-index"), "comment-index", "post-comment-counts")
                .toTable(Named.as("post-summaries"),
                        Materialized.<String, JsonNode, KeyValueStore<Bytes, byte[]>>as("post-summaries")
                                .withKeySerde(STR).withValueSerde(JSON));
        KTable<String, JsonNode> postDocs = posts.leftJoin(postSummaries, App::postDoc, Named.as("post-docs"));

        // post_comments: documents of 100, packed
        indexChanges
                .process(() -> new PostBuckets(punctuateMs), Named.as("post-buckets"),
                        "comment-index", "post-buckets-dirty", "post-bucket-counts")
                .to(outputPrefix + ".post_comments", Produced.with(STR, STR).withName("out-post_comments"));

        output(authorDocs, outputPrefix + ".authors", "authors");
        output(bookDocs, outputPrefix + ".books", "books");
        output(postDocs, outputPrefix + ".posts", "posts");
        return b.build(props);
    }

    /**
     * The live entities of one type, as their data plus "id": an aggregate of the type's events
     * (the stored state with version and tombstone), tombstoned downstream when not live.
     */
    static KTable<String, JsonNode> entities(KStream<String, JsonNode> events, String type) {
        return events
                .filter((k, e) -> type.equals(e.get("type").asText()), Named.as(type + "-events"))
                .groupByKey(Grouped.with(type + "-events", STR, JSON))
                .aggregate(Json::obj, (k, e, state) -> Json.applyEvent(state, e),
                        Named.as(type + "-aggregate"),
                        Materialized.<String, JsonNode, KeyValueStore<Bytes, byte[]>>as(type + "-entities")
                                .withKeySerde(STR).withValueSerde(JSON))
                .filter((k, s) -> Json.live(s) != null, Named.as("live-" + type))
                .mapValues((k, s) -> {  // the live data plus "id": the start of every document
                    ObjectNode doc = ((ObjectNode) Json.live(s)).deepCopy();
                    doc.put("id", Json.idOf(k));
                    return (JsonNode) doc;
                }, Named.as(type + "-documents"));
    }

    static void output(KTable<String, JsonNode> docs, String topic, String name) {
        docs.toStream(Named.as(name + "-changes"))
                .selectKey((k, v) -> Json.idOf(k), Named.as(name + "-by-id"))
                .to(topic, Produced.with(STR, JSON).withName("out-" + name));
    }

    // ------------------------------------------------------------------
    // Documents
    // ------------------------------------------------------------------

    static JsonNode authorDoc(JsonNode author, JsonNode bookIds) {
        ObjectNode doc = author.deepCopy();
        ArrayNode ids = bookIds == null ? Json.arr() : (ArrayNode) bookIds;
        doc.put("countOfBooks", ids.size());
        doc.set("books", ids);
        return doc;
    }

    static JsonNode bookDoc(JsonNode book, JsonNode views) {
        ObjectNode doc = book.deepCopy();
        JsonNode ref = doc.get("authorIds");
        if (ref == null) {
            doc.remove("authors");  // no reference: the derived field is left out
            return doc;
        }
        JsonNode byAuthor = views == null ? Json.obj() : views;
        if (ref.isArray()) {
            ArrayNode out = Json.arr();
            for (JsonNode e : ref) {  // the array's order; a missing author is skipped
                if (e.isTextual() && byAuthor.has(e.asText())) out.add(byAuthor.get(e.asText()));
            }
            doc.set("authors", out);
        } else if (ref.isTextual() && byAuthor.has(ref.asText())) {
            doc.set("authors", byAuthor.get(ref.asText()));
        } else {
            doc.putNull("authors");  // a single reference whose target is missing
        }
        return doc;
    }

    static JsonNode postDoc(JsonNode post, JsonNode summary) {
        ObjectNode doc = post.deepCopy();
        doc.set("recentComments", summary == null ? Json.arr() : summary.get("recent"));
        doc.put("countOfComments", summary == null ? 0 : summary.get("count").asLong());
        return doc;
    }

    /**
     * Adds or removes id in a sorted array of ids (byte order), by binary search, in a copy: an
     * aggregator must not change the old value, which Streams forwards beside the new one.
     */
    static JsonNode sortedIds(JsonNode ids, String id, boolean add) {
        ArrayNode a = ((ArrayNode) ids).deepCopy();
        int lo = 0, hi = a.size() - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            int c = Json.compareBytes(a.get(mid).asText(), id);
            if (c == 0) {
                if (!add) a.remove(mid);
                return a;
            }
            if (c < 0) lo = mid + 1; else hi = mid - 1;
        }
        if (add) a.insert(lo, id);
        return a;
    }

    // ------------------------------------------------------------------
    // Processors
    // ------------------------------------------------------------------

    /**
     * Books re-keyed by each of their authors. A KTable's change stream carries only the new
     * value, so this keeps the authorIds it last saw per book and emits the difference: a link
     * record "book:b1|author:a1" -> {book, author} for each author gained, a tombstone for each
     * author lost.
     */
    static final class BookLinks implements Processor<String, JsonNode, String, JsonNode> {
        private ProcessorContext<String, JsonNode> ctx;
        private KeyValueStore<String, JsonNode> seen;

        @Override
        public void init(ProcessorContext<String, JsonNode> context) {
            ctx = context;
            seen = context.getStateStore("book-authorids-seen");
        }

        @Override
        public void process(Record<String, JsonNode> r) {
            JsonNode data = r.value();
            List<String> now = data == null ? List.of() : Json.referenceTargets(data.get("authorIds"));
            List<String> before = new ArrayList<>();
            JsonNode old = seen.get(r.key());
            if (old != null) old.forEach(e -> before.add(e.asText()));
            if (now.equals(before)) return;
            String book = Json.idOf(r.key());
            for (String author : before) {
                if (!now.contains(author)) ctx.forward(r.withKey(r.key() + "|" + author).withValue(null));
            }
            for (String author : now) {
                if (!before.contains(author)) {
                    ObjectNode link = Json.obj();
                    link.put("book", book);
                    link.put("author", author);
                    ctx.forward(r.withKey(r.key() + "|" + author).withValue(link));
                }
            }
            if (now.isEmpty()) {
                seen.delete(r.key());
            } else {
                ArrayNode a = Json.arr();
                now.forEach(a::add);
                seen.put(r.key(), a);
            }
        }
    }

    /**
     * Comments turned into changes of the per-post index, keyed by post: {"op": "put", "k":
     * sort key + id, "item": {...}} or {"op": "del", "k": ...}. Like BookLinks it keeps what it
     * last emitted per comment (post, index key, item), so a move between posts removes the
     * comment from the old post and adds it to the new one. Only string postIds group.
     */
    static final class CommentIndexChanges implements Processor<String, JsonNode, String, JsonNode> {
        private ProcessorContext<String, JsonNode> ctx;
        private KeyValueStore<String, JsonNode> seen;

        @Override
        public void init(ProcessorContext<String, JsonNode> context) {
            ctx = context;
            seen = context.getStateStore("comment-index-seen");
        }

        @Override
        public void process(Record<String, JsonNode> r) {
            JsonNode data = r.value();
            String id = Json.idOf(r.key());
            ObjectNode now = null;
            if (data != null && data.path("postId").isTextual()) {
                now = Json.obj();
                now.put("post", data.get("postId").asText());
                now.put("k", Json.sortKey(data.get("createdAt")) + id);
                now.set("item", Json.commentItem(id, data));
            }
            JsonNode old = seen.get(r.key());
            if (now == null ? old == null : now.equals(old)) return;
            if (old != null && (now == null || !old.get("post").equals(now.get("post"))
                    || !old.get("k").equals(now.get("k")))) {
                ObjectNode del = Json.obj();
                del.put("op", "del");
                del.set("k", old.get("k"));
                ctx.forward(r.withKey(Json.key("post", old.get("post").asText())).withValue(del));
            }
            if (now != null) {
                ObjectNode put = Json.obj();
                put.put("op", "put");
                put.set("k", now.get("k"));
                put.set("item", now.get("item"));
                ctx.forward(r.withKey(Json.key("post", now.get("post").asText())).withValue(put));
                seen.put(r.key(), now);
            } else {
                seen.delete(r.key());
            }
        }
    }

    static String indexPrefix(String postKey) {
        return postKey + "\0";
    }

    /**
     * The per-post comment index ("post:p1\0" + sort key + id -> item, RocksDB's byte order),
     * the comment count, and per change the post's summary: {"count", "recent": 3 newest}.
     */
    static final class PostIndex implements FixedKeyProcessor<String, JsonNode, JsonNode> {
        private FixedKeyProcessorContext<String, JsonNode> ctx;
        private KeyValueStore<String, byte[]> index;  // items as JSON bytes, parsed when read
        private KeyValueStore<String, Long> counts;

        @Override
        public void init(FixedKeyProcessorContext<String, JsonNode> context) {
            ctx = context;
            index = context.getStateStore("comment-index");
            counts = context.getStateStore("post-comment-counts");
        }

        @Override
        public void process(FixedKeyRecord<String, JsonNode> r) {
            String key = indexPrefix(r.key()) + r.value().get("k").asText();
            Long count = counts.get(r.key());
            long n = count == null ? 0 : count;
            boolean existed = index.get(key) != null;
            if (r.value().get("op").asText().equals("put")) {
                index.put(key, Json.bytes(r.value().get("item")));
                if (!existed) n++;
            } else if (existed) {
                index.delete(key);
                n--;
            }
            if (n == 0) counts.delete(r.key()); else counts.put(r.key(), n);
            ObjectNode summary = Json.obj();
            summary.put("count", n);
            summary.set("recent", recent(r.key(), 3));
            ctx.forward(r.withValue(summary));
        }

        /** The `limit` newest: createdAt descending, absent last, ties by id ascending. */
        private ArrayNode recent(String postKey, int limit) {
            String prefix = indexPrefix(postKey);
            List<List<byte[]>> runs = new ArrayList<>();  // runs of equal createdAt, newest first
            int taken = 0;
            String runKey = null;
            try (KeyValueIterator<String, byte[]> it = index.reverseRange(prefix, prefix + "5")) {
                while (it.hasNext()) {
                    KeyValue<String, byte[]> kv = it.next();
                    if (kv.value == null) continue;
                    int start = prefix.length();
                    String sk = kv.key.substring(start, start + Json.sortKeyLength(kv.key, start));
                    if (!sk.equals(runKey)) {
                        if (taken >= limit) break;
                        runs.add(new ArrayList<>());
                        runKey = sk;
                    }
                    runs.get(runs.size() - 1).add(kv.value);
                    taken++;
                }
            }
            ArrayNode out = Json.arr();
            for (List<byte[]> run : runs) {
                for (int i = run.size() - 1; i >= 0 && out.size() < limit; i--) out.add(Json.parse(run.get(i)));
            }
            if (out.size() < limit) {
                try (KeyValueIterator<String, byte[]> it = index.range(prefix + "5", prefix + "6")) {
                    while (it.hasNext() && out.size() < limit) {
                        byte[] v = it.next().value;
                        if (v != null) out.add(Json.parse(v));
                    }
                }
            }
            return out;
        }
    }

    /**
     * post_comments: each post's comments, oldest first, in documents of 100, packed (document n
     * holds members 100n..100n+99). A change marks its post dirty from its index key on; once per
     * commit interval the dirty posts' documents are rewritten from the first changed one, and
     * those past the new end deleted. The dirty marks are a (changelogged) store, so a crash
     * between a change and its rewrite loses nothing.
     */
    static final class PostBuckets implements Processor<String, JsonNode, String, String> {
        private final long intervalMs;
        private ProcessorContext<String, String> ctx;
        private KeyValueStore<String, byte[]> index;
        private KeyValueStore<String, JsonNode> dirty;
        private KeyValueStore<String, Long> bucketCounts;

        PostBuckets(long intervalMs) {
            this.intervalMs = intervalMs;
        }

        @Override
        public void init(ProcessorContext<String, String> context) {
            ctx = context;
            index = context.getStateStore("comment-index");
            dirty = context.getStateStore("post-buckets-dirty");
            bucketCounts = context.getStateStore("post-bucket-counts");
            context.schedule(Duration.ofMillis(intervalMs), PunctuationType.WALL_CLOCK_TIME, t -> flush());
        }

        @Override
        public void process(Record<String, JsonNode> r) {
            String k = r.value().get("k").asText();
            JsonNode d = dirty.get(r.key());
            String from = d != null && Json.compareBytes(d.get("k").asText(), k) < 0 ? d.get("k").asText() : k;
            long ts = Math.max(r.timestamp(), d == null ? Long.MIN_VALUE : d.get("ts").asLong());
            if (d != null && d.get("k").asText().equals(from) && d.get("ts").asLong() == ts) return;
            ObjectNode mark = Json.obj();
            mark.put("k", from);
            mark.put("ts", ts);
            dirty.put(r.key(), mark);
        }

        private void flush() {
            List<KeyValue<String, JsonNode>> marks = new ArrayList<>();
            try (KeyValueIterator<String, JsonNode> it = dirty.all()) {
                it.forEachRemaining(marks::add);
            }
            for (KeyValue<String, JsonNode> m : marks) {
                rewrite(m.key, indexPrefix(m.key) + m.value.get("k").asText(), m.value.get("ts").asLong());
                dirty.delete(m.key);
            }
        }

        /** One pass over the post's members in order; documents from the one holding fromKey on. */
        private void rewrite(String postKey, String fromKey, long ts) {
            String post = Json.idOf(postKey);
            long rank = 0;
            boolean changed = false;
            List<byte[]> bucket = new ArrayList<>(BUCKET_SIZE);
            try (KeyValueIterator<String, byte[]> it =
                         index.prefixScan(indexPrefix(postKey), new StringSerializer())) {
                while (it.hasNext()) {
                    KeyValue<String, byte[]> kv = it.next();
                    if (kv.value == null) continue;
                    if (rank % BUCKET_SIZE == 0) bucket.clear();
                    if (!changed && Json.compareBytes(kv.key, fromKey) >= 0) changed = true;  // the store's byte order
                    bucket.add(kv.value);
                    rank++;
                    if (changed && rank % BUCKET_SIZE == 0) emit(post, rank / BUCKET_SIZE - 1, bucket, ts);
                }
            }
            // The last, partial document: written always (a removal past every member lands there).
            if (rank % BUCKET_SIZE != 0) emit(post, rank / BUCKET_SIZE, bucket, ts);
            long n = (rank + BUCKET_SIZE - 1) / BUCKET_SIZE;
            Long old = bucketCounts.get(postKey);
            for (long i = n; old != null && i < old; i++) {
                ctx.forward(new Record<>(post + ":" + i, null, ts));
            }
            if (n == 0) bucketCounts.delete(postKey); else bucketCounts.put(postKey, n);
        }

        /** The document as JSON text, the stored items spliced in as they are (not re-parsed). */
        private void emit(String post, long n, List<byte[]> items, long ts) {
            StringBuilder doc = new StringBuilder(64 + items.size() * 96);
            doc.append("{\"id\":").append(Json.quote(post + ":" + n))
                    .append(",\"postId\":").append(Json.quote(post))
                    .append(",\"seq\":").append(n).append(",\"comments\":[");
            for (int i = 0; i < items.size(); i++) {
                if (i > 0) doc.append(',');
                doc.append(new String(items.get(i), java.nio.charset.StandardCharsets.UTF_8));
            }
            doc.append("]}");
            ctx.forward(new Record<>(post + ":" + n, doc.toString(), ts));
        }
    }
}
