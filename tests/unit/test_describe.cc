// --describe of rdmalab-bench and rdmalab-kv (schema rdmalab-describe/1): generated from the
// flag tables, the mode table and the system table, and every name a mode or system row
// lists is a parameter of its program.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/options.h"
#include "kv/core/options.h"
#include "kv/core/systems.h"
#include "rdma/error.h"

namespace rdmalab {
namespace {

using nlohmann::ordered_json;

std::set<std::string> ParamNames(const ordered_json& describe) {
  std::set<std::string> names;
  for (const auto& param : describe.at("params")) names.insert(param.at("name").get<std::string>());
  return names;
}

// The contract's fields: every parameter's, and each mode's and system's names.
void ExpectContract(const ordered_json& describe, const std::string& program) {
  EXPECT_EQ(describe.at("schema_version"), "rdmalab-describe/1");
  EXPECT_EQ(describe.at("program"), program);
  EXPECT_EQ(describe.at("backends"), ordered_json({"softnic", "verbs"}));
  ASSERT_FALSE(describe.at("params").empty());
  for (const auto& param : describe.at("params")) {
    const std::string name = param.at("name");
    EXPECT_EQ(name.find('-'), std::string::npos) << name << ": one spelling, with '_'";
    for (const char* field : {"flag", "type", "list", "unit", "default", "symmetric", "roles", "scope", "help"}) {
      EXPECT_TRUE(param.contains(field)) << name << " lacks " << field;
    }
    const std::string type = param.at("type");
    EXPECT_TRUE(type == "integer" || type == "number" || type == "boolean" || type == "string") << name;
    if (type == "integer" || type == "number") {
      ASSERT_TRUE(param.contains("min") && param.contains("max")) << name;
      EXPECT_LE(param.at("min").get<double>(), param.at("max").get<double>()) << name;
      if (!param.at("default").is_null()) {
        EXPECT_GE(param.at("default").get<double>(), param.at("min").get<double>()) << name;
        EXPECT_LE(param.at("default").get<double>(), param.at("max").get<double>()) << name;
      }
    }
    if (param.contains("choices") && !param.at("default").is_null()) {
      const auto& choices = param.at("choices");
      EXPECT_NE(std::find(choices.begin(), choices.end(), param.at("default")), choices.end()) << name;
    }
    EXPECT_FALSE(param.at("roles").empty()) << name;
    EXPECT_TRUE(param.at("scope") == "experiment" || param.at("scope") == "coordinator") << name;
  }
  const std::set<std::string> names = ParamNames(describe);
  for (const char* coordinator : {"ib_dev", "ib_port", "gid_index", "port", "rendezvous", "role", "index", "peers",
                                  "out_json", "timeout"}) {
    ASSERT_TRUE(names.contains(coordinator)) << coordinator;
  }
  for (const auto& param : describe.at("params")) {
    const bool coordinator = param.at("name") == "ib_dev" || param.at("name") == "rendezvous" ||
                             param.at("name") == "timeout" || param.at("name") == "out_json";
    if (coordinator) {
      EXPECT_EQ(param.at("scope"), "coordinator") << param.at("name");
    }
  }
  ASSERT_FALSE(describe.at("modes").empty());
  for (const char* list : {"modes", "systems"}) {
    if (!describe.contains(list)) continue;
    for (const auto& entry : describe.at(list)) {
      EXPECT_FALSE(entry.at("summary").get<std::string>().empty());
      for (const auto& name : entry.at("params")) EXPECT_TRUE(names.contains(name)) << entry.at("name") << ": " << name;
      EXPECT_TRUE(std::find(entry.at("params").begin(), entry.at("params").end(), "timeout") !=
                  entry.at("params").end())
          << entry.at("name") << " lacks the participant's parameters";
    }
  }
}

TEST(Describe, BenchFollowsTheContract) {
  const ordered_json describe = DescribeJson(bench::BenchCommandLine());
  ExpectContract(describe, "rdmalab-bench");
  EXPECT_FALSE(describe.contains("systems"));
  const auto& tx_depth = *std::find_if(describe.at("params").begin(), describe.at("params").end(),
                                       [](const auto& p) { return p.at("name") == "tx_depth"; });
  EXPECT_EQ(tx_depth.at("flag"), "--tx-depth");
  EXPECT_EQ(tx_depth.at("short"), "-t");
  EXPECT_EQ(tx_depth.at("unit"), "WRs");
  EXPECT_EQ(tx_depth.at("default"), 128);
  EXPECT_EQ(tx_depth.at("min"), 1);
  EXPECT_EQ(tx_depth.at("max"), 65536);
  EXPECT_EQ(tx_depth.at("symmetric"), true);
  const auto& size = *std::find_if(describe.at("params").begin(), describe.at("params").end(),
                                   [](const auto& p) { return p.at("name") == "size"; });
  EXPECT_EQ(size.at("list"), true);
  EXPECT_TRUE(size.at("default").is_null());  // chosen by the mode
}

TEST(Describe, KvFollowsTheContract) {
  const ordered_json describe = DescribeJson(kv::KvCommandLine());
  ExpectContract(describe, "rdmalab-kv");
  ASSERT_EQ(describe.at("modes").size(), 1u);
  EXPECT_EQ(describe.at("modes")[0].at("name"), "kv");
  std::set<std::string> systems;
  for (const auto& system : describe.at("systems")) systems.insert(system.at("name").get<std::string>());
  EXPECT_EQ(systems, (std::set<std::string>{"herd", "pilaf", "farm", "farm-var", "drtm", "drtm-write", "hydradb",
                                            "memcached", "redis"}));
}

// The rows themselves, so that a misspelled name fails here, naming the row.
TEST(Describe, EveryNameARowListsIsAFlag) {
  const std::set<std::string> bench_names = ParamNames(DescribeJson(bench::BenchCommandLine()));
  for (const auto& mode : bench::Modes()) {
    for (const auto& name : mode.params) EXPECT_TRUE(bench_names.contains(name)) << mode.name << ": " << name;
  }
  const std::set<std::string> kv_names = ParamNames(DescribeJson(kv::KvCommandLine()));
  for (const auto& name : kv::EverySystemParams()) EXPECT_TRUE(kv_names.contains(name)) << name;
  for (const auto& system : kv::Systems()) {
    for (const auto& name : system.params) EXPECT_TRUE(kv_names.contains(name)) << system.name << ": " << name;
  }
}

TEST(Describe, SystemNamesHaveOneSpelling) {
  EXPECT_EQ(std::string(kv::FindSystem("farm-var").name), "farm-var");
  EXPECT_THROW(kv::FindSystem("farm_var"), Error);
  EXPECT_THROW(kv::FindSystem("drtm_write"), Error);
}

}  // namespace
}  // namespace rdmalab
