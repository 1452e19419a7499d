#include "tests/link_scenario.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>

namespace denormd {
namespace testing {

namespace {

constexpr const char* kConfig = R"(store: {schema: links}
entities: [author, book, book_author]
projections:
  authors:
    from: author
    fields:
      countOfBooks: {count: book, through: book_author, from: author_id, to: book_id}
      books: {ids: book, through: book_author, from: author_id, to: book_id}
      firstBooks: {ids: book, through: book_author, from: author_id, to: book_id, limit: 2}
      newestBooks: {ids: book, through: book_author, from: author_id, to: book_id, order_by: -title, limit: 2}
  books:
    from: book
    fields:
      authors:
        lookup: author
        through: book_author
        from: book_id
        to: author_id
        select: {id: id, name: name}
      authorSlots: {lookup: author, through: book_author, from: book_id, to: author_id, select: [name], missing: null}
      countOfAuthors: {count: author, through: book_author, from: book_id, to: author_id}
      firstAuthors: {embed: author, through: book_author, from: book_id, to: author_id, link_order_by: since, limit: 2, select: [name]}
)";

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// One event, as the oracle applies it and as the stream carries it.
struct Event {
  std::string type;
  std::string id;
  std::string op;  // upsert, patch, delete
  std::optional<uint64_t> version;
  std::map<std::string, std::string> data;  // field -> JSON text ("null" in a patch removes)

  std::string Json() const {
    std::string out = "{\"type\": " + Quoted(type) + ", \"id\": " + Quoted(id) +
                      ", \"op\": " + Quoted(op);
    if (version) out += ", \"version\": " + std::to_string(*version);
    if (op != "delete") {
      out += ", \"data\": {";
      bool first = true;
      for (const auto& field : data) {
        out += (first ? "" : ", ") + Quoted(field.first) + ": " + field.second;
        first = false;
      }
      out += "}";
    }
    return out + "}";
  }
};

// The contract's source model: per entity, the version rule, upsert, merge
// patch (flat) and tombstones.
struct State {
  std::optional<uint64_t> version;
  bool live = false;
  std::map<std::string, std::string> data;
};

class Oracle {
 public:
  // Applies `event`; false when it is stale.
  bool Apply(const Event& event) {
    auto found = states_.find({event.type, event.id});
    if (event.version && found != states_.end() && found->second.version &&
        *event.version <= *found->second.version) {
      return false;
    }
    State& state = states_[{event.type, event.id}];
    if (event.version) state.version = event.version;
    if (event.op == "delete") {
      state.live = false;
      state.data.clear();
    } else if (event.op == "upsert") {
      state.live = true;
      state.data = event.data;
    } else {
      if (!state.live) state.data.clear();
      state.live = true;
      for (const auto& field : event.data) {
        if (field.second == "null") {
          state.data.erase(field.first);
        } else {
          state.data[field.first] = field.second;
        }
      }
    }
    return true;
  }

  const State* Find(const std::string& type, const std::string& id) const {
    auto it = states_.find({type, id});
    return it == states_.end() ? nullptr : &it->second;
  }
  bool Live(const std::string& type, const std::string& id) const {
    const State* state = Find(type, id);
    return state != nullptr && state->live;
  }

  // Ids of `other_field` of the live link rows whose `field` is the string `id`
  // (ascending, unique); the rows that link one pair twice counted in *twice.
  std::vector<std::string> Linked(const std::string& field, const std::string& id,
                                  const std::string& other_field, bool* twice = nullptr) const {
    std::multiset<std::string> found;
    for (const auto& entry : states_) {
      if (entry.first.first != "book_author" || !entry.second.live) continue;
      const auto& data = entry.second.data;
      auto self = data.find(field), other = data.find(other_field);
      if (self == data.end() || other == data.end() || self->second != Quoted(id)) continue;
      if (other->second.empty() || other->second[0] != '"') continue;  // not a string
      found.insert(other->second.substr(1, other->second.size() - 2));
    }
    std::vector<std::string> out;
    for (const std::string& value : found) {
      if (!out.empty() && out.back() == value) {
        if (twice != nullptr) *twice = true;
      } else {
        out.push_back(value);
      }
    }
    return out;
  }

  // The least value of `order_field` (a number) among the live link rows
  // pairing `id` in `field` with each id in `other_field`; none when absent.
  std::map<std::string, std::optional<long>> FirstLinkValue(const std::string& field,
                                                            const std::string& id,
                                                            const std::string& other_field,
                                                            const std::string& order_field) const {
    std::map<std::string, std::optional<long>> out;
    for (const auto& entry : states_) {
      if (entry.first.first != "book_author" || !entry.second.live) continue;
      const auto& data = entry.second.data;
      auto self = data.find(field), other = data.find(other_field);
      if (self == data.end() || other == data.end() || self->second != Quoted(id)) continue;
      if (other->second.empty() || other->second[0] != '"') continue;
      const std::string linked = other->second.substr(1, other->second.size() - 2);
      std::optional<long> value;
      auto at = data.find(order_field);
      if (at != data.end() && at->second != "null") value = std::stol(at->second);
      auto known = out.find(linked);
      if (known == out.end()) {
        out[linked] = value;
      } else if (value && (!known->second || *value < *known->second)) {
        known->second = value;
      }
    }
    return out;
  }

