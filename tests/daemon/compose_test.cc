// Static checks of the container files: docker-compose.yml, the Dockerfile and
// deploy/compose-config.yaml. No Docker engine is needed: the files are parsed
// and cross-checked, so that the compose stack's hosts, ports, topic and
// credentials agree with each other, with the image, and with the project's own
// configuration loader.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "config/config.h"
#include "tests/test_support.h"

namespace denormd {
namespace {

using testing::ReadFile;
using testing::SourcePath;

constexpr char kComposeFile[] = "docker-compose.yml";

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// A relative compose path ("./deploy/x.yaml") as a source-tree path.
std::string RepoPath(std::string relative) {
  if (relative.rfind("./", 0) == 0) relative = relative.substr(2);
  return SourcePath(relative);
}

// The value following `flag` in `words` ("--topic x" or "--topic=x"), or "".
std::string FlagValue(const std::vector<std::string>& words, const std::string& flag) {
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == flag && i + 1 < words.size()) return words[i + 1];
    if (words[i].rfind(flag + "=", 0) == 0) return words[i].substr(flag.size() + 1);
  }
  return "";
}

// ---------------------------------------------------------------------------
// Compose helpers. Each accepts both the short and the long compose syntaxes.

class ComposeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = ReadFile(SourcePath(kComposeFile));
    ASSERT_FALSE(text_.empty());
    try {
      root_ = YAML::Load(text_);
    } catch (const YAML::Exception& e) {
      FAIL() << kComposeFile << " does not parse: " << e.what();
    }
    ASSERT_TRUE(root_.IsMap()) << kComposeFile << " is not a mapping";
    ASSERT_TRUE(root_["services"].IsMap()) << "no services: mapping";
  }

  YAML::Node Service(const std::string& name) const { return root_["services"][name]; }

  // environment: as a map, or a list of KEY=VALUE.
  static std::map<std::string, std::string> Environment(const YAML::Node& service) {
    std::map<std::string, std::string> env;
    YAML::Node node = service["environment"];
    if (node.IsMap()) {
      for (const auto& kv : node) {
        env[kv.first.as<std::string>()] = kv.second.IsNull() ? "" : kv.second.as<std::string>();
      }
    } else if (node.IsSequence()) {
      for (const auto& item : node) {
        std::string s = item.as<std::string>();
        size_t eq = s.find('=');
        env[s.substr(0, eq)] = eq == std::string::npos ? "" : s.substr(eq + 1);
      }
    }
    return env;
  }

  // command: / entrypoint: as a list of words (a string is split on spaces).
  static std::vector<std::string> Words(const YAML::Node& node) {
    std::vector<std::string> out;
    if (node.IsSequence()) {
      for (const auto& item : node) out.push_back(item.as<std::string>());
    } else if (node.IsScalar()) {
      std::istringstream in(node.as<std::string>());
      for (std::string w; in >> w;) out.push_back(w);
    }
    return out;
  }

  // depends_on: service -> condition ("service_started" for the list form).
  static std::map<std::string, std::string> DependsOn(const YAML::Node& service) {
    std::map<std::string, std::string> out;
    YAML::Node node = service["depends_on"];
    if (node.IsSequence()) {
      for (const auto& item : node) out[item.as<std::string>()] = "service_started";
    } else if (node.IsMap()) {
      for (const auto& kv : node) {
        YAML::Node condition = kv.second["condition"];
        out[kv.first.as<std::string>()] =
            condition ? condition.as<std::string>() : "service_started";
      }
    }
    return out;
  }

  struct Mount {
    std::string source;
    std::string target;
    bool read_only = false;
  };
  static std::vector<Mount> Mounts(const YAML::Node& service) {
    std::vector<Mount> out;
    for (const auto& item : service["volumes"]) {
      Mount m;
      if (item.IsMap()) {
        m.source = item["source"].as<std::string>("");
        m.target = item["target"].as<std::string>("");
        m.read_only = item["read_only"].as<bool>(false);
      } else {
        std::vector<std::string> parts = Split(item.as<std::string>(), ':');
        if (parts.size() >= 2) {
          m.source = parts[0];
          m.target = parts[1];
          m.read_only = parts.size() >= 3 && Split(parts[2], ',')[0] == "ro";
        }
      }
      out.push_back(m);
    }
    return out;
  }

  struct Port {
    std::string published;
    std::string target;
  };
  static std::vector<Port> Ports(const YAML::Node& service) {
    std::vector<Port> out;
    for (const auto& item : service["ports"]) {
      Port p;
      if (item.IsMap()) {
        p.published = item["published"].as<std::string>("");
        p.target = item["target"].as<std::string>("");
      } else {
        std::string s = item.as<std::string>();
        s = s.substr(0, s.find('/'));  // "9464:9464/tcp"
        std::vector<std::string> parts = Split(s, ':');
        p.target = parts.back();
        if (parts.size() >= 2) p.published = parts[parts.size() - 2];
      }
      out.push_back(p);
    }
    return out;
  }

  // The mount of the daemon's config file: the target named by -c in the
  // image's default command.
  std::optional<Mount> ConfigMount(const std::string& target) const {
    for (const Mount& m : Mounts(Service("denormd"))) {
      if (m.target == target) return m;
    }
    return std::nullopt;
  }

  std::string text_;
  YAML::Node root_;
};

