package denormd.kstreams;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.Map;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;

/** JSON values (Jackson trees), the event rules of DESIGN.md, and the derivations' helpers. */
final class Json {
    static final ObjectMapper MAPPER = new ObjectMapper();
    static final JsonNodeFactory F = JsonNodeFactory.instance;

    private Json() {}

    /** A serde of JSON trees; bytes that are not JSON deserialize to null (dropped by the DSL). */
    static Serde<JsonNode> serde() {
        Serializer<JsonNode> ser = (topic, node) -> {
            if (node == null) return null;
            try {
                return MAPPER.writeValueAsBytes(node);
            } catch (JsonProcessingException e) {
                throw new IllegalStateException(e);
            }
        };
        Deserializer<JsonNode> de = (topic, bytes) -> {
            if (bytes == null) return null;
            try {
                return MAPPER.readTree(bytes);
            } catch (IOException e) {
                return null;
            }
        };
        return Serdes.serdeFrom(ser, de);
    }

    /** The serde as a class, for StreamsConfig's default value serde. */
    public static final class JsonSerde implements Serde<JsonNode> {
        private final Serde<JsonNode> inner = serde();

        @Override
        public Serializer<JsonNode> serializer() {
            return inner.serializer();
        }

        @Override
        public Deserializer<JsonNode> deserializer() {
            return inner.deserializer();
        }
    }

