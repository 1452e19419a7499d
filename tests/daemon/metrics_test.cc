// Tests of daemon/metrics and daemon/http_server: the rendered Prometheus
// text (counters, cumulative histogram buckets, labelled lag gauges, escaping,
// well-formedness), and the HTTP endpoint served on port 0 and spoken to with
// a plain socket client: /metrics, /healthz, 404/405/400/431/408, prompt and
// idempotent Stop(), and a clear error when the port is taken.
#include "daemon/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/http_server.h"

namespace denormd {
namespace {

// ---------------------------------------------------------------------------
// Helpers for the exposition text.

// Whether `text` contains `part`, with both in the failure message.
::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << part << "\"";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The value text of the sample whose name and labels are exactly `series`
// (e.g. `denormd_consumer_lag{topic="a",partition="0"}`), or "<missing>".
std::string Sample(const std::string& text, const std::string& series) {
  for (const std::string& line : Lines(text)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return line.substr(series.size() + 1);
    }
  }
  return "<missing>";
}

// Checks the text format 0.0.4 rules the scraper relies on: every line is a
// comment or "series value"; each family has one # HELP followed by one
// # TYPE before its samples; sample names belong to the family last declared
// (histograms: _bucket/_sum/_count); values parse; the text ends in '\n'.
// Returns "" or the first problem.
std::string CheckExposition(const std::string& text) {
  if (text.empty() || text.back() != '\n') return "does not end with a newline";
  std::set<std::string> declared;
  std::string family, type, help_for;
  for (const std::string& line : Lines(text)) {
    if (line.rfind("# HELP ", 0) == 0) {
      help_for = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream in(line.substr(7));
      in >> family >> type;
      if (help_for != family) return "no # HELP right before: " + line;
      if (!declared.insert(family).second) return "family declared twice: " + family;
      if (type != "counter" && type != "gauge" && type != "histogram") {
        return "unknown type: " + line;
      }
      continue;
    }
    if (line.empty() || line[0] == '#') return "unexpected line: \"" + line + "\"";
    size_t name_end = line.find_first_of("{ ");
    std::string name = line.substr(0, name_end);
    bool belongs = name == family;
    if (type == "histogram") {
      belongs = name == family + "_bucket" || name == family + "_sum" ||
                name == family + "_count";
    }
    if (!belongs) return "sample outside its family: " + line;
    size_t space = line.rfind(' ');
    if (line[name_end] == '{' && line[space - 1] != '}') return "unclosed labels: " + line;
    std::string value = line.substr(space + 1);
    if (value != "+Inf" && value != "-Inf" && value != "NaN") {
      char* end = nullptr;
      std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0') return "bad value: " + line;
    }
  }
  return "";
}

// ---------------------------------------------------------------------------
// Metrics

TEST(MetricsTest, FreshRenderHasEveryFamilyAtZero) {
  Metrics metrics;
  std::string text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  for (const char* counter :
       {"denormd_events_applied_total", "denormd_events_stale_total",
        "denormd_dead_letters_total", "denormd_documents_written_total",
        "denormd_documents_deleted_total", "denormd_batches_total",
        "denormd_batch_retries_total", "denormd_records_skipped_total",
        "denormd_store_round_trips_total", "denormd_store_statements_total"}) {
    EXPECT_TRUE(Contains(text, std::string("# TYPE ") + counter + " counter\n"));
    EXPECT_EQ(Sample(text, counter), "0") << counter;
  }
  EXPECT_TRUE(Contains(text, "# TYPE denormd_batch_duration_seconds histogram\n"));
  EXPECT_TRUE(Contains(text, "# TYPE denormd_consumer_lag gauge\n"));
  EXPECT_EQ(Sample(text, "denormd_batch_duration_seconds_bucket{le=\"+Inf\"}"), "0");
  EXPECT_EQ(Sample(text, "denormd_batch_duration_seconds_count"), "0");
  EXPECT_EQ(Sample(text, "denormd_batch_duration_seconds_sum"), "0");
  EXPECT_EQ(Sample(text, "denormd_up"), "1");
  EXPECT_EQ(Sample(text, "denormd_store_healthy"), "0");
  EXPECT_EQ(Sample(text, "denormd_last_commit_timestamp_seconds"), "0");
  EXPECT_EQ(text.find("denormd_consumer_lag{"), std::string::npos);
}

TEST(MetricsTest, CountersSumBatchesAndRetries) {
  Metrics metrics;
  metrics.AddBatch(/*applied=*/100, /*stale=*/3, /*dead=*/1, /*written=*/250,
                   /*deleted=*/7, /*seconds=*/0.2);
  metrics.AddBatch(40, 0, 2, 60, 0, 0.05, /*skipped=*/5, /*round_trips=*/9,
                   /*statements=*/11);
  metrics.AddRetry();
  metrics.AddRetry();
  metrics.AddRetry();
  metrics.AddBusyRetries(2, 0.25);
  metrics.AddBusyRetries(1, 0.5);
  std::string text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  EXPECT_EQ(Sample(text, "denormd_batch_busy_retries_total"), "3");
  EXPECT_EQ(Sample(text, "denormd_batch_busy_seconds_total"), "0.75");
  EXPECT_EQ(Sample(text, "denormd_events_applied_total"), "140");
  EXPECT_EQ(Sample(text, "denormd_events_stale_total"), "3");
  EXPECT_EQ(Sample(text, "denormd_dead_letters_total"), "3");
  EXPECT_EQ(Sample(text, "denormd_documents_written_total"), "310");
  EXPECT_EQ(Sample(text, "denormd_documents_deleted_total"), "7");
  EXPECT_EQ(Sample(text, "denormd_batches_total"), "2");
  EXPECT_EQ(Sample(text, "denormd_batch_retries_total"), "3");
  EXPECT_EQ(Sample(text, "denormd_records_skipped_total"), "5");
  EXPECT_EQ(Sample(text, "denormd_store_round_trips_total"), "9");
  EXPECT_EQ(Sample(text, "denormd_store_statements_total"), "11");
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Metrics metrics;
  // 0.005 sits exactly on a bound: buckets are inclusive (le = "less or equal").
  for (double seconds : {0.003, 0.005, 0.02, 0.3, 0.3, 4.0, 20.0}) {
    metrics.AddBatch(1, 0, 0, 1, 0, seconds);
  }
  std::string text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"0.005", "2"}, {"0.01", "2"}, {"0.025", "3"}, {"0.05", "3"},
      {"0.1", "3"},   {"0.25", "3"}, {"0.5", "5"},   {"1", "5"},
      {"2.5", "5"},   {"5", "6"},    {"10", "6"},    {"+Inf", "7"}};
  std::vector<std::string> le_in_order;
  const std::string prefix = "denormd_batch_duration_seconds_bucket{le=\"";
  for (const std::string& line : Lines(text)) {
    if (line.rfind(prefix, 0) == 0) {
      le_in_order.push_back(
          line.substr(prefix.size(), line.find('"', prefix.size()) - prefix.size()));
    }
  }
  std::vector<std::string> expected_le;
  for (const auto& [le, count] : expected) {
    expected_le.push_back(le);
    EXPECT_EQ(Sample(text, "denormd_batch_duration_seconds_bucket{le=\"" + le + "\"}"), count)
        << "le=" << le;
  }
  EXPECT_EQ(le_in_order, expected_le);
  EXPECT_EQ(Sample(text, "denormd_batch_duration_seconds_count"), "7");
  double sum = std::strtod(Sample(text, "denormd_batch_duration_seconds_sum").c_str(), nullptr);
  EXPECT_NEAR(sum, 0.003 + 0.005 + 0.02 + 0.3 + 0.3 + 4.0 + 20.0, 1e-9);
}

