#include "model/experiments.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "model/params.h"

namespace rdmalab::model {
namespace {

using nlohmann::json;

Point Kv(const std::string& system, double put, uint32_t value_B, const std::string& link, json extra = json::object()) {
  json params = {{"system", system}, {"put_fraction", put}, {"key_size", 16}, {"value_size", value_B}, {"link", link}};
  for (const auto& [k, v] : extra.items()) params[k] = v;
  return PointFromJson(json{{"mode", "kv"}, {"params", params}});
}

std::string Pct(double f) { return std::to_string(static_cast<int>(f * 100 + 0.5)) + "% PUT"; }

const std::vector<std::string> kKvSystems = {"herd", "pilaf", "farm", "farm-var"};

// One table being built: its rows, each predicted with a profile loaded once.
struct Builder {
  ExperimentTable& t;
  const std::string& dir;
  std::string profile;  // the caller's, else the experiment's own; empty for a table of several
  std::map<std::string, Profile> cache;

  const Profile& Load(const std::string& name) {
    if (!cache.count(name)) cache[name] = LoadProfile(name, dir);
    return cache.at(name);
  }
  void Add(const std::string& label, const Point& pt) { AddWith(label, profile, pt); }
  void AddWith(const std::string& label, const std::string& pname, const Point& pt) {
    t.rows.push_back({label, pname, pt, Predict(pt, Load(pname))});
  }
};

void HerdFig9(Builder& b) {
  b.t.title = "herd14 Fig. 9: end-to-end throughput, 48-byte items (SK 16, SV 32), Mops";
  b.t.note = "HERD without guide16's batching/multi-queue; Pilaf-em-OPT, FaRM-em, FaRM-em-VAR as emulated in herd14";
  for (const std::string link : {"ib", "roce"})
    for (double put : {0.05, 0.5, 1.0})
      for (const auto& s : kKvSystems) b.Add(s + " " + link + " " + Pct(put), Kv(s, put, 32, link));
}

void HerdFig10(Builder& b) {
  b.t.title = "herd14 Fig. 10: throughput vs value size, read-intensive (5% PUT), SK 16, IB, Mops";
  for (uint32_t sv : {4u, 8u, 16u, 32u, 64u, 128u, 256u, 512u, 1000u})
    for (const auto& s : kKvSystems) b.Add(s + " SV=" + std::to_string(sv), Kv(s, 0.05, sv, "ib"));
}

void GuideTable3(Builder& b) {
  b.t.title = "guide16 Table 3: sequencer throughput and bottleneck per design (all cores), Mops";
  for (const auto& d : Designs())
    // guide16 Sec. 4.2: 70 client processes; HERD's window of 4 (the sequencer's default)
    b.Add(d, PointFromJson(json{{"mode", "sequencer"}, {"roles", {{"client", 70}}},
                                {"params", {{"design", d}, {"window_bound", false}}}}));
}

void GuideFig9(Builder& b) {
  b.t.title = "guide16 Fig. 9: HERD throughput vs server cores, 5% PUT, 48-byte items, with and without batching, Mops";
  for (uint32_t cores : {1u, 2u, 4u, 6u, 8u, 10u, 12u, 14u})
    for (bool batch : {false, true})
      b.Add(std::string("herd ") + (batch ? "batched" : "baseline") + " cores=" + std::to_string(cores),
            Kv("herd", 0.05, 32, "ib", {{"workers", cores}, {"batching", batch}, {"queues", batch ? 3 : 1}}));
  b.Add("READ-based store bound (half of peak inbound READ)", Kv("read-based", 0, 32, "ib"));
}

void GuideFig10(Builder& b) {
  b.t.title = "guide16 Fig. 10: emulated DrTM-KV throughput vs PUT fraction (GET = 1 READ, PUT = 2 atomics), Mops";
  const std::vector<std::string> profiles = b.profile.empty() ? std::vector<std::string>{"cx3", "cib"}
                                                              : std::vector<std::string>{b.profile};
  for (const auto& p : profiles)
    for (double put : {0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0}) b.AddWith(p + " " + Pct(put), p, Kv("drtm", put, 32, "ib"));
}

void HerdFig6(Builder& b) {
  b.t.title = "herd14 Fig. 6: all-to-all 32 B per node vs nodes N (N x N connected QPs), Mops";
  b.t.note = "outbound UC WRITEs fall once N x N QPs overflow the QP-context cache; UD SENDs need N QPs";
  for (uint32_t n : {2u, 4u, 8u, 12u, 16u})
    for (const auto& [verb, conn] : std::vector<std::pair<std::string, std::string>>{
             {"write_inline", "UC"}, {"send_inline", "UD"}})
      b.Add(verb + " " + conn + " N=" + std::to_string(n),
            PointFromJson(json{{"mode", "tput"}, {"roles", {{"node", n}}},
                               {"params", {{"verb", verb}, {"connection", conn}, {"size", 32},
                                           {"direction", "alltoall"}, {"tx_depth", 16}, {"cq_mod", 64}}}}));
}

void HerdFig12(Builder& b) {
  b.t.title = "herd14 Fig. 12: HERD throughput vs client processes (6 server processes), window 4 and 16, Mops";
  for (uint32_t window : {4u, 16u})
    for (uint32_t clients : {16u, 64u, 128u, 256u, 512u, 768u, 1024u})
      b.Add("window=" + std::to_string(window) + " clients=" + std::to_string(clients),
            Kv("herd", 0.05, 32, "ib", {{"workers", 6}, {"clients", clients}, {"window", window}}));
}

void GuideFig7(Builder& b) {
  b.t.title = "guide16 Fig. 7: sequencer throughput vs server cores, 70 clients (requests per sweep in the notes), Mops";
  for (const std::string design : {"herd-rpc", "herd-rpc-batch", "herd-rpc-mq", "spec-s0"})
    for (uint32_t cores : {1u, 2u, 4u, 6u, 8u, 10u, 12u, 14u}) {
      Point pt = PointFromJson(json{{"mode", "sequencer"}, {"roles", {{"client", 70}}},
                                    {"params", {{"design", design}, {"threads", cores}, {"window_bound", false}}}});
      Prediction pr = Predict(pt, b.Load(b.profile));
      char sweep[32];
      std::snprintf(sweep, sizeof sweep, " (%.1f per sweep)", pr.requests_per_sweep);
      b.t.rows.push_back({design + " cores=" + std::to_string(cores) + sweep, b.profile, pt, pr});
    }
}

void NosqlFig14(Builder& b) {
  b.t.title = "nosql Fig. 14: inbound READ vs value size, 4 M keys, Zipf vs uniform, clustered vs unclustered, Mops";
  for (const std::string dist : {"uniform", "zipf"})
    for (const std::string placement : {"clustered", "unclustered"})
      for (uint32_t size : {2u, 4u, 8u, 16u, 32u, 64u})
        b.Add(dist + " " + placement + " SV=" + std::to_string(size),
              PointFromJson(json{{"mode", "tput"}, {"roles", {{"client", 8}}},
                                 {"params", {{"verb", "read"}, {"connection", "RC"}, {"direction", "inbound"},
                                             {"tx_depth", 16}, {"keys", 4 << 20}, {"size", size},
                                             {"distribution", dist}, {"placement", placement}}}}));
}

// The built-in tables: id, the paper's NIC (the profile unless the caller names one; none for
// a table over several) and the rows.
struct BuiltIn {
  const char* id;
  const char* profile;
  void (*build)(Builder&);
};

const std::vector<BuiltIn>& BuiltIns() {
  static const std::vector<BuiltIn> tables = {
      {"herd14-fig9-kv", "cx3-pcie2", HerdFig9},
      {"herd14-fig10-valuesize", "cx3-pcie2", HerdFig10},
      {"guide16-table3", "cib", GuideTable3},
      {"guide16-fig9-herd-batching", "cib", GuideFig9},
      {"guide16-fig10-drtm", "", GuideFig10},
      {"herd14-fig6-alltoall", "cx3-pcie2", HerdFig6},
      {"herd14-fig12-clients", "cx3", HerdFig12},  // herd14 Sec. 5.5: E5-2450, ConnectX-3, PCIe 3.0 x8
      {"guide16-fig7-sequencer", "cib", GuideFig7},
      {"nosql-fig14-distribution", "cx-nosql", NosqlFig14},
  };
  return tables;
}

}  // namespace

const std::vector<std::string>& ExperimentIds() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> out;
    for (const auto& table : BuiltIns()) out.push_back(table.id);
    return out;
  }();
  return ids;
}

