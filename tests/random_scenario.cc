#include "tests/random_scenario.h"

#include <map>
#include <random>

namespace denormd {
namespace testing {

namespace {

class Generator {
 public:
  explicit Generator(uint32_t seed) : random_(seed) {}

  RandomScenario Make() {
    RandomScenario out;
    const int type_count = 2 + Pick(3);
    for (int t = 0; t < type_count; ++t) types_.push_back("t" + std::to_string(t));
    out.config = Config();
    const int events = 150 + Pick(150);
    for (int i = 0; i < events; ++i) out.events.push_back(Event());
    const size_t sizes[] = {1, 3, 16, 5000};
    out.batch_size = sizes[Pick(4)];
    return out;
  }

 private:
  int Pick(int n) { return static_cast<int>(random_() % static_cast<uint32_t>(n)); }
  bool Chance(int percent) { return Pick(100) < percent; }
  const std::string& AnyType() { return types_[Pick(static_cast<int>(types_.size()))]; }
  std::string IdOf(const std::string& type) { return type + "_" + std::to_string(Pick(5)); }
  std::string AnyId() { return IdOf(AnyType()); }
  std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

  // --- config

  std::string Config() {
    std::string yaml = "store: {schema: random}\nentities: [";
    for (size_t t = 0; t < types_.size(); ++t) yaml += (t ? ", " : "") + types_[t];
    yaml += "]\nprojections:\n";
    const int projections = 3 + Pick(4);
    for (int p = 0; p < projections; ++p) {
      const int kind = Pick(12);
      if (kind < 6) {
        yaml += EntityProjection("p" + std::to_string(p));
      } else if (kind < 9) {
        yaml += BucketProjection("b" + std::to_string(p));
      } else if (kind < 10) {
        yaml += SharedCollection("c" + std::to_string(p));
      } else {
        yaml += SharedRelation("s" + std::to_string(p));
      }
    }
    return yaml;
  }

  std::string Via() { return Chance(50) ? "r" : "rs"; }

  std::string OrderBy() {
    const char* orders[] = {"n", "-n", "s", "-o.x"};
    return orders[Pick(4)];
  }

  std::string Select() {
    switch (Pick(4)) {
      case 0: return "";
      case 1: return ", select: [id, n, s]";
      case 2: return ", select: [s]";
      default: return ", select: {k: \"{s}-{id}\", v: n, t: \"tags[].b\", c: {value: 1}}";
    }
  }

  std::string Field() {
    const std::string type = AnyType();
    switch (Pick(8)) {
      case 0: return "{count: " + type + ", via: " + Via() + "}";
      case 1:
        return "{ids: " + type + ", via: " + Via() +
               (Chance(50) ? ", limit: " + std::to_string(1 + Pick(3)) : "") + "}";
      case 2:
      case 3:
        return "{embed: " + type + ", via: " + Via() +
               (Chance(70) ? ", order_by: " + OrderBy() : "") +
               (Chance(50) ? ", limit: " + std::to_string(1 + Pick(3)) : "") + Select() + "}";
      case 4:
      case 5:
        return "{lookup: " + type + ", by: " + Via() + Select() + ", missing: " +
               (Chance(50) ? "skip" : "null") + "}";
      case 6: {
        const char* paths[] = {"o.x", "tags[].b", "rs[1]", "\"{s}/{n}\"", "{value: [1, a]}"};
        return paths[Pick(5)];
      }
      default: return Chance(50) ? "s" : Through(type);
    }
  }

  // count, ids, embed or lookup of `type` through link rows of any type (r
  // and rs name the two sides, either way round), in an order and limited.
  std::string Through(const std::string& type) {
    const bool forward = Chance(50);
    const std::string link = ", through: " + AnyType() + ", from: " + (forward ? "r" : "rs") +
                             ", to: " + (forward ? "rs" : "r");
    switch (Pick(4)) {
      case 0: return "{count: " + type + link + "}";
      case 1: return "{ids: " + type + link + LinkOrder() + (Chance(50) ? ", limit: 2" : "") + "}";
      case 2:
        return "{embed: " + type + link + Select() + LinkOrder() +
               (Chance(50) ? ", limit: 2" : "") + "}";
      default:
        if (Chance(50)) return "{lookup: " + type + link + Select() + ", missing: null}";
        return "{lookup: " + type + link + Select() + LinkOrder() +
               (Chance(50) ? ", limit: 2" : "") + ", missing: skip}";
    }
  }

  // Through a link: by id, in an order of the linked entity's fields, or of
  // the link row's.
  std::string LinkOrder() {
    switch (Pick(3)) {
      case 0: return "";
      case 1: return ", order_by: " + OrderBy();
      default: return ", link_order_by: " + OrderBy();
    }
  }

  std::string EntityProjection(const std::string& name) {
    std::string yaml = "  " + name + ":\n    from: " + AnyType() + "\n";
    if (Chance(20)) yaml += "    include: [s, n, r]\n";
    else if (Chance(20)) yaml += "    exclude: [rs, tags]\n";
    yaml += "    fields:\n";
    const int fields = 1 + Pick(4);
    for (int f = 0; f < fields; ++f) yaml += "      f" + std::to_string(f) + ": " + Field() + "\n";
    return yaml;
  }

  std::string BucketProjection(const std::string& name) {
    return "  " + name + ": {buckets: " + AnyType() + ", by: " + (Chance(70) ? "g" : "r") +
           ", size: " + std::to_string(1 + Pick(4)) +
           (Chance(70) ? ", order_by: " + OrderBy() : "") +
           ", layout: " + (Chance(60) ? "stable" : "packed") +
           (Chance(50) ? ", select: [id, n, s]" : "") + "}\n";
  }

