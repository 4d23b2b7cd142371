#include "softnic_tool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace conformance {

namespace {

constexpr std::chrono::milliseconds kToolTimeoutMs{10'000};

std::string ToolPath() {
  const char* path = std::getenv("SOFTNIC_TOOL");
  return path != nullptr ? path : "";
}

}  // namespace

std::string FabricName() {
  const char* name = std::getenv("SOFTNIC_FABRIC");
  return name != nullptr && *name != '\0' ? name : "default";
}

ToolResult RunSoftnicTool(const std::vector<std::string>& args) {
  ToolResult result;
  const std::string tool = ToolPath();
  if (tool.empty()) return result;
  std::vector<std::string> strings = {tool};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return result;
  // posix_spawn keeps the parent suspended until the exec (see Child::Spawn).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    close(out[0]);
    close(out[1]);
    return result;
  }
  close(out[1]);
  const auto deadline = std::chrono::steady_clock::now() + kToolTimeoutMs;
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{out[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(out[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    result.out.append(chunk, static_cast<size_t>(n));
  }
  close(out[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

std::optional<nlohmann::json> ReadCounters(std::string* error) {
  const ToolResult run = RunSoftnicTool({"counters", "--fabric", FabricName(), "--json"});
  if (run.exit_code != 0) {
    *error = "softnic counters --fabric " + FabricName() + " --json exited " + std::to_string(run.exit_code);
    return std::nullopt;
  }
  nlohmann::json doc = nlohmann::json::parse(run.out, nullptr, false);
  if (doc.is_discarded()) {
    *error = "softnic counters printed invalid JSON: " + run.out.substr(0, 200);
    return std::nullopt;
  }
  if (!doc.contains("schema_version") || doc["schema_version"] != 1 || !doc.contains("devices") ||
      !doc["devices"].is_array()) {
    *error = "softnic counters JSON lacks schema_version 1 or devices[]: " + run.out.substr(0, 200);
    return std::nullopt;
  }
  return doc;
}

uint64_t CounterOf(const nlohmann::json& counters, const std::string& device, const std::string& name) {
  for (const nlohmann::json& entry : counters["devices"]) {
    if (entry.value("name", "") != device || !entry.contains("counters")) continue;
    const nlohmann::json& values = entry["counters"];
    if (values.contains(name) && values[name].is_number_unsigned()) return values[name].get<uint64_t>();
  }
  return 0;
}

uint64_t CounterSum(const nlohmann::json& counters, const std::string& name) {
  uint64_t sum = 0;
  for (const nlohmann::json& entry : counters["devices"])
    sum += CounterOf(counters, entry.value("name", ""), name);
  return sum;
}

void SoftnicTest::SetUp() {
  CONFORMANCE_SETUP(VerbsTest::SetUp());
  if (!local().softnic() || !peer().softnic())
    GTEST_SKIP() << "softnic-only test (fault injection / counters); devices are " << local().name() << ", "
                 << peer().name();
  if (ToolPath().empty()) GTEST_SKIP() << "env SOFTNIC_TOOL (path of the softnic CLI) is not set";
}

void SoftnicTest::TearDown() {
  if (!IsSkipped() && !ToolPath().empty()) RunSoftnicTool({"faults", "clear", "--fabric", FabricName()});
}

void SoftnicTest::Faults(const std::vector<std::string>& args) {
  // `softnic faults SUBCOMMAND --fabric F OPTIONS...`
  std::vector<std::string> full = {"faults", args.at(0), "--fabric", FabricName()};
  full.insert(full.end(), args.begin() + 1, args.end());
  const ToolResult run = RunSoftnicTool(full);
  std::string line;
  for (const std::string& a : full) line += " " + a;
  ASSERT_EQ(run.exit_code, 0) << "softnic" << line << " failed";
}

void SoftnicTest::Counters(nlohmann::json* out) {
  std::string error;
  std::optional<nlohmann::json> doc = ReadCounters(&error);
  ASSERT_TRUE(doc.has_value()) << error;
  *out = *doc;
}

}  // namespace conformance
