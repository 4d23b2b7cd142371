// Contract 3: `rdmalab-model predict --json < point.json` for every mode, and CLI errors.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/params.h"

namespace {

using nlohmann::json;

struct CliRun {
  int status;
  std::string out, err;
};

CliRun Cli(const std::string& args, const std::string& stdin_text = "") {
  // ctest runs each test as its own process, in parallel: the files carry the PID.
  const std::string tag = std::to_string(getpid());
  std::string in = testing::TempDir() + "model_cli_in." + tag + ".json";
  std::string err = testing::TempDir() + "model_cli_err." + tag + ".txt";
  std::ofstream(in) << stdin_text;
  std::string cmd = "timeout 60 " + std::string(RDMALAB_MODEL_CLI) + " " + args + " < " + in + " 2> " + err;
  CliRun r{0, "", ""};
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  r.status = pclose(p);
  std::ifstream e(err);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  std::remove(in.c_str());
  std::remove(err.c_str());
  return r;
}

json Predict(const json& point) {
  CliRun r = Cli("predict --json", point.dump());
  EXPECT_EQ(r.status, 0) << r.err;
  return json::parse(r.out);
}

void ExpectDocument(const json& doc, const std::string& profile, const std::string& mode) {
  EXPECT_EQ(doc["schema_version"], "rdmalab-bench/1");
  EXPECT_EQ(doc["backend"], "model");
  EXPECT_EQ(doc["prediction"], true);
  EXPECT_EQ(doc["profile"], profile);
  EXPECT_EQ(doc["mode"], mode);
  ASSERT_EQ(doc["results"].size(), 1u);
  const json& row = doc["results"][0];
  EXPECT_GT(row["mops"].get<double>(), 0);
  EXPECT_FALSE(row["bottleneck"].get<std::string>().empty());
  EXPECT_TRUE(row["utilization"].contains(row["bottleneck"].get<std::string>()));
  EXPECT_NEAR(row["utilization"][row["bottleneck"].get<std::string>()].get<double>(), 1.0, 1e-9);
  EXPECT_TRUE(row["pcie"].contains("h2d_bytes_per_op"));
  EXPECT_TRUE(row["wire"].contains("tx_bytes_per_op"));
  for (const char* k : {"size_bytes", "gbps", "lat_us_mean", "lat_us_p99", "per_thread", "uniformity_ratio"})
    EXPECT_TRUE(row.contains(k)) << k;
}

TEST(Cli, PredictJsonCoversEveryVerbModeAndTheKvSystems) {
  struct Case { std::string mode; json params; json roles; };
  std::vector<Case> cases = {
      {"lat", {{"verb", "read"}, {"size", 64}}, {{"server", 1}, {"client", 1}}},
      {"tput", {{"verb", "write"}, {"connection", "UC"}, {"size", 32}, {"direction", "inbound"}}, {{"server", 1}, {"client", 8}}},
      {"tput", {{"verb", "read"}, {"size", 32}, {"direction", "outbound"}, {"tx_depth", 16}}, {{"server", 1}, {"client", 8}}},
      {"tput", {{"verb", "write"}, {"connection", "UC"}, {"size", 32}, {"direction", "alltoall"}}, {{"node", 4}}},
      {"echo", {{"request", "write"}, {"response", "send"}, {"size", 32}, {"optimizations", json::array({"inline", "unsignaled", "uc"})}}, {{"server", 1}, {"client", 16}}},
      {"atomics", {{"verb", "faa"}, {"counters", 4096}}, {{"server", 1}, {"client", 8}}},
      {"sgbatch", {{"verb", "send"}, {"connection", "UC"}, {"size", 64}, {"sge", 8}}, {{"server", 1}, {"client", 1}}},
      {"sequencer", {{"design", "spec-s0"}}, {{"server", 1}, {"client", 8}}},
      {"kv", {{"system", "herd"}, {"put_fraction", 0.05}, {"value_size", 32}}, {{"server", 1}, {"client", 51}}},
      {"kv", {{"system", "drtm"}, {"put_fraction", 0.5}}, {{"server", 1}, {"client", 8}}},
  };
  for (const auto& c : cases) {
    json doc = Predict({{"experiment", "x"}, {"profile", "cx3"}, {"mode", c.mode}, {"roles", c.roles}, {"params", c.params}});
    SCOPED_TRACE(c.mode + " " + c.params.dump());
    ExpectDocument(doc, "cx3", c.mode);
    EXPECT_EQ(doc["config"], c.params);
  }
}

// Run control changes no prediction: a point with it predicts what the point without it does.
TEST(Cli, PredictJsonAcceptsRunControlAndPredictsTheSame) {
  json plain = Predict({{"profile", "cib"}, {"mode", "tput"}, {"params", {{"verb", "read"}}}});
  json run = Predict({{"profile", "cib"}, {"mode", "tput"}, {"params", {{"verb", "read"}, {"iters", 1000}, {"validate", true}}}});
  EXPECT_EQ(run["results"], plain["results"]);
  EXPECT_FALSE(run.contains("model"));  // nothing is set aside as ignored
}

// The harness's misspelled key (issue 28): an error naming the key, the nearest valid name
// and the mode, on the contract-3 path as on the command line.
TEST(Cli, PredictJsonIsStrict) {
  CliRun r = Cli("predict --json", json({{"profile", "cx3-pcie2"}, {"mode", "kv"},
                                         {"params", {{"system", "herd"}, {"windw", 4}}}}).dump());
  EXPECT_EQ(r.status, 2 << 8) << r.err;
  EXPECT_NE(r.err.find("unknown parameter 'windw' for mode kv (nearest: window;"), std::string::npos) << r.err;
  r = Cli("predict --json", json({{"profile", "cib"}, {"mode", "lat"}, {"params", {{"window", 4}}}}).dump());
  EXPECT_NE(r.err.find("parameter 'window' is not taken by mode lat (modes that take it: kv;"), std::string::npos)
      << r.err;
}

TEST(Cli, DescribeIsTheTablesAsJson) {
  CliRun r = Cli("--describe");
  ASSERT_EQ(r.status, 0) << r.err;
  json d = json::parse(r.out);
  EXPECT_EQ(d["schema_version"], "rdmalab-describe/1");
  EXPECT_EQ(d["program"], "rdmalab-model");
  EXPECT_EQ(d["backends"], json::array({"model"}));
  EXPECT_GT(d["params"].size(), 50u);
  EXPECT_EQ(d["modes"].size(), rdmalab::model::Modes().size());
  EXPECT_EQ(d["systems"].size(), rdmalab::model::Systems().size());
  EXPECT_NE(Cli("--describe --json").status, 0);
}

TEST(Cli, PredictJsonCanSimulate) {
  json doc = Predict({{"profile", "cib"}, {"mode", "tput"},
                      {"params", {{"verb", "read"}, {"size", 32}, {"simulate", true}, {"sim_ops", 20000}, {"tx_depth", 4}}}});
  const json& row = doc["results"][0];
  EXPECT_GT(row["lat_us_p99"].get<double>(), 0);
  EXPECT_EQ(row["ops"], 20000);
}

TEST(Cli, BadPointsFailWithOneLineNamingTheField) {
  struct Case { json point; std::string want; };
  std::vector<Case> cases = {
      {{{"profile", "cib"}, {"mode", "tput"}, {"params", {{"size", -1}}}}, "params.size = -1"},
      {{{"profile", "cib"}, {"mode", "tput"}, {"params", {{"verb", "read"}, {"connection", "UD"}}}}, "valid connections for read: RC, DC"},
      {{{"profile", "cx9"}, {"mode", "tput"}}, "unknown profile 'cx9' (valid: cib, cib-pciebench, cx, cx-nosql, cx3, cx3-pcie2, cx3-roce, cx5, cx6"},
      {{{"profile", "cib"}, {"mode", "bw"}}, "valid: lat, tput, atomics, echo"},
      {{{"profile", "cib"}, {"mode", "tput"}, {"parms", {}}}, "unknown point field 'parms'"},
  };
  for (const auto& c : cases) {
    CliRun r = Cli("predict --json", c.point.dump());
    EXPECT_NE(r.status, 0) << c.point.dump();
    EXPECT_TRUE(r.out.empty());
    EXPECT_EQ(r.err.rfind("rdmalab-model: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.want), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(Cli, HumanPredictSweepExplainAndExperiments) {
  CliRun p = Cli("predict --profile cib --mode tput --verb send_inline --connection UD --size 32 --direction outbound");
  EXPECT_EQ(p.status, 0) << p.err;
  EXPECT_NE(p.out.find("MMIO bw"), std::string::npos) << p.out;
  CliRun s = Cli("sweep --profile cx3 --verb read --sweep size=64,1024");
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_NE(s.out.find("link bw"), std::string::npos) << s.out;
  CliRun e = Cli("explain --profile cib --mode kv --system herd");
  EXPECT_EQ(e.status, 0) << e.err;
  EXPECT_NE(e.out.find("outbound SEND-UD GET response"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("* "), std::string::npos) << e.out;
  CliRun x = Cli("predict --experiment guide16-table3");
  EXPECT_EQ(x.status, 0) << x.err;
  EXPECT_NE(x.out.find("spec-s0"), std::string::npos);
  // A value's hyphens are its own (--name=value spelling), a name's are underscores.
  CliRun hyphenated = Cli("predict --profile=cib --mode=sequencer --design=spec-s0 --cq-mod=1");
  EXPECT_EQ(hyphenated.status, 0) << hyphenated.err;
  // A boolean takes true/false after it as its value, not as a stray word (was: true, "false" dropped).
  const std::string inbound = "predict --profile cx3-pcie2 --verb write --connection UC --direction inbound --size 32"
                              " --tx_depth 16 --roles client=3";
  CliRun unbounded = Cli(inbound + " --window_bound false"), spelled = Cli(inbound + " --window_bound=false");
  EXPECT_EQ(unbounded.status, 0) << unbounded.err;
  EXPECT_EQ(unbounded.out, spelled.out);
  EXPECT_NE(Cli(inbound + " --window_bound true").out, unbounded.out);
  CliRun bad = Cli("predict --profile cib --szie 3");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("unknown parameter 'szie'"), std::string::npos) << bad.err;
}

TEST(Cli, CalibrateSucceeds) {
  CliRun r = Cli("calibrate");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("calibration OK"), std::string::npos);
}

}  // namespace