TEST(MetricsTest, EventAgesFillTheFreshnessHistogramAndItsMax) {
  Metrics metrics;
  metrics.ObserveEventAges({0.0005, 0.004, 0.004, 0.09, 0.12, -1.0});
  metrics.ObserveEventAges({2.0});
  std::string text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  EXPECT_EQ(Sample(text, "denormd_event_age_seconds_bucket{le=\"0.001\"}"), "2");  // -1 counts as 0
  EXPECT_EQ(Sample(text, "denormd_event_age_seconds_bucket{le=\"0.005\"}"), "4");
  EXPECT_EQ(Sample(text, "denormd_event_age_seconds_bucket{le=\"0.1\"}"), "5");
  EXPECT_EQ(Sample(text, "denormd_event_age_seconds_bucket{le=\"0.15\"}"), "6");
  EXPECT_EQ(Sample(text, "denormd_event_age_seconds_bucket{le=\"+Inf\"}"), "7");
  EXPECT_EQ(Sample(text, "denormd_event_age_seconds_count"), "7");
  EXPECT_EQ(Sample(text, "denormd_event_age_max_seconds"), "2");
}

TEST(MetricsTest, DocumentsPerEventByEntityType) {
  Metrics metrics;
  metrics.ObserveFanOuts({{"author", "a0", {"name"}, 3097}, {"author", "a1", {"name"}, 2},
                          {"comment", "c1", {"(created)"}, 2}, {"comment", "c2", {"text"}, 1}});
  metrics.ObserveFanOuts({{"comment", "c3", {"(deleted)"}, 0}});
  std::string text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  EXPECT_TRUE(Contains(text, "# TYPE denormd_documents_per_event histogram\n"));
  EXPECT_EQ(Sample(text, "denormd_documents_per_event_bucket{type=\"author\",le=\"2\"}"), "1");
  EXPECT_EQ(Sample(text, "denormd_documents_per_event_bucket{type=\"author\",le=\"1000\"}"), "1");
  EXPECT_EQ(Sample(text, "denormd_documents_per_event_bucket{type=\"author\",le=\"5000\"}"), "2");
  EXPECT_EQ(Sample(text, "denormd_documents_per_event_sum{type=\"author\"}"), "3099");
  EXPECT_EQ(Sample(text, "denormd_documents_per_event_bucket{type=\"comment\",le=\"0\"}"), "1");
  EXPECT_EQ(Sample(text, "denormd_documents_per_event_bucket{type=\"comment\",le=\"2\"}"), "3");
  EXPECT_EQ(Sample(text, "denormd_documents_per_event_count{type=\"comment\"}"), "3");
}

