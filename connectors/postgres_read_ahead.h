// ReadAheadRows: what a role of one PostgresTransaction read ahead of being
// asked, by key, and whether it still answers a read.
//
// A batch knows, once it has locked its documents, most of what it will
// read for them: their roots, their counters, their stored lists. A role
// queues those reads as deferred statements (PostgresWork, "Round trips"),
// which go with the transaction's next statement; their rows come back
// here, and a later read of keys all read ahead is answered from them with
// no round trip of its own. A read that did run is kept the same way, for
// the next caller that asks the same keys (a lookup's targets that another
// projection's roots were).
//
// Rows read ahead are what a read would return as long as nothing the rows
// depend on was written since: the server runs the transaction's statements
// in order, so a deferred read sees every write queued before it, and none
// queued after. `stamp` is the role's count of such writes
// (PostgresWork::index_writes, document_writes) when the read was queued; a
// read at another stamp is not answered, and asking at a new stamp forgets
// what was kept.
//
// Not thread-safe (one transaction's).
#ifndef DENORMD_CONNECTORS_POSTGRES_READ_AHEAD_H_
#define DENORMD_CONNECTORS_POSTGRES_READ_AHEAD_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "common/status.h"

namespace denormd {

template <typename Key, typename Value>
class ReadAheadRows {
 public:
  // Of `keys`, those not yet asked at `stamp`, now asked (pending until
  // Arrived): the caller reads those.
  std::vector<Key> Ask(const std::vector<Key>& keys, uint64_t stamp) {
    Restamp(stamp);
    std::vector<Key> fresh;
    for (const Key& key : keys) {
      if (kept_.count(key) || !pending_.insert(key).second) continue;
      fresh.push_back(key);
    }
    return fresh;
  }

  // The rows read for `asked` at `stamp`: `found` by key; the others of
  // `asked` do not exist. Ignored when asked at a stamp since left.
  void Arrived(const std::vector<Key>& asked, uint64_t stamp, std::map<Key, Value> found) {
    if (stamp != stamp_) return;
    for (const Key& key : asked) {
      pending_.erase(key);
      auto it = found.find(key);
      if (it == found.end()) {
        kept_[key] = std::nullopt;
      } else {
        kept_[key] = std::move(it->second);
      }
    }
  }

  // A read that ran is kept only when it asked at most this many keys: a
  // second read of the same keys is a small batch's (a lookup's targets),
  // and a large read kept would only hold memory (a fan-out's 1,000 roots).
  static constexpr size_t kKeptReadKeysAtMost = 100;
  // Whether Keep keeps a read of `keys` keys (the caller need not gather
  // its rows otherwise).
  static bool Keeps(size_t keys) { return keys <= kKeptReadKeysAtMost; }

  // Keeps what a read that ran at `stamp` returned (its keys `asked`).
  void Keep(const std::vector<Key>& asked, uint64_t stamp, std::map<Key, Value> found) {
    if (!Keeps(asked.size())) return;
    Restamp(stamp);
    Arrived(asked, stamp, std::move(found));
  }

  // Whether the rows of every key of `keys` asked at `stamp` are kept
  // (*kept), after `send` (which sends the deferred statements) when some
  // of them are still to come. Fails as `send` does.
  Status Answers(const std::vector<Key>& keys, uint64_t stamp,
                 const std::function<Status()>& send, bool* kept) const {
    Answer answer = Covers(keys, stamp);
    if (answer == Answer::kPending) {
      DENORMD_RETURN_IF_ERROR(send());
      answer = Covers(keys, stamp);
    }
    *kept = answer == Answer::kKept;
    return Status::Ok();
  }

  // The row kept for `key` (Answers said kept): null when it does not exist.
  const Value* Find(const Key& key) const {
    auto it = kept_.find(key);
    return it == kept_.end() || !it->second ? nullptr : &*it->second;
  }

 private:
  enum class Answer { kNo, kPending, kKept };
  // Whether every key of `keys` was asked at `stamp`: kKept when all their
  // rows arrived, kPending when some are still to come, kNo otherwise.
  Answer Covers(const std::vector<Key>& keys, uint64_t stamp) const {
    if (stamp != stamp_ || keys.empty()) return Answer::kNo;
    bool pending = false;
    for (const Key& key : keys) {
      if (pending_.count(key)) {
        pending = true;
      } else if (!kept_.count(key)) {
        return Answer::kNo;
      }
    }
    return pending ? Answer::kPending : Answer::kKept;
  }

  void Restamp(uint64_t stamp) {
    if (stamp == stamp_) return;
    stamp_ = stamp;
    kept_.clear();
    pending_.clear();
  }

  uint64_t stamp_ = 0;
  std::map<Key, std::optional<Value>> kept_;
  std::set<Key> pending_;
};

}  // namespace denormd

#endif  // DENORMD_CONNECTORS_POSTGRES_READ_AHEAD_H_