  Collections Documents(bool* duplicate_pair) const {
    Collections out;
    out["authors"];
    out["books"];
    for (const auto& entry : states_) {
      const std::string& type = entry.first.first;
      const std::string& id = entry.first.second;
      if (!entry.second.live || (type != "author" && type != "book")) continue;
      std::string doc = "{";
      for (const auto& field : entry.second.data) {
        doc += Quoted(field.first) + ": " + field.second + ", ";
      }
      doc += "\"id\": " + Quoted(id);
      if (type == "author") {
        std::vector<std::string> books;
        for (const std::string& book : Linked("author_id", id, "book_id", duplicate_pair)) {
          if (Live("book", book)) books.push_back(book);
        }
        doc += ", \"countOfBooks\": " + std::to_string(books.size());
        doc += ", \"books\": " + IdArray(books, books.size());
        doc += ", \"firstBooks\": " + IdArray(books, 2);
        // By title, descending (present before absent), ties by id.
        std::vector<std::pair<std::string, std::string>> titled;  // (title JSON, id)
        for (const std::string& book : books) {
          auto title = Find("book", book)->data.find("title");
          titled.push_back({title == Find("book", book)->data.end() ? "" : title->second, book});
        }
        std::stable_sort(titled.begin(), titled.end(), [](const auto& a, const auto& b) {
          if (a.first.empty() != b.first.empty()) return !a.first.empty();
          if (a.first != b.first) return a.first > b.first;
          return a.second < b.second;
        });
        std::vector<std::string> newest;
        for (const auto& entry : titled) newest.push_back(entry.second);
        doc += ", \"newestBooks\": " + IdArray(newest, 2);
        out["authors"][id] = doc + "}";
      } else {
        std::string authors = "[", slots = "[";
        size_t live = 0;
        for (const std::string& author : Linked("book_id", id, "author_id", duplicate_pair)) {
          const State* state = Find("author", author);
          if (state == nullptr || !state->live) {
            slots += std::string(slots.size() > 1 ? ", " : "") + "null";
            continue;
          }
          ++live;
          auto name = state->data.find("name");
          const std::string named = name == state->data.end() ? "" : "\"name\": " + name->second;
          authors += std::string(authors.size() > 1 ? ", " : "") + "{\"id\": " + Quoted(author) +
                     (named.empty() ? "" : ", " + named) + "}";
          slots += std::string(slots.size() > 1 ? ", " : "") + "{" + named + "}";
        }
        doc += ", \"authors\": " + authors + "], \"authorSlots\": " + slots + "]";
        doc += ", \"countOfAuthors\": " + std::to_string(live);
        // The live authors by their first link row's `since` (present
        // before absent), ties by id; the first 2, as {name}.
        std::vector<std::pair<std::optional<long>, std::string>> ranked;
        for (const auto& entry : FirstLinkValue("book_id", id, "author_id", "since")) {
          if (Live("author", entry.first)) ranked.push_back({entry.second, entry.first});
        }
        std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
          if (a.first.has_value() != b.first.has_value()) return a.first.has_value();
          if (a.first && *a.first != *b.first) return *a.first < *b.first;
          return a.second < b.second;
        });
        std::string first = "[";
        for (size_t i = 0; i < ranked.size() && i < 2; ++i) {
          auto name = Find("author", ranked[i].second)->data.find("name");
          first += std::string(i ? ", " : "") + "{" +
                   (name == Find("author", ranked[i].second)->data.end()
                        ? ""
                        : "\"name\": " + name->second) +
                   "}";
        }
        doc += ", \"firstAuthors\": " + first + "]";
        out["books"][id] = doc + "}";
      }
    }
    return out;
  }

 private:
  static std::string IdArray(const std::vector<std::string>& ids, size_t limit) {
    std::string out = "[";
    for (size_t i = 0; i < ids.size() && i < limit; ++i) out += (i ? ", " : "") + Quoted(ids[i]);
    return out + "]";
  }

  std::map<std::pair<std::string, std::string>, State> states_;
};

class Generator {
 public:
  explicit Generator(uint32_t seed) : random_(seed) {}