TEST(MetricsTest, TheFeedsFamiliesStartAtZeroAndCountPages) {
  Metrics metrics;
  std::string text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  for (const char* counter : {"denormd_feed_published_total", "denormd_feed_transactions_total",
                              "denormd_feed_too_large_total", "denormd_feed_failures_total",
                              "denormd_feed_relay_seconds_total"}) {
    EXPECT_TRUE(Contains(text, std::string("# TYPE ") + counter + " counter\n"));
    EXPECT_EQ(Sample(text, counter), "0") << counter;
  }
  EXPECT_TRUE(Contains(text, "# TYPE denormd_feed_delay_seconds histogram\n"));
  EXPECT_EQ(Sample(text, "denormd_feed_outbox_rows"), "0");
  EXPECT_EQ(Sample(text, "denormd_feed_outbox_lag_seconds"), "0");
  EXPECT_EQ(Sample(text, "denormd_feed_relay_active"), "0");

  metrics.AddFeedPage(3, 1, {0.004, 0.02, 0.5}, 0.25);
  metrics.AddFeedPage(2, 0, {0.0001, 3.0}, 0.5);
  metrics.AddFeedFailure();
  metrics.SetOutboxLag(1234, 2.5);
  metrics.SetFeedRelayActive(true);
  text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  EXPECT_EQ(Sample(text, "denormd_feed_published_total"), "5");
  EXPECT_EQ(Sample(text, "denormd_feed_transactions_total"), "2");
  EXPECT_EQ(Sample(text, "denormd_feed_too_large_total"), "1");
  EXPECT_EQ(Sample(text, "denormd_feed_failures_total"), "1");
  EXPECT_EQ(Sample(text, "denormd_feed_relay_seconds_total"), "0.75");
  EXPECT_EQ(Sample(text, "denormd_feed_delay_seconds_bucket{le=\"0.005\"}"), "2");
  EXPECT_EQ(Sample(text, "denormd_feed_delay_seconds_bucket{le=\"0.5\"}"), "4");
  EXPECT_EQ(Sample(text, "denormd_feed_delay_seconds_bucket{le=\"+Inf\"}"), "5");
  EXPECT_EQ(Sample(text, "denormd_feed_delay_seconds_count"), "5");
  EXPECT_EQ(Sample(text, "denormd_feed_outbox_rows"), "1234");
  EXPECT_EQ(Sample(text, "denormd_feed_outbox_lag_seconds"), "2.5");
  EXPECT_EQ(Sample(text, "denormd_feed_relay_active"), "1");
}

