#include "daemon/test_command.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "daemon/cli.h"
#include "daemon/memory_run.h"
#include "projections/document_set.h"

namespace denormd {

namespace {

// Differences listed before "... and N more" (unless list_all).
constexpr size_t kListedDifferences = 100;

std::string Plural(uint64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// False (with errno) when the file cannot be read.
bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

// Writes `text` to a temporary file next to `path`, then renames it over
// `path`: readers see the old file or the new one, never half of it.
Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Status::Fatal("cannot write " + temporary + ": " + std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return Status::Fatal("cannot replace " + path + ": " + reason);
  }
  return Status::Ok();
}

void ListDifferences(const std::vector<std::string>& lines, const std::string& indent,
                     bool list_all, std::ostream& report) {
  const size_t shown = list_all ? lines.size() : std::min(lines.size(), kListedDifferences);
  for (size_t i = 0; i < shown; ++i) report << indent << lines[i] << "\n";
  if (shown < lines.size()) {
    report << indent << "... and " << lines.size() - shown << " more (-v lists them all)\n";
  }
}

std::string JoinSizes(const std::vector<size_t>& sizes) {
  std::string out;
  for (size_t size : sizes) out += (out.empty() ? "" : ", ") + std::to_string(size);
  return out;
}

}  // namespace

int RunTestCommand(const Config& config, const TestCommandOptions& options, std::ostream& out,
                   std::ostream& err) {
  std::ostream& report = options.dump ? err : out;

  // The expected file first: a typo in its name should not cost a run.
  std::optional<DocumentSet> expected;
  if (options.expect) {
    const std::string& file = *options.expect;
    std::string text;
    if (ReadWholeFile(file, &text)) {
      DocumentSet parsed;
      Status status = ParseDocumentSet(text, &parsed);
      if (!status.ok()) {
        err << file << ": " << status.message()
            << (options.update ? " (not overwritten: is it the right file?)" : "") << "\n";
        return kExitUsage;
      }
      expected = std::move(parsed);
    } else if (!options.update) {
      err << "denormd test: cannot read " << file << ": " << std::strerror(errno)
          << " (--update writes it)\n";
      return kExitUsage;
    }
  }

  std::vector<size_t> sizes = options.batch_sizes;
  if (sizes.empty()) sizes.push_back(config.batch.max_events);
  // One run at a time: the first is the result, each other one is compared
  // with it and dropped.
  auto run_at = [&](size_t batch_size, MemoryRun* out) {
    Status status = options.run_in_memory(config, options.logs, batch_size, out);
    if (!status.ok()) err << "denormd test: " << status.message() << "\n";
    return status;
  };
  MemoryRun run;
  if (Status status = run_at(sizes[0], &run); !status.ok()) {
    return status.IsInvalidInput() ? kExitUsage : kExitFailure;
  }

  // Dead letters, by the log names as given.
  std::map<std::string, std::string> shown_names;
  for (size_t i = 0; i < run.logs.size(); ++i) {
    shown_names[run.logs[i].source] = options.logs[i] == "-" ? "stdin" : options.logs[i];
  }
  for (const DeadLetter& letter : run.dead_letters) {
    auto name = shown_names.find(letter.at.source);
    report << (name == shown_names.end() ? letter.at.source : name->second) << ":"
           << letter.at.position << ": dead letter: " << letter.reason << "\n";
  }
  uint64_t documents = 0;
  for (const auto& collection : run.documents.collections) documents += collection.second.size();
  const BatchStats& s = run.stats;
  report << "test: " << Plural(s.events, "event", "events") << ": " << s.applied << " applied, "
         << s.stale << " stale, " << Plural(s.dead_letters, "dead letter", "dead letters") << "; "
         << Plural(documents, "document", "documents") << " in "
         << Plural(run.documents.collections.size(), "collection", "collections") << " (batch size"
         << (sizes.size() == 1 ? " " : "s ") << JoinSizes(sizes) << ")\n";

  // Every batch size against the first.
  bool batches_differ = false;
  for (size_t i = 1; i < sizes.size(); ++i) {
    MemoryRun other;
    if (Status status = run_at(sizes[i], &other); !status.ok()) {
      return status.IsInvalidInput() ? kExitUsage : kExitFailure;
    }
    std::vector<std::string> lines = DiffDocumentSets(other.documents, run.documents);
    if (lines.empty()) continue;
    batches_differ = true;
    report << "batch size " << sizes[i] << " gives another result than batch size " << sizes[0]
           << " (left: " << sizes[i] << ", right: " << sizes[0] << "):\n";
    ListDifferences(lines, "  ", options.list_all, report);
  }
  if (sizes.size() > 1 && !batches_differ) {
    report << "batch sizes " << JoinSizes(sizes) << ": the same documents and counts\n";
  }

  if (options.dump) out << DocumentSetJson(run.documents);

  int exit_code = batches_differ ? kExitFailure : kExitOk;
  if (!options.expect) return exit_code;
  const std::string& file = *options.expect;
  std::vector<std::string> lines;
  if (expected) lines = DiffDocumentSets(run.documents, *expected);
  if (options.update) {
    if (batches_differ) {
      report << file << ": not updated: the batch sizes disagree\n";
      return kExitFailure;
    }
    if (expected && lines.empty()) {
      report << file << ": up to date\n";
      return exit_code;
    }
    ListDifferences(lines, "", options.list_all, report);
    Status status = WriteFileAtomically(file, DocumentSetJson(run.documents));
    if (!status.ok()) {
      err << "denormd test: " << status.message() << "\n";
      return kExitFailure;
    }
    report << file << ": "
           << (expected ? "updated (" + Plural(lines.size(), "difference", "differences") + ")"
                        : "written")
           << "\n";
    return exit_code;
  }
  ListDifferences(lines, "", options.list_all, report);
  if (lines.empty()) {
    report << file << ": the documents match\n";
    return exit_code;
  }
  report << file << ": " << Plural(lines.size(), "difference", "differences")
         << " (this run != " << file << "); --update rewrites it\n";
  return kExitFailure;
}

}  // namespace denormd