// ---------------------------------------------------------------------------
// Dockerfile: instructions per stage, with line continuations joined.

struct Instruction {
  std::string keyword;  // upper case
  std::string args;
};
struct Stage {
  std::string from;  // image
  std::string name;  // AS name, or ""
  std::vector<Instruction> instructions;

  std::vector<std::string> All(const std::string& keyword) const {
    std::vector<std::string> out;
    for (const Instruction& i : instructions) {
      if (i.keyword == keyword) out.push_back(i.args);
    }
    return out;
  }
  std::string Last(const std::string& keyword) const {
    std::vector<std::string> all = All(keyword);
    return all.empty() ? "" : all.back();
  }
};

std::vector<Stage> ParseDockerfile(const std::string& text) {
  std::vector<Stage> stages;
  std::istringstream in(text);
  std::string line, logical;
  auto flush = [&]() {
    std::string s = Trim(logical);
    logical.clear();
    if (s.empty()) return;
    size_t sp = s.find_first_of(" \t");
    Instruction ins;
    ins.keyword = s.substr(0, sp);
    std::transform(ins.keyword.begin(), ins.keyword.end(), ins.keyword.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    ins.args = sp == std::string::npos ? "" : Trim(s.substr(sp));
    if (ins.keyword == "FROM") {
      Stage stage;
      std::istringstream words(ins.args);
      std::vector<std::string> w;
      for (std::string x; words >> x;) {
        if (x.rfind("--", 0) != 0) w.push_back(x);  // skip --platform=...
      }
      if (!w.empty()) stage.from = w[0];
      if (w.size() >= 3 && Lower(w[1]) == "as") stage.name = w[2];
      stages.push_back(stage);
    } else if (!stages.empty()) {
      stages.back().instructions.push_back(ins);
    }
  };
  while (std::getline(in, line)) {
    std::string t = Trim(line);
    if (t.empty() && logical.empty()) continue;
    if (!t.empty() && t[0] == '#') continue;  // comments, also inside continuations
    if (!t.empty() && t.back() == '\\') {
      logical += t.substr(0, t.size() - 1) + " ";
      continue;
    }
    logical += t;
    flush();
  }
  flush();
  return stages;
}

// An exec-form ["a", "b"] argument list (JSON is YAML).
std::vector<std::string> ExecForm(const std::string& args) {
  std::vector<std::string> out;
  try {
    YAML::Node node = YAML::Load(args);
    if (!node.IsSequence()) return out;
    for (const auto& item : node) out.push_back(item.as<std::string>());
  } catch (const YAML::Exception&) {
  }
  return out;
}

class DockerfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(FileExists(SourcePath("Dockerfile")));
    stages_ = ParseDockerfile(ReadFile(SourcePath("Dockerfile")));
    ASSERT_GE(stages_.size(), 2u) << "the Dockerfile should be multi-stage";
  }
  const Stage& Final() const { return stages_.back(); }
  std::vector<std::string> Cmd() const { return ExecForm(Final().Last("CMD")); }

  std::vector<Stage> stages_;
};