TEST(MetricsTest, NanDurationCountsTheBatchButIsNotObserved) {
  Metrics metrics;
  metrics.AddBatch(1, 0, 0, 1, 0, std::nan(""));
  metrics.AddBatch(1, 0, 0, 1, 0, -1.0);  // a clock step backwards: observed as 0
  std::string text = metrics.Render();
  EXPECT_EQ(Sample(text, "denormd_batches_total"), "2");
  EXPECT_EQ(Sample(text, "denormd_batch_duration_seconds_count"), "1");
  EXPECT_EQ(Sample(text, "denormd_batch_duration_seconds_bucket{le=\"0.005\"}"), "1");
  EXPECT_EQ(Sample(text, "denormd_batch_duration_seconds_sum"), "0");
}

TEST(MetricsTest, LagGaugesCarryTopicAndPartition) {
  Metrics metrics;
  metrics.SetPartitionLag("authors", 0, 5);
  metrics.SetPartitionLag("books", 2, 12345678901);
  metrics.SetPartitionLag("authors", 0, 7);  // overwrites
  std::string text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  EXPECT_EQ(Sample(text, "denormd_consumer_lag{topic=\"authors\",partition=\"0\"}"), "7");
  EXPECT_EQ(Sample(text, "denormd_consumer_lag{topic=\"books\",partition=\"2\"}"),
            "12345678901");

  // SetLag replaces the whole set: "books"/2 disappears.
  metrics.SetLag({{{"authors", 1}, 0}, {{"comments", 0}, 3}});
  text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  EXPECT_EQ(Sample(text, "denormd_consumer_lag{topic=\"authors\",partition=\"1\"}"), "0");
  EXPECT_EQ(Sample(text, "denormd_consumer_lag{topic=\"comments\",partition=\"0\"}"), "3");
  EXPECT_EQ(Sample(text, "denormd_consumer_lag{topic=\"authors\",partition=\"0\"}"),
            "<missing>");
  EXPECT_EQ(text.find("books"), std::string::npos);

  metrics.SetLag({});
  EXPECT_EQ(metrics.Render().find("denormd_consumer_lag{"), std::string::npos);
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  EXPECT_EQ(EscapeLabelValue("plain.topic-1"), "plain.topic-1");
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");

  Metrics metrics;
  metrics.SetPartitionLag("we\"ird\\to\npic", 3, 9);
  std::string text = metrics.Render();
  EXPECT_EQ(CheckExposition(text), "");
  EXPECT_EQ(Sample(text, "denormd_consumer_lag{topic=\"we\\\"ird\\\\to\\npic\",partition=\"3\"}"),
            "9");
}

TEST(MetricsTest, StoreHealthAndLastCommitGauges) {
  Metrics metrics;
  metrics.SetStoreHealthy(true);
  metrics.SetLastCommitTimestamp(1764109801.125);
  std::string text = metrics.Render();
  EXPECT_EQ(Sample(text, "denormd_store_healthy"), "1");
  EXPECT_EQ(Sample(text, "denormd_last_commit_timestamp_seconds"), "1764109801.125");
  metrics.SetStoreHealthy(false);
  EXPECT_EQ(Sample(metrics.Render(), "denormd_store_healthy"), "0");
}

TEST(MetricsTest, SampleValuesAreShortestRoundTrip) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(0.1), "0.1");
  EXPECT_EQ(FormatSampleValue(2.5), "2.5");
  EXPECT_EQ(FormatSampleValue(10), "10");
  EXPECT_EQ(FormatSampleValue(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatSampleValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatSampleValue(HUGE_VAL), "+Inf");
  EXPECT_EQ(FormatSampleValue(-HUGE_VAL), "-Inf");
}