    static byte[] bytes(JsonNode node) {
        try {
            return MAPPER.writeValueAsBytes(node);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    static JsonNode parse(byte[] bytes) {
        try {
            return MAPPER.readTree(bytes);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A JSON string literal. */
    static String quote(String s) {
        return F.textNode(s).toString();
    }

    static ObjectNode obj() {
        return F.objectNode();
    }

    static ArrayNode arr() {
        return F.arrayNode();
    }

    // ------------------------------------------------------------------
    // Events: {"type", "id", "op": upsert|patch|delete, "version"?, "data"?}
    // ------------------------------------------------------------------

    /** True when the event is well formed for one of the given types (bad events are skipped:
     * denormd sends them to dead_letters; the benchmark's workload has none). */
    static boolean validEvent(JsonNode e) {
        if (e == null || !e.isObject()) return false;
        JsonNode type = e.get("type"), id = e.get("id"), op = e.get("op"), v = e.get("version");
        if (type == null || !type.isTextual() || id == null || !id.isTextual() || id.asText().isEmpty()) {
            return false;
        }
        if (op == null || !op.isTextual()) return false;
        String o = op.asText();
        if (!o.equals("upsert") && !o.equals("patch") && !o.equals("delete")) return false;
        if (!o.equals("delete") && (e.get("data") == null || !e.get("data").isObject())) return false;
        if (v != null && !v.isNull()) {
            if (!v.isIntegralNumber() || v.bigIntegerValue().signum() < 0
                    || v.bigIntegerValue().bitLength() > 64) {
                return false;
            }
        }
        return true;
    }

    /**
     * The entity's stored state after an event: {"v": version (absent if never given), "x": true
     * when deleted (a tombstone keeping its version), "d": data}. An event whose version is not
     * greater than the stored one is stale: the state is returned unchanged (the same object).
     */
    static JsonNode applyEvent(JsonNode state, JsonNode event) {
        JsonNode stored = state == null ? null : state.get("v");
        JsonNode version = event.get("version");
        boolean hasVersion = version != null && !version.isNull();
        if (hasVersion && stored != null
                && version.bigIntegerValue().compareTo(stored.bigIntegerValue()) <= 0) {
            return state;  // stale: duplicate or out of order
        }
        ObjectNode next = obj();
        if (hasVersion) {
            next.set("v", F.numberNode(version.bigIntegerValue()));
        } else if (stored != null) {
            next.set("v", stored);
        }
        switch (event.get("op").asText()) {
            case "delete" -> next.put("x", true);
            case "upsert" -> next.set("d", event.get("data"));
            default -> { // patch: RFC 7396 onto the live data, or onto {} when absent or deleted
                JsonNode live = live(state);
                next.set("d", mergePatch(live == null ? obj() : live.deepCopy(), event.get("data")));
            }
        }
        return next;
    }

    /** The live data of a stored state, or null (absent or deleted). */
    static JsonNode live(JsonNode state) {
        if (state == null || state.path("x").asBoolean(false)) return null;
        JsonNode d = state.get("d");
        return d == null || d.isNull() ? null : d;
    }

    /** RFC 7396 JSON merge patch. */
    static JsonNode mergePatch(JsonNode target, JsonNode patch) {
        if (!patch.isObject()) return patch;
        ObjectNode t = target != null && target.isObject() ? (ObjectNode) target : obj();
        Iterator<Map.Entry<String, JsonNode>> it = patch.fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> f = it.next();
            if (f.getValue().isNull()) {
                t.remove(f.getKey());
            } else if (f.getValue().isObject()) {
                t.set(f.getKey(), mergePatch(t.get(f.getKey()), f.getValue()));
            } else {
                t.set(f.getKey(), f.getValue());
            }
        }
        return t;
    }

    // ------------------------------------------------------------------
    // Keys: the input topic is keyed "type:id"; documents are keyed by id.
    // ------------------------------------------------------------------

    static String key(String type, String id) {
        return type + ":" + id;
    }

    static String idOf(String key) {
        return key.substring(key.indexOf(':') + 1);
    }

    // ------------------------------------------------------------------
    // Derivations of bench/config.yaml
    // ------------------------------------------------------------------

    /** A {template} part: strings as they are, null or missing as "", other values as JSON. */
    static String templatePart(JsonNode v) {
        if (v == null || v.isNull() || v.isMissingNode()) return "";
        if (v.isTextual()) return v.asText();
        return v.toString();
    }

    /** books.authors[i]: {id, name: "{firstName} {lastName}", thumbnailUrl: images[].thumbnail}. */
    static ObjectNode authorView(String id, JsonNode data) {
        ObjectNode v = obj();
        v.put("id", id);
        v.put("name", templatePart(data.get("firstName")) + " " + templatePart(data.get("lastName")));
        JsonNode images = data.get("images");
        if (images != null && images.isArray()) {
            for (JsonNode im : images) {
                if (im.isObject() && im.has("thumbnail")) {
                    v.set("thumbnailUrl", im.get("thumbnail"));
                    break;
                }
            }
        }
        return v;
    }

    /** recentComments[i] and post_comments items: select [id, author, comment]. */
    static ObjectNode commentItem(String id, JsonNode data) {
        ObjectNode v = obj();
        v.put("id", id);
        if (data.has("author")) v.set("author", data.get("author"));
        if (data.has("comment")) v.set("comment", data.get("comment"));
        return v;
    }

    /** The ids a reference field names: a string, or the distinct strings of an array, in order. */
    static java.util.List<String> referenceTargets(JsonNode v) {
        java.util.List<String> out = new java.util.ArrayList<>();
        if (v == null) return out;
        if (v.isTextual()) {
            out.add(v.asText());
        } else if (v.isArray()) {
            for (JsonNode e : v) {
                if (e.isTextual() && !out.contains(e.asText())) out.add(e.asText());
            }
        }
        return out;
    }

    /**
     * A byte-ordered sort key for order_by on a JSON value, as denormd orders: numbers
     * numerically, then strings by bytes, then booleans, arrays, objects (by JSON text); absent
     * or null last. Prefix-free (fixed width or NUL-terminated), so "key \0 id" orders ties by id.
     */
    static String sortKey(JsonNode v) {
        if (v == null || v.isNull() || v.isMissingNode()) return "5";
        if (v.isNumber()) {
            long bits = Double.doubleToLongBits(v.asDouble());
            bits = bits < 0 ? ~bits : bits ^ Long.MIN_VALUE;  // IEEE 754 to unsigned order
            return "0" + String.format("%016x", bits);
        }
        if (v.isTextual()) return "1" + v.asText() + "\0";
        if (v.isBoolean()) return "2" + (v.asBoolean() ? "1" : "0");
        return (v.isArray() ? "3" : "4") + v.toString() + "\0";
    }

    /** The length of the sort key (see sortKey) that starts at s[from]. */
    static int sortKeyLength(String s, int from) {
        return switch (s.charAt(from)) {
            case '0' -> 17;
            case '2' -> 2;
            case '5' -> 1;
            default -> s.indexOf('\0', from) - from + 1;  // strings, arrays, objects: NUL-terminated
        };
    }

    /** Byte-wise (UTF-8) string order, as denormd orders ids ("C" collation): UTF-8 orders
     * like code points, so compare those (no encoding, no allocation). */
    static int compareBytes(String a, String b) {
        int i = 0, j = 0;
        while (i < a.length() && j < b.length()) {
            int x = a.codePointAt(i), y = b.codePointAt(j);
            if (x != y) return Integer.compare(x, y);
            i += Character.charCount(x);
            j += Character.charCount(y);
        }
        return Integer.compare(a.length() - i, b.length() - j);
    }
}