// ---------------------------------------------------------------------------
// Deep equality of YAML trees (yaml-cpp's == is identity).

bool SameYaml(const YAML::Node& a, const YAML::Node& b, const std::string& where,
              std::string* diff) {
  if (a.Type() != b.Type()) {
    *diff = where + ": different kinds of node";
    return false;
  }
  switch (a.Type()) {
    case YAML::NodeType::Scalar:
      if (a.Scalar() != b.Scalar()) {
        *diff = where + ": " + a.Scalar() + " != " + b.Scalar();
        return false;
      }
      return true;
    case YAML::NodeType::Sequence:
      if (a.size() != b.size()) {
        *diff = where + ": different lengths";
        return false;
      }
      for (size_t i = 0; i < a.size(); ++i) {
        if (!SameYaml(a[i], b[i], where + "[" + std::to_string(i) + "]", diff)) return false;
      }
      return true;
    case YAML::NodeType::Map: {
      if (a.size() != b.size()) {
        *diff = where + ": different numbers of keys";
        return false;
      }
      auto ia = a.begin();
      auto ib = b.begin();
      for (; ia != a.end(); ++ia, ++ib) {  // same keys in the same order
        std::string ka = ia->first.as<std::string>(), kb = ib->first.as<std::string>();
        if (ka != kb) {
          *diff = where + ": key " + ka + " != " + kb;
          return false;
        }
        if (!SameYaml(ia->second, ib->second, where + "." + ka, diff)) return false;
      }
      return true;
    }
    default:
      return true;
  }
}

// postgresql://user:password@host:port/db
struct PostgresUrl {
  std::string user, password, host, port, db;
};
std::optional<PostgresUrl> ParsePostgresUrl(const std::string& url) {
  std::string rest;
  for (const char* scheme : {"postgresql://", "postgres://"}) {
    if (url.rfind(scheme, 0) == 0) rest = url.substr(std::string(scheme).size());
  }
  if (rest.empty()) return std::nullopt;
  PostgresUrl u;
  size_t at = rest.rfind('@');
  if (at != std::string::npos) {
    std::string cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = cred.find(':');
    u.user = cred.substr(0, colon);
    if (colon != std::string::npos) u.password = cred.substr(colon + 1);
  }
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) u.db = rest.substr(slash + 1, rest.find('?', slash) - slash - 1);
  size_t colon = hostport.rfind(':');
  u.host = hostport.substr(0, colon);
  u.port = colon == std::string::npos ? "5432" : hostport.substr(colon + 1);
  return u;
}

std::string Dump(const std::vector<ConfigError>& errors, const std::string& file) {
  std::string out;
  for (const ConfigError& e : errors) out += "  " + e.ToString(file) + "\n";
  return out;
}

// ===========================================================================
// docker-compose.yml on its own

TEST_F(ComposeTest, HasTheServicesAndNoObsoleteVersionKey) {
  for (const char* name : {"kafka", "kafka-init", "postgres", "denormd"}) {
    EXPECT_TRUE(Service(name).IsMap()) << "no service " << name;
  }
  EXPECT_FALSE(root_["version"]) << "the top-level version: key is obsolete";
}