TEST(MetricsTest, ConcurrentWritersLoseNoUpdates) {
  Metrics metrics;
  constexpr int kThreads = 4;
  constexpr int kBatches = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kBatches; ++i) {
        metrics.AddBatch(2, 1, 0, 3, 0, 0.001);
        metrics.AddRetry();
        metrics.SetPartitionLag("t", t, i);
        if (i % 500 == 0) metrics.Render();  // readers interleave with writers
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::string text = metrics.Render();
  const std::string total = std::to_string(kThreads * kBatches);
  EXPECT_EQ(Sample(text, "denormd_batches_total"), total);
  EXPECT_EQ(Sample(text, "denormd_batch_retries_total"), total);
  EXPECT_EQ(Sample(text, "denormd_events_applied_total"), std::to_string(2 * kThreads * kBatches));
  EXPECT_EQ(Sample(text, "denormd_batch_duration_seconds_bucket{le=\"0.005\"}"), total);
  EXPECT_EQ(Sample(text, "denormd_consumer_lag{topic=\"t\",partition=\"3\"}"),
            std::to_string(kBatches - 1));
}

// ---------------------------------------------------------------------------
// A plain socket client for the HTTP tests.

struct HttpReply {
  int status = 0;
  std::string head;  // status line and headers, without the blank line
  std::string body;
  std::string error;  // transport or parse problem; "" when the reply parsed
};

// A connected TCP socket to 127.0.0.1:port with 10 s send/receive timeouts, so
// a misbehaving server fails the test instead of hanging it; -1 on failure.
int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads `fd` to EOF and parses the reply; closes `fd`.
HttpReply ReadReply(int fd) {
  HttpReply reply;
  std::string raw;
  char buffer[65536];
  while (true) {
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      reply.error = std::string("recv: ") + std::strerror(errno);
      close(fd);
      return reply;
    }
    raw.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    reply.error = "no end of head in \"" + raw + "\"";
    return reply;
  }
  reply.head = raw.substr(0, head_end);
  reply.body = raw.substr(head_end + 4);
  // "HTTP/1.1 200 OK"
  if (reply.head.rfind("HTTP/1.1 ", 0) != 0 || reply.head.size() < 12) {
    reply.error = "bad status line in \"" + reply.head + "\"";
    return reply;
  }
  reply.status = std::atoi(reply.head.substr(9, 3).c_str());
  return reply;
}

// Sends `request` verbatim to 127.0.0.1:port and reads the whole reply.
HttpReply Exchange(int port, const std::string& request) {
  int fd = Connect(port);
  if (fd < 0) {
    HttpReply reply;
    reply.error = std::string("connect: ") + std::strerror(errno);
    return reply;
  }
  if (!SendAll(fd, request)) {
    close(fd);
    HttpReply reply;
    reply.error = "send failed";
    return reply;
  }
  return ReadReply(fd);
}

