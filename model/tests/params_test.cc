// The model's tables (model/params.h): --describe's document, strict points, and parameters
// whose effect is "none" changing nothing.
#include <gtest/gtest.h>

#include <set>

#include "model/params.h"

namespace rdmalab::model {
namespace {

using nlohmann::json;

std::string ErrorOf(const json& point) {
  try {
    PointFromJson(point);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

json Point(const std::string& mode, const json& params) { return {{"mode", mode}, {"params", params}}; }

// The participant's parameters that the harness sets (rdma/flags.h): an experiment may not.
const std::set<std::string> kCoordinatorSet = {"ib_dev", "ib_port", "gid_index", "port",    "rendezvous",
                                               "role",   "index",   "peers",     "timeout", "out_json"};

TEST(Params, DescribeHasTheContractsFields) {
  const auto d = DescribeJson();
  EXPECT_EQ(d["schema_version"], "rdmalab-describe/1");
  EXPECT_EQ(d["program"], "rdmalab-model");
  EXPECT_EQ(d["backends"], nlohmann::ordered_json::array({"model"}));
  std::set<std::string> names;
  std::set<std::pair<std::string, std::string>> mode_names;  // a name declared apart: once per mode
  for (const auto& p : d["params"]) {
    const std::string name = p["name"];
    SCOPED_TRACE(name);
    names.insert(name);
    for (const auto& m : p.value("modes", std::vector<std::string>{"every"}))
      EXPECT_TRUE(mode_names.insert({name, m}).second) << "declared twice for " << m;
    EXPECT_EQ(name.find('-'), std::string::npos);
    for (const char* k : {"type", "list", "unit", "default", "scope", "effect", "help"}) EXPECT_TRUE(p.contains(k)) << k;
    EXPECT_FALSE(p.contains("flag"));  // rdmalab-model has no command line of its own for them
    EXPECT_EQ(p["scope"] == "coordinator", kCoordinatorSet.count(name) == 1);
    const std::string type = p["type"], effect = p["effect"];
    EXPECT_TRUE(type == "integer" || type == "number" || type == "boolean" || type == "string") << type;
    EXPECT_TRUE(effect == "modeled" || effect == "none" || effect == "not_modeled") << effect;
    EXPECT_EQ(p.contains("min") && p.contains("max"), type == "integer" || type == "number");
    if (p.contains("choices")) {
      EXPECT_EQ(type, "string");
    }
    if (!p["default"].is_null() && p.contains("choices")) {
      EXPECT_NE(std::find(p["choices"].begin(), p["choices"].end(), p["default"]), p["choices"].end());
    }
    if (p["default"].is_number()) {
      EXPECT_GE(p["default"].get<double>(), p["min"].get<double>());
      EXPECT_LE(p["default"].get<double>(), p["max"].get<double>());
    }
    EXPECT_FALSE(p["help"].get<std::string>().empty());
  }
  std::set<std::string> modes;
  for (const auto& m : d["modes"]) {
    modes.insert(m["name"].get<std::string>());
    EXPECT_FALSE(m["summary"].get<std::string>().empty());
    std::set<std::string> seen;
    for (const auto& p : m["params"]) {
      EXPECT_TRUE(names.count(p)) << m["name"] << " takes " << p << ", which the table lacks";
      EXPECT_TRUE(seen.insert(p).second) << m["name"] << " lists " << p << " twice";
    }
  }
  // the programs' modes (a program may add more) and the model's own
  for (const char* m : {"lat", "tput", "echo", "atomics", "sgbatch", "sequencer", "kv", "pcie"}) EXPECT_TRUE(modes.count(m)) << m;
  // every parameter is taken by some mode; every system's parameters by kv
  for (const auto& name : names) {
    bool taken = false;
    for (const auto& m : Modes()) taken |= ModeTakes(m, name);
    EXPECT_TRUE(taken) << name;
  }
  std::vector<std::string> systems;
  for (const auto& s : d["systems"]) {
    systems.push_back(s["name"]);
    for (const auto& p : s["params"]) EXPECT_TRUE(ModeTakes(FindMode("kv"), p)) << s["name"] << " reads " << p;
  }
  EXPECT_EQ(FindParam("system")->choices, systems);
}

TEST(Params, OneSpellingOfDesignsAndSystems) {
  EXPECT_EQ(Designs(), (std::vector<std::string>{"herd-rpc", "herd-rpc-batch", "herd-rpc-mq", "spec-s0", "atomics"}));
  // rdmalab-kv's systems in its table's order (it may add more), then the model's own
  std::vector<std::string> systems = SystemNames();
  EXPECT_EQ(std::vector<std::string>(systems.begin(), systems.begin() + 9),
            (std::vector<std::string>{"herd", "pilaf", "farm", "farm-var", "drtm", "drtm-write", "hydradb", "memcached",
                                      "redis"}));
  EXPECT_EQ(systems.back(), "read-based");
  std::string e = ErrorOf(Point("kv", {{"system", "farm_var"}}));
  EXPECT_NE(e.find("params.system = 'farm_var' is not valid (nearest: farm-var"), std::string::npos)
      << e;
  // the old aliases are unknown parameters now, each pointing at its one name
  for (const auto& [alias, name, mode] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"payload", "size", "tput"}, {"signal_every", "cq_mod", "tput"}, {"qps", "qp", "tput"},
           {"cores", "threads", "tput"}, {"machines", "clients", "kv"}, {"multi_queue", "queues", "kv"},
           {"request_connection", "connection", "echo"}, {"tx-depth", "tx_depth", "tput"}}) {
    e = ErrorOf(Point(mode, {{alias, 1}}));
    EXPECT_NE(e.find("unknown parameter '" + alias + "' for mode " + mode), std::string::npos) << e;
    EXPECT_NE(e.find("valid for " + mode + ": "), std::string::npos) << e;
    EXPECT_NE(e.find(name), std::string::npos) << e;
  }
}

TEST(Params, EveryMistakeNamesTheValueAndWhatIsValid) {
  std::string e = ErrorOf(Point("kv", {{"system", "herd"}, {"windw", 4}}));
  EXPECT_NE(e.find("unknown parameter 'windw' for mode kv (nearest: window; valid for kv: system, keys, put_fraction"),
            std::string::npos) << e;
  e = ErrorOf(Point("tput", {{"direction", "sideways"}}));
  EXPECT_NE(e.find("params.direction = 'sideways' is not valid (valid: inbound, outbound, alltoall)"), std::string::npos)
      << e;
  e = ErrorOf(Point("kv", {{"window", 0}}));
  EXPECT_NE(e.find("params.window = 0 is out of range (valid: 1..65536)"), std::string::npos) << e;
  e = ErrorOf(Point("kv", {{"put_fraction", 1.5}}));
  EXPECT_NE(e.find("params.put_fraction = 1.5 is out of range (valid: 0..1)"), std::string::npos) << e;
  e = ErrorOf(Point("tput", {{"size", "big"}}));
  EXPECT_NE(e.find("params.size = \"big\" is not an integer (valid: 0..1073741824)"), std::string::npos) << e;
  e = ErrorOf(Point("lat", {{"window", 4}}));
  EXPECT_NE(e.find("parameter 'window' is not taken by mode lat (modes that take it: kv; valid for lat: verb,"),
            std::string::npos) << e;
  e = ErrorOf(Point("pcie", {{"iters", 10}}));
  EXPECT_NE(e.find("parameter 'iters' is not taken by mode pcie (modes that take it: lat, tput, atomics, echo"),
            std::string::npos) << e;
  e = ErrorOf(Point("echo", {{"optimizations", "inline,fast"}}));
  EXPECT_NE(e.find("params.optimizations = 'fast' is not valid (valid: none, inline, unsignaled, uc)"),
            std::string::npos) << e;
  e = ErrorOf({{"mode", "kv"}, {"roles", {{"client", "many"}}}});
  EXPECT_NE(e.find("roles.client = \"many\" must be a process count in 0..1048576"), std::string::npos) << e;
}

// A value of the row other than its default (a boolean's true, the last choice, the minimum).
json OtherValue(const ParamDef& p) {
  switch (p.type) {
    case ParamType::kBoolean: return true;
    case ParamType::kInteger: return static_cast<int64_t>(p.default_value == p.min ? p.max : p.min);
    case ParamType::kNumber: return p.min;
    case ParamType::kString: return p.choices.empty() ? json("x") : json(p.choices.back());
  }
  return nullptr;
}

// Whether the model predicts a rate for the mode: pcie evaluates formulas, and a mode a program
// adds answers not modeled until the model predicts it.
bool PredictsRate(const ModeDef& mode, const Profile& prof) {
  if (mode.name == "pcie") return false;
  try {
    Predict(PointFromJson(Point(mode.name, mode.name == "kv" ? json{{"system", "herd"}} : json::object())), prof);
    return true;
  } catch (const NotModeled&) {
    return false;
  }
}

TEST(Params, EffectNoneChangesNoPrediction) {
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  int checked = 0;
  for (const auto& mode : Modes()) {
    if (!PredictsRate(mode, cib)) continue;
    json base = std::string(mode.name) == "kv" ? json{{"system", "herd"}} : json::object();
    Prediction plain = Predict(PointFromJson(Point(mode.name, base)), cib);
    std::vector<std::string> none;
    for (const auto& name : mode.params)
      if (FindParam(mode, name)->effect == Effect::kNone) none.push_back(name);
    // kv's threads are rdmalab-kv's client threads: they change nothing either
    if (std::string(mode.name) == "kv") none.push_back("threads");
    for (const auto& name : none) {
      json params = base;
      params[name] = OtherValue(*FindParam(mode, name));
      SCOPED_TRACE(std::string(mode.name) + " " + params.dump());
      Prediction p = Predict(PointFromJson(Point(mode.name, params)), cib);
      EXPECT_EQ(p.mops, plain.mops);
      EXPECT_EQ(p.lat_us, plain.lat_us);
      EXPECT_EQ(p.bottleneck, plain.bottleneck);
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
}

TEST(Params, NotModeledParamsPredictAtTheirDefaults) {
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  for (const auto& mode : Modes()) {
    if (!PredictsRate(mode, cib)) continue;
    for (const auto& name : mode.params) {
      const ParamDef& p = *FindParam(mode, name);
      if (p.effect != Effect::kNotModeled || p.default_value.is_null()) continue;
      json params = {{name, p.default_value}};
      SCOPED_TRACE(std::string(mode.name) + " " + params.dump());
      EXPECT_GT(Predict(PointFromJson(Point(mode.name, params)), cib).mops, 0);
    }
  }
}

TEST(Params, RolesAreProcessesAndKvClientsArePerProcess) {
  json kv = {{"mode", "kv"}, {"roles", {{"server", 1}, {"client", 3}}}, {"params", {{"clients", 8}}}};
  EXPECT_EQ(PointFromJson(kv).clients, 24u);
  kv["params"] = json::object();
  EXPECT_EQ(PointFromJson(kv).clients, 3u);
  EXPECT_EQ(PointFromJson({{"mode", "tput"}, {"roles", {{"node", 4}}}}).clients, 4u);
  EXPECT_EQ(PointFromJson(Point("kv", {{"workers", 6}})).threads, 6u);
  EXPECT_EQ(PointFromJson(Point("kv", {{"threads", 6}})).threads, 0u);  // client threads: not the server's cores
}

}  // namespace
}  // namespace rdmalab::model