TEST_F(ComposeTest, KafkaIsASingleKraftNode) {
  YAML::Node kafka = Service("kafka");
  ASSERT_TRUE(kafka.IsMap());
  EXPECT_EQ(kafka["image"].as<std::string>(""), "apache/kafka:4.1.0");
  std::map<std::string, std::string> env = Environment(kafka);

  std::vector<std::string> roles = Split(env["KAFKA_PROCESS_ROLES"], ',');
  EXPECT_NE(std::find(roles.begin(), roles.end(), "controller"), roles.end())
      << "KAFKA_PROCESS_ROLES=" << env["KAFKA_PROCESS_ROLES"];
  EXPECT_NE(std::find(roles.begin(), roles.end(), "broker"), roles.end())
      << "KAFKA_PROCESS_ROLES=" << env["KAFKA_PROCESS_ROLES"];
  EXPECT_EQ(Lower(text_).find("zookeeper"), std::string::npos) << "ZooKeeper in a KRaft stack";

  // The controller listener exists, and the quorum voter is this node on it.
  const std::string controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"];
  ASSERT_FALSE(controller.empty());
  std::string controller_port;
  for (const std::string& l : Split(env["KAFKA_LISTENERS"], ',')) {
    if (l.rfind(controller + "://", 0) == 0) controller_port = l.substr(l.rfind(':') + 1);
  }
  ASSERT_FALSE(controller_port.empty()) << "KAFKA_LISTENERS=" << env["KAFKA_LISTENERS"];
  EXPECT_EQ(env["KAFKA_CONTROLLER_QUORUM_VOTERS"],
            env["KAFKA_NODE_ID"] + "@kafka:" + controller_port);
  std::vector<std::string> protocols = Split(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], ',');
  EXPECT_NE(std::find(protocols.begin(), protocols.end(), controller + ":PLAINTEXT"),
            protocols.end());
  EXPECT_NE(std::find(protocols.begin(), protocols.end(), "PLAINTEXT:PLAINTEXT"),
            protocols.end());

  // One broker: internal topics cannot have more than one replica.
  EXPECT_EQ(env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"], "1");
  EXPECT_EQ(env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"], "1");
  EXPECT_EQ(env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"], "1");
  EXPECT_EQ(env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"], "0");

  // A healthcheck (service_healthy waits on it) that asks the broker itself.
  std::vector<std::string> test = Words(kafka["healthcheck"]["test"]);
  ASSERT_FALSE(test.empty()) << "kafka has no healthcheck";
  EXPECT_EQ(test[0], "CMD");
  ASSERT_GE(test.size(), 2u);
  EXPECT_EQ(test[1], "/opt/kafka/bin/kafka-topics.sh");
  EXPECT_EQ(FlagValue(test, "--bootstrap-server"), "localhost:9092");
}

TEST_F(ComposeTest, KafkaInitCreatesTheTopicOnTheSameBrokerImage) {
  YAML::Node init = Service("kafka-init");
  ASSERT_TRUE(init.IsMap());
  EXPECT_EQ(init["image"].as<std::string>(""), Service("kafka")["image"].as<std::string>("?"));
  std::vector<std::string> words = Words(init["entrypoint"]);
  for (const std::string& w : Words(init["command"])) words.push_back(w);
  ASSERT_FALSE(words.empty());
  EXPECT_EQ(words[0], "/opt/kafka/bin/kafka-topics.sh");
  EXPECT_NE(std::find(words.begin(), words.end(), "--create"), words.end());
  EXPECT_NE(std::find(words.begin(), words.end(), "--if-not-exists"), words.end())
      << "a second `up` would fail on the existing topic";
  EXPECT_EQ(FlagValue(words, "--topic"), "article.entities");
  EXPECT_EQ(FlagValue(words, "--partitions"), "4");
  EXPECT_EQ(FlagValue(words, "--replication-factor"), "1");
  EXPECT_EQ(FlagValue(words, "--bootstrap-server"), "kafka:9092");
  EXPECT_EQ(DependsOn(init)["kafka"], "service_healthy");
  EXPECT_NE(init["restart"].as<std::string>("no"), "always") << "a one-shot job";
}

TEST_F(ComposeTest, PostgresHasCredentialsHealthcheckAndVolume) {
  YAML::Node pg = Service("postgres");
  ASSERT_TRUE(pg.IsMap());
  EXPECT_EQ(pg["image"].as<std::string>(""), "postgres:15");
  std::map<std::string, std::string> env = Environment(pg);
  EXPECT_EQ(env["POSTGRES_USER"], "denormd");
  EXPECT_EQ(env["POSTGRES_PASSWORD"], "denormd");
  EXPECT_EQ(env["POSTGRES_DB"], "denorm");

  std::string test;
  for (const std::string& w : Words(pg["healthcheck"]["test"])) test += w + " ";
  EXPECT_NE(test.find("pg_isready"), std::string::npos) << "healthcheck: " << test;

  bool named_data_volume = false;
  for (const Mount& m : Mounts(pg)) {
    if (m.target == "/var/lib/postgresql/data" && root_["volumes"][m.source]) {
      named_data_volume = true;
    }
  }
  EXPECT_TRUE(named_data_volume) << "postgres data should live in a top-level named volume";
}

TEST_F(ComposeTest, DenormdStartsAfterItsDependenciesAreReady) {
  YAML::Node d = Service("denormd");
  ASSERT_TRUE(d.IsMap());
  std::map<std::string, std::string> deps = DependsOn(d);
  EXPECT_EQ(deps["kafka"], "service_healthy");
  EXPECT_EQ(deps["kafka-init"], "service_completed_successfully");
  EXPECT_EQ(deps["postgres"], "service_healthy");
  EXPECT_EQ(d["restart"].as<std::string>(""), "unless-stopped");
  // service_healthy needs a healthcheck on the other side.
  EXPECT_TRUE(Service("kafka")["healthcheck"]["test"]);
  EXPECT_TRUE(Service("postgres")["healthcheck"]["test"]);
}

TEST_F(ComposeTest, DenormdBuildsFromTheRepositoryDockerfile) {
  YAML::Node build = Service("denormd")["build"];
  ASSERT_TRUE(build) << "denormd should be built from the repository";
  std::string context, dockerfile = "Dockerfile";
  if (build.IsScalar()) {
    context = build.as<std::string>();
  } else {
    context = build["context"].as<std::string>("");
    dockerfile = build["dockerfile"].as<std::string>("Dockerfile");
  }
  EXPECT_TRUE(context == "." || context == "./") << "build context " << context;
  EXPECT_TRUE(FileExists(SourcePath(dockerfile))) << dockerfile;
  EXPECT_TRUE(FileExists(SourcePath(".dockerignore")));
  // The context must not drag the build tree and git history along.
  std::vector<std::string> ignored;
  for (const std::string& l : Split(ReadFile(SourcePath(".dockerignore")), '\n')) {
    ignored.push_back(Trim(l));
  }
  for (const char* dir : {"build/", ".local/", ".git/"}) {
    EXPECT_NE(std::find(ignored.begin(), ignored.end(), dir), ignored.end()) << dir;
  }
}

TEST_F(ComposeTest, DemoProducerIsOptInAndPublishesTheArticleEvents) {
  YAML::Node producer = Service("producer");
  if (!producer) GTEST_SKIP() << "no producer service";
  std::vector<std::string> profiles = Words(producer["profiles"]);
  EXPECT_NE(std::find(profiles.begin(), profiles.end(), "demo"), profiles.end())
      << "the producer must not run on a plain `docker compose up`";
  std::string script;
  for (const std::string& w : Words(producer["entrypoint"])) script += w + " ";
  for (const std::string& w : Words(producer["command"])) script += w + " ";
  EXPECT_NE(script.find("kafka-console-producer.sh"), std::string::npos) << script;
  EXPECT_NE(script.find("--topic article.entities"), std::string::npos) << script;
  EXPECT_NE(script.find("--bootstrap-server kafka:9092"), std::string::npos) << script;
  bool events_mounted = false;
  for (const Mount& m : Mounts(producer)) {
    if (m.source == "./tests/data/article/events.jsonl") {
      events_mounted = FileExists(RepoPath(m.source)) &&
                       script.find("< " + m.target) != std::string::npos;
    }
  }
  EXPECT_TRUE(events_mounted) << "the producer should read the mounted events.jsonl";
  EXPECT_EQ(DependsOn(producer)["kafka-init"], "service_completed_successfully");
}

// ===========================================================================
// The Dockerfile on its own

TEST_F(DockerfileTest, BuildStageCompilesTheDaemonOnBookworm) {
  const Stage& build = stages_.front();
  EXPECT_EQ(build.from, "debian:bookworm");
  ASSERT_FALSE(build.name.empty());
  std::string runs;
  for (const std::string& r : build.All("RUN")) runs += r + "\n";
  for (const char* pkg : {"libpqxx-dev", "librdkafka-dev", "rapidjson-dev", "libyaml-cpp-dev",
                          "libgtest-dev", "cmake", "ninja-build", "pkg-config", "g++"}) {
    EXPECT_NE(runs.find(std::string(" ") + pkg), std::string::npos) << pkg;
  }
  EXPECT_NE(runs.find("-G Ninja"), std::string::npos);
  EXPECT_NE(runs.find("-DCMAKE_BUILD_TYPE=Release"), std::string::npos);
  EXPECT_NE(runs.find("--target denormd"), std::string::npos);
}

TEST_F(DockerfileTest, RuntimeStageIsSlimNonRootAndRunsDenormd) {
  const Stage& final_stage = Final();
  EXPECT_EQ(final_stage.from, "debian:bookworm-slim");
  std::string runs;
  for (const std::string& r : final_stage.All("RUN")) runs += r + "\n";
  for (const char* pkg :
       {"libpqxx-6.4", "librdkafka++1", "librdkafka1", "libyaml-cpp0.7", "ca-certificates"}) {
    EXPECT_NE(runs.find(std::string(" ") + pkg), std::string::npos) << pkg;
  }
  EXPECT_EQ(runs.find("-dev"), std::string::npos) << "no -dev packages at runtime";
  EXPECT_EQ(runs.find("g++"), std::string::npos) << "no compiler at runtime";

  // The binary comes from the build stage to /usr/local/bin/denormd.
  bool copied = false;
  for (const std::string& c : final_stage.All("COPY")) {
    if (c.find("--from=" + stages_.front().name + " ") != std::string::npos &&
        c.size() >= 23 && c.compare(c.size() - 23, 23, " /usr/local/bin/denormd") == 0) {
      copied = true;
    }
  }
  EXPECT_TRUE(copied) << "COPY --from=" << stages_.front().name << " ... /usr/local/bin/denormd";

  std::string user = final_stage.Last("USER");
  ASSERT_FALSE(user.empty()) << "the image would run as root";
  std::string uid = user.substr(0, user.find(':'));
  EXPECT_NE(uid, "root");
  EXPECT_NE(uid, "0");

  std::vector<std::string> entrypoint = ExecForm(final_stage.Last("ENTRYPOINT"));
  ASSERT_EQ(entrypoint.size(), 1u) << final_stage.Last("ENTRYPOINT");
  EXPECT_TRUE(entrypoint[0] == "denormd" || entrypoint[0] == "/usr/local/bin/denormd")
      << entrypoint[0];

  std::vector<std::string> cmd = Cmd();
  ASSERT_FALSE(cmd.empty()) << "CMD should be in exec form";
  EXPECT_EQ(cmd[0], "run");
  EXPECT_EQ(FlagValue(cmd, "-c"), "/etc/denormd/config.yaml");
  // Metrics must listen on all interfaces, or the published port reaches nothing.
  EXPECT_EQ(FlagValue(cmd, "--metrics-address"), "0.0.0.0");
  std::string port = FlagValue(cmd, "--metrics-port");
  EXPECT_EQ(port, "9464");
  std::vector<std::string> exposed;
  for (const std::string& e : final_stage.All("EXPOSE")) {
    std::istringstream in(e);
    for (std::string p; in >> p;) exposed.push_back(p.substr(0, p.find('/')));
  }
  EXPECT_NE(std::find(exposed.begin(), exposed.end(), port), exposed.end())
      << "EXPOSE does not include the metrics port " << port;
}

// ===========================================================================
// The two together, and the daemon's configuration

class ComposeWithImageTest : public ComposeTest {
 protected:
  void SetUp() override {
    ComposeTest::SetUp();
    if (HasFatalFailure()) return;
    std::vector<Stage> stages = ParseDockerfile(ReadFile(SourcePath("Dockerfile")));
    ASSERT_FALSE(stages.empty());
    cmd_ = ExecForm(stages.back().Last("CMD"));
    config_target_ = FlagValue(cmd_, "-c");
    ASSERT_FALSE(config_target_.empty()) << "the image's CMD names no -c CONFIG";
  }

  // The config mounted where the image's CMD reads it, loaded by the project's
  // own loader.
  std::optional<Config> LoadMountedConfig(std::string* source) {
    std::optional<Mount> mount = ConfigMount(config_target_);
    if (!mount) {
      ADD_FAILURE() << "denormd mounts nothing at " << config_target_;
      return std::nullopt;
    }
    *source = RepoPath(mount->source);
    if (!FileExists(*source)) {
      ADD_FAILURE() << "mounted config " << mount->source << " does not exist";
      return std::nullopt;
    }
    std::vector<ConfigError> errors;
    std::optional<Config> config = LoadConfig(*source, &errors);
    EXPECT_TRUE(errors.empty()) << Dump(errors, *source);
    EXPECT_TRUE(config.has_value()) << Dump(errors, *source);
    return config;
  }

  std::vector<std::string> cmd_;
  std::string config_target_;
};

TEST_F(ComposeWithImageTest, ConfigIsMountedReadOnlyAndValid) {
  std::optional<Mount> mount = ConfigMount(config_target_);
  ASSERT_TRUE(mount.has_value()) << "denormd mounts nothing at " << config_target_;
  EXPECT_EQ(mount->source, "./deploy/compose-config.yaml");
  EXPECT_TRUE(mount->read_only);
  std::string source;
  std::optional<Config> config = LoadMountedConfig(&source);
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->store.schema, "article");
}

TEST_F(ComposeWithImageTest, ConfigBrokersAndTopicMatchTheKafkaServices) {
  std::string source;
  std::optional<Config> config = LoadMountedConfig(&source);
  ASSERT_TRUE(config.has_value());
  ASSERT_TRUE(config->kafka.has_value()) << source << " has no source.kafka";

  // Every broker is an advertised PLAINTEXT listener of the kafka service.
  std::map<std::string, std::string> env = Environment(Service("kafka"));
  std::vector<std::string> advertised;
  for (const std::string& l : Split(env["KAFKA_ADVERTISED_LISTENERS"], ',')) {
    if (l.rfind("PLAINTEXT://", 0) == 0) advertised.push_back(l.substr(12));
  }
  ASSERT_FALSE(advertised.empty()) << "KAFKA_ADVERTISED_LISTENERS has no PLAINTEXT listener";
  EXPECT_EQ(advertised[0], "kafka:9092");
  std::vector<std::string> brokers = Split(config->kafka->brokers, ',');
  ASSERT_FALSE(brokers.empty());
  for (const std::string& b : brokers) {
    EXPECT_NE(std::find(advertised.begin(), advertised.end(), Trim(b)), advertised.end())
        << "broker " << b << " is not advertised by the kafka service ("
        << env["KAFKA_ADVERTISED_LISTENERS"] << ")";
  }
  // ...and its port is one the broker listens on.
  std::string listeners = "," + env["KAFKA_LISTENERS"];
  for (const std::string& b : brokers) {
    EXPECT_NE(listeners.find("," + std::string("PLAINTEXT://:") + b.substr(b.rfind(':') + 1)),
              std::string::npos)
        << "KAFKA_LISTENERS=" << env["KAFKA_LISTENERS"];
  }

  // Every topic is the one kafka-init creates.
  std::vector<std::string> init = Words(Service("kafka-init")["entrypoint"]);
  for (const std::string& w : Words(Service("kafka-init")["command"])) init.push_back(w);
  ASSERT_FALSE(config->kafka->topics.empty());
  for (const std::string& topic : config->kafka->topics) {
    EXPECT_EQ(topic, FlagValue(init, "--topic")) << "kafka-init does not create " << topic;
  }
  EXPECT_EQ(config->kafka->group, "denormd-article");
}

TEST_F(ComposeWithImageTest, PostgresUrlPointsAtThePostgresService) {
  std::string source;
  std::optional<Config> config = LoadMountedConfig(&source);
  ASSERT_TRUE(config.has_value());
  std::map<std::string, std::string> pg = Environment(Service("postgres"));

  // Both the config's URL and the DENORMD_POSTGRES that overrides it.
  std::map<std::string, std::string> env = Environment(Service("denormd"));
  ASSERT_TRUE(env.count("DENORMD_POSTGRES")) << "denormd has no DENORMD_POSTGRES";
  for (const std::string& url : {config->store.postgres, env["DENORMD_POSTGRES"]}) {
    std::optional<PostgresUrl> u = ParsePostgresUrl(url);
    ASSERT_TRUE(u.has_value()) << "not a postgresql:// URL: " << url;
    EXPECT_EQ(u->host, "postgres") << url;
    EXPECT_TRUE(Service(u->host).IsMap()) << "no service " << u->host;
    EXPECT_EQ(u->port, "5432") << url;
    EXPECT_EQ(u->user, pg["POSTGRES_USER"]) << url;
    EXPECT_EQ(u->password, pg["POSTGRES_PASSWORD"]) << url;
    EXPECT_EQ(u->db, pg["POSTGRES_DB"]) << url;
  }
}

TEST_F(ComposeWithImageTest, ConfigIsTheArticleModel) {
  std::optional<Mount> mount = ConfigMount(config_target_);
  ASSERT_TRUE(mount.has_value());
  YAML::Node ours = YAML::LoadFile(RepoPath(mount->source));
  YAML::Node article = YAML::LoadFile(SourcePath("tests/data/article/config.yaml"));
  for (const char* key : {"entities", "projections"}) {
    std::string diff;
    EXPECT_TRUE(SameYaml(ours[key], article[key], key, &diff))
        << mount->source << " differs from tests/data/article/config.yaml: " << diff;
  }
  std::string diff;
  EXPECT_TRUE(SameYaml(ours["store"]["schema"], article["store"]["schema"], "store.schema", &diff))
      << diff;
}

TEST_F(ComposeWithImageTest, PublishedPortIsTheImagesMetricsPort) {
  std::vector<Stage> stages = ParseDockerfile(ReadFile(SourcePath("Dockerfile")));
  std::string metrics_port = FlagValue(cmd_, "--metrics-port");
  ASSERT_FALSE(metrics_port.empty());
  std::vector<std::string> exposed;
  for (const std::string& e : stages.back().All("EXPOSE")) {
    std::istringstream in(e);
    for (std::string p; in >> p;) exposed.push_back(p.substr(0, p.find('/')));
  }
  std::vector<Port> ports = Ports(Service("denormd"));
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].target, metrics_port);
  EXPECT_EQ(ports[0].published, metrics_port);
  EXPECT_NE(std::find(exposed.begin(), exposed.end(), ports[0].target), exposed.end());
  // A command: override in compose would drop the image's --metrics-port.
  EXPECT_FALSE(Service("denormd")["command"]) << "compose overrides the image's CMD";
  EXPECT_FALSE(Service("denormd")["entrypoint"]) << "compose overrides the image's ENTRYPOINT";
}

}  // namespace
}  // namespace denormd