  // On purpose, several derivations over one relation (the same type and
  // field) that differ in order_by, limit, select, layout and size: fields
  // of one projection through one `via`, and bucket projections of one
  // group field. Each must keep its own order and members, however the plan
  // shares the relation's index rows between them.
  std::string SharedRelation(const std::string& name) {
    const std::string type = AnyType();
    const std::string via = Via();
    const std::string order = OrderBy();
    const std::string limit = ", limit: " + std::to_string(1 + Pick(3));
    std::string yaml = "  " + name + ":\n    from: " + AnyType() + "\n    fields:\n";
    yaml += "      by_id: {embed: " + type + ", via: " + via + limit + Select() + "}\n";
    yaml += "      ordered: {embed: " + type + ", via: " + via + ", order_by: " + order + limit +
            Select() + "}\n";
    yaml += "      all: {embed: " + type + ", via: " + via + ", order_by: " + order + "}\n";
    yaml += "      ids: {ids: " + type + ", via: " + via + (Chance(50) ? limit : "") + "}\n";
    yaml += "      n: {count: " + type + ", via: " + via + "}\n";
    const std::string by = Chance(70) ? "g" : "r";
    for (int b = 0; b < 2; ++b) {
      yaml += "  " + name + "_b" + std::to_string(b) + ": {buckets: " + type + ", by: " + by +
              ", size: " + std::to_string(1 + Pick(4)) +
              (b == 0 ? ", order_by: " + order : "") +
              ", layout: " + (Chance(60) ? "stable" : "packed") +
              (Chance(50) ? ", select: [id, n, s]" : "") + "}\n";
    }
    return yaml;
  }

  // Two projections of different types in one collection, with a partition
  // key (the types' ids never collide: they start with the type).
  std::string SharedCollection(const std::string& name) {
    const std::string a = AnyType();
    std::string b = AnyType();
    while (b == a) b = AnyType();
    std::string yaml;
    for (const std::string& type : {a, b}) {
      yaml += "  " + name + "_" + type + ":\n    from: " + type + "\n    collection: " + name +
              "\n    partition_key: part\n    fields:\n      kind: {value: " + type +
              "}\n      part: \"{g}\"\n      f: " + Field() + "\n";
    }
    return yaml;
  }

  // --- events

  std::string Number() {
    switch (Pick(8)) {
      case 0: return "1.5";
      case 1: return Quoted("s" + std::to_string(Pick(3)));  // strings order after numbers
      case 2: return "null";
      default: return std::to_string(Pick(6));              // many ties
    }
  }

  std::string Reference() {
    switch (Pick(10)) {
      case 0: return "42";  // not an id
      default: return Quoted(AnyId());
    }
  }

  std::string References() {
    std::string out = "[";
    const int n = Pick(4);
    for (int i = 0; i < n; ++i) out += (i ? ", " : "") + Quoted(AnyId());
    return out + "]";
  }

  std::string Group() {
    switch (Pick(8)) {
      case 0: return "7";  // not a string: in no group
      default: return Quoted("g" + std::to_string(Pick(3)));
    }
  }

  // A data object with a random subset of the fields; for a patch some are
  // null (removed).
  std::string Data(bool patch) {
    std::vector<std::string> members;
    auto add = [&](const char* name, const std::string& value) {
      if (!Chance(patch ? 40 : 75)) return;
      members.push_back(Quoted(name) + ": " + (patch && Chance(20) ? "null" : value));
    };
    add("n", Number());
    add("s", Quoted("v" + std::to_string(Pick(10))));
    add("r", Reference());
    add("rs", References());
    add("g", Group());
    add("o", "{\"x\": " + Number() + "}");
    add("tags", Chance(50) ? "[{\"a\": 1}, {\"b\": \"x" + std::to_string(Pick(3)) + "\"}]" : "[]");
    std::string out = "{";
    for (size_t i = 0; i < members.size(); ++i) out += (i ? ", " : "") + members[i];
    return out + "}";
  }

  std::string Event() {
    const int bad = Pick(100);
    if (bad < 2) return "{\"type\": \"t0\", \"id\": ";  // not JSON
    if (bad < 3) return R"({"type": "nope", "id": "x", "op": "upsert", "data": {}})";
    if (bad < 4) return R"({"type": "t0", "id": "t0_1", "op": "patch"})";
    const std::string type = AnyType();
    const std::string id = IdOf(type);
    std::string version;
    uint64_t& last = versions_[id];
    const int v = Pick(10);
    if (v < 7) {
      last += 1 + Pick(2);
      version = ", \"version\": " + std::to_string(last);
    } else if (v < 8 && last > 0) {
      version = ", \"version\": " + std::to_string(last - Pick(2));  // stale
    }
    const std::string head = "{\"type\": " + Quoted(type) + ", \"id\": " + Quoted(id);
    const int op = Pick(100);
    if (op < 15) return head + ", \"op\": \"delete\"" + version + "}";
    if (op < 35) return head + ", \"op\": \"patch\"" + version + ", \"data\": " + Data(true) + "}";
    return head + ", \"op\": \"upsert\"" + version + ", \"data\": " + Data(false) + "}";
  }

  std::mt19937 random_;
  std::vector<std::string> types_;
  std::map<std::string, uint64_t> versions_;
};

}  // namespace

RandomScenario MakeRandomScenario(uint32_t seed) { return Generator(seed).Make(); }

std::string EventLog(const RandomScenario& scenario) {
  std::string out;
  for (const std::string& event : scenario.events) out += event + "\n";
  return out;
}

}  // namespace testing
}  // namespace denormd
