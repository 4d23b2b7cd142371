// softnic-only tests drive the `softnic` CLI (path in env SOFTNIC_TOOL) to inject faults
// and read counters. Nothing here runs on other providers: SoftnicTest skips there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "verbs_fixture.h"

namespace conformance {

// The fabric this process uses (env SOFTNIC_FABRIC, default "default").
std::string FabricName();

struct ToolResult {
  int exit_code = -1;  // -1: could not run or timed out
  std::string out;
};
// Runs `$SOFTNIC_TOOL args...` with a deadline.
ToolResult RunSoftnicTool(const std::vector<std::string>& args);

// `softnic counters --fabric F --json`, validated against schema_version 1.
std::optional<nlohmann::json> ReadCounters(std::string* error);
// One counter of one device (0 when absent, which the caller's expectation then catches).
uint64_t CounterOf(const nlohmann::json& counters, const std::string& device, const std::string& name);
// The sum of a counter over every device of the fabric.
uint64_t CounterSum(const nlohmann::json& counters, const std::string& name);

// A fixture for softnic-only tests: skips on other providers or without SOFTNIC_TOOL,
// and clears the fabric's faults after each test.
class SoftnicTest : public VerbsTest {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Runs `softnic faults ARGS --fabric F`; fails the test when the tool fails.
  void Faults(const std::vector<std::string>& args);
  void Counters(nlohmann::json* out);
};

}  // namespace conformance