ExperimentTable RunExperiment(const std::string& id, const std::string& profile, const std::string& dir) {
  for (const auto& table : BuiltIns()) {
    if (id != table.id) continue;
    ExperimentTable t;
    t.id = id;
    Builder b{t, dir, profile.empty() ? table.profile : profile, {}};
    table.build(b);
    return t;
  }
  throw ModelError("unknown experiment '" + id + "' for the built-in tables (valid: " + Join(ExperimentIds()) +
                   "); other experiments run point by point with `predict --json`");
}

std::string FormatExperiment(const ExperimentTable& t) {
  std::ostringstream o;
  o << t.id << ": " << t.title << "\n";
  if (!t.note.empty()) o << "  (" << t.note << ")\n";
  o << "  point                                                   profile       Mops   latency_us  bottleneck\n";
  for (const auto& r : t.rows) {
    char buf[300];
    std::snprintf(buf, sizeof buf, "  %-55s %-10s %8.2f %10.2f   %s (%s)\n", r.label.c_str(), r.profile.c_str(),
                  r.prediction.mops, r.prediction.lat_us, r.prediction.bottleneck.c_str(),
                  r.prediction.bottleneck_label.c_str());
    o << buf;
  }
  return o.str();
}

nlohmann::json ExperimentJson(const ExperimentTable& t) {
  json rows = json::array();
  for (const auto& r : t.rows)
    rows.push_back({{"label", r.label}, {"profile", r.profile}, {"mops", r.prediction.mops},
                    {"lat_us_mean", r.prediction.lat_us}, {"bottleneck", r.prediction.bottleneck},
                    {"bottleneck_label", r.prediction.bottleneck_label}});
  return {{"schema_version", "rdmalab-model-experiment/1"}, {"experiment", t.id}, {"title", t.title},
          {"backend", "model"}, {"prediction", true}, {"rows", rows}};
}

}  // namespace rdmalab::model
