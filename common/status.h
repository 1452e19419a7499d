// Status: the result of an operation on the data path.
//
// Modelled on leveldb's Status. Code that can fail while applying events returns
// a Status instead of throwing; exceptions are confined to start-up and to the
// thin wrappers around libraries that throw (libpqxx, yaml-cpp), which convert
// them at the boundary.
//
// The code says what a retry would do, so that callers can decide:
//   kInvalidInput  - the input itself is bad (an event, a config); retrying the
//                    same input fails the same way. Events go to dead letters.
//   kTransient     - a broken connection, a deadlock or serialization failure:
//                    roll back and retry the whole batch.
//   kBusy          - a lock another transaction holds was asked for without
//                    waiting: roll back and retry the batch at once.
//   kConflict      - a stream position moved under us: another consumer
//                    applied these events. Drop the batch and re-read positions.
//   kStaleConfig   - the store's projections changed (`denormd apply`) after
//                    this process loaded its own: nothing was applied; load
//                    the store's configuration and go on from the committed
//                    positions.
//   kFatal         - anything else: stop and report.
#ifndef DENORMD_COMMON_STATUS_H_
#define DENORMD_COMMON_STATUS_H_

#include <string>
#include <utility>

namespace denormd {

class [[nodiscard]] Status {
 public:
  enum class Code { kOk, kInvalidInput, kTransient, kBusy, kConflict, kStaleConfig, kFatal };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidInput(std::string message) {
    return Status(Code::kInvalidInput, std::move(message));
  }
  static Status Transient(std::string message) {
    return Status(Code::kTransient, std::move(message));
  }
  static Status Busy(std::string message) { return Status(Code::kBusy, std::move(message)); }
  static Status Conflict(std::string message) {
    return Status(Code::kConflict, std::move(message));
  }
  static Status StaleConfig(std::string message) {
    return Status(Code::kStaleConfig, std::move(message));
  }
  static Status Fatal(std::string message) {
    return Status(Code::kFatal, std::move(message));
  }

  bool ok() const { return code_ == Code::kOk; }
  bool IsInvalidInput() const { return code_ == Code::kInvalidInput; }
  bool IsTransient() const { return code_ == Code::kTransient; }
  bool IsBusy() const { return code_ == Code::kBusy; }
  bool IsConflict() const { return code_ == Code::kConflict; }
  bool IsStaleConfig() const { return code_ == Code::kStaleConfig; }
  bool IsFatal() const { return code_ == Code::kFatal; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "ok", or "<kind>: <message>".
  std::string ToString() const;

  // Drops a Status on purpose; where a failure cannot change what happens
  // next (a best-effort flush at shutdown), say so with this.
  void IgnoreError() const {}

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

inline std::string Status::ToString() const {
  switch (code_) {
    case Code::kOk: return "ok";
    case Code::kInvalidInput: return "invalid input: " + message_;
    case Code::kTransient: return "transient error: " + message_;
    case Code::kBusy: return "busy: " + message_;
    case Code::kConflict: return "conflict: " + message_;
    case Code::kStaleConfig: return "stale configuration: " + message_;
    case Code::kFatal: return "error: " + message_;
  }
  return message_;
}

// Evaluates an expression returning Status and returns it from the enclosing
// function if it is not ok.
#define DENORMD_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::denormd::Status status_ = (expr);        \
    if (!status_.ok()) return status_;         \
  } while (false)

}  // namespace denormd

#endif  // DENORMD_COMMON_STATUS_H_