  LinkScenario Make() {
    LinkScenario out;
    out.config = kConfig;
    // The history as each entity's source would emit it, in order...
    std::vector<Event> history;
    const int count = 250 + Pick(150);
    for (int i = 0; i < count; ++i) history.push_back(Next());
    // ...delivered with neighbours swapped, duplicates and stale replays.
    std::vector<Event> stream;
    for (size_t i = 0; i < history.size(); ++i) {
      if (i + 1 < history.size() && Chance(12)) std::swap(history[i], history[i + 1]);
      stream.push_back(history[i]);
      if (Chance(12)) {  // an earlier event again: a duplicate, or stale
        const size_t back = static_cast<size_t>(Pick(static_cast<int>(std::min<size_t>(i + 1, 30))));
        stream.push_back(history[i - back]);
      }
    }
    const size_t sizes[] = {1, 4, 17, 1000};
    const size_t max_batch = sizes[Pick(4)];
    Oracle oracle;
    for (size_t at = 0; at < stream.size();) {
      LinkBatch batch;
      const size_t size = std::min(stream.size() - at, 1 + static_cast<size_t>(Pick(static_cast<int>(max_batch))));
      for (size_t i = at; i < at + size; ++i) {
        const Event& event = stream[i];
        const bool was_deleted_link = event.type == "book_author" && event.op != "delete" &&
                                      oracle.Find(event.type, event.id) != nullptr &&
                                      !oracle.Live(event.type, event.id);
        if (!oracle.Apply(event)) {
          ++out.stale;
          if (was_deleted_link) ++out.stale_recreates;
        }
        batch.events.push_back(event.Json());
      }
      at += size;
      bool duplicate_pair = false;
      batch.expected = oracle.Documents(&duplicate_pair);
      if (duplicate_pair) ++out.duplicate_pairs;
      out.batches.push_back(std::move(batch));
    }
    return out;
  }

 private:
  int Pick(int n) { return static_cast<int>(random_() % static_cast<uint32_t>(n)); }
  bool Chance(int percent) { return Pick(100) < percent; }

  std::string Author() { return "a" + std::to_string(Pick(5)); }
  std::string Book() { return "b" + std::to_string(Pick(6)); }

  std::optional<uint64_t> Version(const std::string& key) {
    uint64_t& last = versions_[key];
    last += 1 + Pick(2);
    if (Chance(4)) return std::nullopt;  // unversioned: always applies
    return last;
  }

  // A link field's value: mostly an id, sometimes not a string or absent.
  void LinkField(const std::string& field, const std::string& id,
                 std::map<std::string, std::string>* data) {
    const int kind = Pick(40);
    if (kind == 0) return;                              // absent
    (*data)[field] = kind == 1 ? "42" : Quoted(id);     // 42: names nothing
  }

  Event Next() {
    Event event;
    const int what = Pick(100);
    if (what < 60) {
      event.type = "book_author";
      const std::string book = Book(), author = Author();
      event.id = Chance(85) ? book + ":" + author : "l" + std::to_string(Pick(4));  // surrogate
      const int op = Pick(100);
      if (op < 30) {
        event.op = "delete";
      } else if (op < 45) {
        event.op = "patch";  // repoints one side, or moves the row in `since` order
        if (Chance(30)) {
          event.data["since"] = Chance(15) ? "null" : std::to_string(Pick(3));
        } else if (Chance(50)) {
          LinkField("book_id", book, &event.data);
        } else {
          LinkField("author_id", author, &event.data);
        }
        if (event.data.empty()) event.data["note"] = "1";
      } else {
        event.op = "upsert";
        LinkField("book_id", book, &event.data);
        LinkField("author_id", author, &event.data);
        if (Chance(20)) event.data["since"] = std::to_string(Pick(3));
      }
    } else if (what < 82) {
      event.type = "author";
      event.id = Author();
      const int op = Pick(100);
      event.op = op < 15 ? "delete" : op < 55 ? "patch" : "upsert";
      if (event.op != "delete") {
        event.data["name"] = Chance(10) ? "null" : Quoted("n" + std::to_string(Pick(4)));
        if (event.op == "upsert" && event.data["name"] == "null") event.data.erase("name");
      }
    } else {
      event.type = "book";
      event.id = Book();
      const int op = Pick(100);
      event.op = op < 20 ? "delete" : op < 50 ? "patch" : "upsert";
      if (event.op != "delete") event.data["title"] = Quoted("t" + std::to_string(Pick(4)));
    }
    event.version = Version(event.type + "/" + event.id);
    return event;
  }

  std::mt19937 random_;
  std::map<std::string, uint64_t> versions_;
};

}  // namespace

LinkScenario MakeLinkScenario(uint32_t seed) { return Generator(seed).Make(); }

std::string LinkConfig(LinkSides sides) {
  std::string yaml = "store: {schema: links}\nentities: [author, book, book_author]\nprojections:\n";
  if (sides != LinkSides::kBooks) {
    yaml += "  authors:\n    from: author\n    fields:\n"
            "      countOfBooks: {count: book, through: book_author, from: author_id, to: book_id}\n"
            "      books: {ids: book, through: book_author, from: author_id, to: book_id}\n";
  }
  if (sides != LinkSides::kAuthors) {
    yaml += "  books:\n    from: book\n    fields:\n"
            "      authors: {lookup: author, through: book_author, from: book_id, to: author_id, "
            "select: [name]}\n";
  }
  return yaml;
}

std::string DiffDocuments(const Config& config, const Collections& actual,
                          const Collections& expected) {
  DocumentSet a = EmptyDocumentSet(config), e = EmptyDocumentSet(config);
  a.collections = actual;
  e.collections = expected;
  std::string out;
  for (const std::string& line : DiffDocumentSets(a, e, DiffOptions())) out += line + "\n";
  return out;
}

}  // namespace testing
}  // namespace denormd