HttpReply Get(int port, const std::string& target) {
  return Exchange(port, "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

// The value of header `name` (case-sensitive, as the server writes it), or
// "<missing>".
std::string Header(const HttpReply& reply, const std::string& name) {
  for (const std::string& line : Lines(reply.head)) {
    if (line.rfind(name + ": ", 0) == 0) {
      std::string value = line.substr(name.size() + 2);
      if (!value.empty() && value.back() == '\r') value.pop_back();
      return value;
    }
  }
  return "<missing>";
}

// Checks status, Content-Length against the body, and Connection: close.
::testing::AssertionResult IsReply(const HttpReply& reply, int status) {
  if (!reply.error.empty()) return ::testing::AssertionFailure() << reply.error;
  if (reply.status != status) {
    return ::testing::AssertionFailure() << "status " << reply.status << ", want " << status
                                         << "; head:\n" << reply.head;
  }
  if (Header(reply, "Content-Length") != std::to_string(reply.body.size())) {
    return ::testing::AssertionFailure() << "Content-Length " << Header(reply, "Content-Length")
                                         << " but body has " << reply.body.size() << " bytes";
  }
  if (Header(reply, "Connection") != "close") {
    return ::testing::AssertionFailure() << "no Connection: close in\n" << reply.head;
  }
  return ::testing::AssertionSuccess();
}

// A server on 127.0.0.1, port 0, whose health is set by the test.
class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(MetricsHttpServer::Options options = {}) {
    server_ = std::make_unique<MetricsHttpServer>(
        [this] { return metrics_.Render(); },
        [this](std::string* why) {
          if (healthy_.load()) return true;
          *why = "store unreachable: connection refused";
          return false;
        },
        options);
    Status status = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(status.ok()) << status.ToString();
    ASSERT_GT(server_->port(), 0);
  }

  Metrics metrics_;
  std::atomic<bool> healthy_{true};
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(HttpServerTest, ServesMetrics) {
  StartServer();
  metrics_.AddBatch(12, 1, 0, 30, 2, 0.07);
  metrics_.SetPartitionLag("authors", 0, 4);
  HttpReply reply = Get(server_->port(), "/metrics");
  ASSERT_TRUE(IsReply(reply, 200));
  EXPECT_EQ(Header(reply, "Content-Type").rfind("text/plain; version=0.0.4", 0), 0u)
      << reply.head;
  EXPECT_EQ(reply.body, metrics_.Render());
  EXPECT_EQ(CheckExposition(reply.body), "");
  EXPECT_EQ(Sample(reply.body, "denormd_events_applied_total"), "12");
  EXPECT_EQ(Sample(reply.body, "denormd_consumer_lag{topic=\"authors\",partition=\"0\"}"), "4");

  // The callback is asked on every scrape; the query string is ignored.
  metrics_.AddBatch(8, 0, 0, 0, 0, 0.07);
  reply = Get(server_->port(), "/metrics?name[]=denormd_up");
  ASSERT_TRUE(IsReply(reply, 200));
  EXPECT_EQ(Sample(reply.body, "denormd_events_applied_total"), "20");
}

TEST_F(HttpServerTest, HealthzFollowsTheHealthCallback) {
  StartServer();
  HttpReply reply = Get(server_->port(), "/healthz");
  ASSERT_TRUE(IsReply(reply, 200));
  EXPECT_EQ(reply.body, "ok\n");

  healthy_ = false;
  reply = Get(server_->port(), "/healthz");
  ASSERT_TRUE(IsReply(reply, 503));
  EXPECT_EQ(reply.body, "store unreachable: connection refused\n");
  EXPECT_TRUE(Contains(reply.head, "HTTP/1.1 503 Service Unavailable"));

  healthy_ = true;
  EXPECT_TRUE(IsReply(Get(server_->port(), "/healthz"), 200));
}

TEST_F(HttpServerTest, OtherPathsAre404) {
  StartServer();
  for (const char* target : {"/", "/metricsx", "/metrics/", "/health", "/favicon.ico"}) {
    HttpReply reply = Get(server_->port(), target);
    EXPECT_TRUE(IsReply(reply, 404)) << target;
    EXPECT_EQ(reply.body.find("denormd_"), std::string::npos) << target;
  }
}

TEST_F(HttpServerTest, OtherMethodsAre405) {
  StartServer();
  HttpReply reply = Exchange(server_->port(),
                             "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_TRUE(IsReply(reply, 405));
  EXPECT_EQ(Header(reply, "Allow"), "GET");
  reply = Exchange(server_->port(), "DELETE /healthz HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(IsReply(reply, 405));
}

TEST_F(HttpServerTest, MalformedAndOversizedRequestsAreRejected) {
  MetricsHttpServer::Options options;
  options.max_request_bytes = 256;
  StartServer(options);
  EXPECT_TRUE(IsReply(Exchange(server_->port(), "hello\r\n\r\n"), 400));
  EXPECT_TRUE(IsReply(Exchange(server_->port(), "GET /metrics\r\n\r\n"), 400));
  EXPECT_TRUE(IsReply(Exchange(server_->port(), "GET /metrics FTP/1.0\r\n\r\n"), 400));

  std::string big = "GET /metrics HTTP/1.1\r\nX-Padding: " + std::string(1000, 'a') + "\r\n\r\n";
  EXPECT_TRUE(IsReply(Exchange(server_->port(), big), 431));
  // The server is still serving afterwards.
  EXPECT_TRUE(IsReply(Get(server_->port(), "/healthz"), 200));
}

TEST_F(HttpServerTest, StuckClientTimesOutAndOthersAreServed) {
  MetricsHttpServer::Options options;
  options.io_timeout_ms = 200;
  StartServer(options);
  // A client that sends half a request and then nothing.
  int stuck = Connect(server_->port());
  ASSERT_GE(stuck, 0);
  ASSERT_TRUE(SendAll(stuck, "GET /metr"));
  // Others are served meanwhile; the stuck one gets 408 at its deadline.
  EXPECT_TRUE(IsReply(Get(server_->port(), "/healthz"), 200));
  EXPECT_TRUE(IsReply(ReadReply(stuck), 408));
}

// Whether the server has closed `fd` (EOF or reset within `wait_ms`), as
// opposed to still holding it open and waiting.
bool ClosedByServer(int fd, int wait_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, wait_ms) <= 0) return false;
  char byte;
  ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

// Raises the soft descriptor limit towards `want` (at most the hard limit);
// returns the resulting soft limit.
rlim_t RaiseDescriptorLimit(rlim_t want) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < want) {
    limit.rlim_cur = std::min(want, limit.rlim_max);
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

TEST_F(HttpServerTest, AThousandIdleConnectionsDoNotDelayAHealthCheck) {
  // The server and the clients share this process: 1,000 descriptors each.
  ASSERT_GE(RaiseDescriptorLimit(4096), 2100u) << "needs 2,100 open files (ulimit -n)";
  MetricsHttpServer::Options options;
  options.io_timeout_ms = 600000;  // nobody times out during the test
  StartServer(options);

  // 1,000 connections: half say nothing, half send part of a request head.
  std::vector<int> idle;
  for (int i = 0; i < 1000; ++i) {
    int fd = Connect(server_->port());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    idle.push_back(fd);
    if (i % 2 == 1) {
      ASSERT_TRUE(SendAll(fd, "GET /heal"));
    }
  }

  // Served one after the other, the first check would wait for the first
  // idle connection's 600 s deadline (the client gives up after 10 s).
  std::vector<double> latencies_ms;
  for (int i = 0; i < 20; ++i) {
    auto start = std::chrono::steady_clock::now();
    HttpReply reply = Get(server_->port(), "/healthz");
    latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    ASSERT_TRUE(IsReply(reply, 200)) << "check " << i;
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  std::printf("healthz with 1,000 idle connections: median %.2f ms, max %.2f ms (20 checks)\n",
              latencies_ms[latencies_ms.size() / 2], latencies_ms.back());
  // A generous bound for a loaded machine; the target is 100 ms and
  // the figure above is what to compare with it.
  EXPECT_LT(latencies_ms.back(), 1000.0);

  // Under the cap nothing was dropped: the idle connections are still open,
  // and a held one still gets its answer once it completes its request.
  EXPECT_FALSE(ClosedByServer(idle.front(), 0));
  EXPECT_FALSE(ClosedByServer(idle.back(), 0));
  ASSERT_TRUE(SendAll(idle.back(), "thz HTTP/1.1\r\n\r\n"));
  int last = idle.back();
  idle.pop_back();
  EXPECT_TRUE(IsReply(ReadReply(last), 200));
  for (int fd : idle) close(fd);
}

TEST_F(HttpServerTest, PastTheConnectionCapTheOldestWaitingConnectionsAreClosed) {
  MetricsHttpServer::Options options;
  options.io_timeout_ms = 600000;
  options.max_connections = 8;
  StartServer(options);
  std::vector<int> idle;
  for (int i = 0; i < 20; ++i) {
    int fd = Connect(server_->port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // A check still gets through: it takes the place of the oldest idle one.
  EXPECT_TRUE(IsReply(Get(server_->port(), "/healthz"), 200));
  // 21 connections were accepted against a cap of 8: the first 13 were
  // closed, oldest first; the newest are still open.
  EXPECT_TRUE(ClosedByServer(idle[0], 5000));
  EXPECT_TRUE(ClosedByServer(idle[12], 5000));
  EXPECT_FALSE(ClosedByServer(idle[13], 0));
  EXPECT_FALSE(ClosedByServer(idle[19], 0));
  for (int fd : idle) close(fd);
}

TEST_F(HttpServerTest, ARequestSentInPiecesIsAnsweredWhileOthersWait) {
  StartServer();
  int slow = Connect(server_->port());
  ASSERT_GE(slow, 0);
  ASSERT_TRUE(SendAll(slow, "GET /me"));
  EXPECT_TRUE(IsReply(Get(server_->port(), "/healthz"), 200));
  ASSERT_TRUE(SendAll(slow, "trics HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_TRUE(IsReply(Get(server_->port(), "/healthz"), 200));
  ASSERT_TRUE(SendAll(slow, "\r\n"));
  EXPECT_TRUE(IsReply(ReadReply(slow), 200));
}

TEST_F(HttpServerTest, ClientThatClosesEarlyDoesNotDisturbTheServer) {
  StartServer();
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  close(fd);  // connected, sent nothing, went away
  fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\n"));
  close(fd);  // half a request
  EXPECT_TRUE(IsReply(Get(server_->port(), "/healthz"), 200));
}

TEST(MetricsHttpServerTest, ThrowingCallbackGives500) {
  MetricsHttpServer server([]() -> std::string { throw std::runtime_error("boom"); },
                           nullptr);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  EXPECT_TRUE(IsReply(Get(server.port(), "/metrics"), 500));
  // No health callback: always healthy.
  EXPECT_TRUE(IsReply(Get(server.port(), "/healthz"), 200));
}

TEST(MetricsHttpServerTest, StopIsIdempotentAndClosesThePort) {
  MetricsHttpServer server([] { return std::string("x 1\n"); }, nullptr);
  server.Stop();  // never started: a no-op
  EXPECT_EQ(server.port(), 0);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  int port = server.port();
  ASSERT_GT(port, 0);
  EXPECT_FALSE(server.Start("127.0.0.1", 0).ok());  // already running
  EXPECT_TRUE(IsReply(Get(port, "/metrics"), 200));
  server.Stop();
  server.Stop();
  EXPECT_EQ(server.port(), 0);
  EXPECT_EQ(Connect(port), -1) << "still accepting on " << port;
  EXPECT_EQ(errno, ECONNREFUSED);

  // It can be started again.
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  EXPECT_TRUE(IsReply(Get(server.port(), "/metrics"), 200));
  // The destructor stops it once more.
}

TEST(MetricsHttpServerTest, StopReturnsPromptlyWhileAClientIsStuck) {
  // A body far larger than the socket buffers: the server blocks writing it to
  // a client that never reads. The callback tells when the server is inside
  // that connection.
  std::promise<void> rendering;
  std::future<void> rendered = rendering.get_future();
  std::atomic<bool> signalled{false};
  MetricsHttpServer::Options options;
  options.io_timeout_ms = 600000;  // Stop() must not wait for this
  MetricsHttpServer server(
      [&] {
        if (!signalled.exchange(true)) rendering.set_value();
        return std::string(64 << 20, '#');
      },
      nullptr, options);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  int reader = Connect(server.port());
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(SendAll(reader, "GET /metrics HTTP/1.1\r\n\r\n"));
  ASSERT_EQ(rendered.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  // And one that connects and says nothing, queued behind it.
  int silent = Connect(server.port());
  ASSERT_GE(silent, 0);

  auto start = std::chrono::steady_clock::now();
  server.Stop();
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  close(reader);
  close(silent);
}

TEST(MetricsHttpServerTest, StopReturnsPromptlyWhileWaitingForARequest) {
  MetricsHttpServer::Options options;
  options.io_timeout_ms = 600000;
  MetricsHttpServer server(nullptr, nullptr, options);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  int silent = Connect(server.port());
  ASSERT_GE(silent, 0);
  ASSERT_TRUE(SendAll(silent, "GET /met"));
  auto start = std::chrono::steady_clock::now();
  server.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  close(silent);
}

TEST(MetricsHttpServerTest, PortInUseIsAClearError) {
  MetricsHttpServer first(nullptr, nullptr);
  ASSERT_TRUE(first.Start("127.0.0.1", 0).ok());
  MetricsHttpServer second(nullptr, nullptr);
  Status status = second.Start("127.0.0.1", first.port());
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "cannot listen on 127.0.0.1:" + std::to_string(first.port()) +
                                  ": Address already in use");
  EXPECT_EQ(second.port(), 0);
  second.Stop();  // not running: a no-op
  // The first server is unaffected.
  EXPECT_TRUE(IsReply(Get(first.port(), "/healthz"), 200));
}

TEST(MetricsHttpServerTest, PortOutOfRangeIsRejected) {
  MetricsHttpServer server(nullptr, nullptr);
  EXPECT_TRUE(server.Start("127.0.0.1", 65536).IsInvalidInput());
  EXPECT_TRUE(server.Start("127.0.0.1", -1).IsInvalidInput());
  EXPECT_EQ(server.port(), 0);
}

}  // namespace
}  // namespace denormd
