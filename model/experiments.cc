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

}  // namespace

const std::vector<std::string>& ExperimentIds() {
  static const std::vector<std::string> ids = {"herd14-fig9-kv", "herd14-fig10-valuesize", "guide16-table3",
                                               "guide16-fig9-herd-batching", "guide16-fig10-drtm",
                                               "herd14-fig6-alltoall", "herd14-fig12-clients",
                                               "guide16-fig7-sequencer", "nosql-fig14-distribution"};
  return ids;
}

ExperimentTable RunExperiment(const std::string& id, const std::string& profile, const std::string& dir) {
  ExperimentTable t;
  t.id = id;
  std::map<std::string, Profile> cache;
  auto prof = [&](const std::string& name) -> const Profile& {
    if (!cache.count(name)) cache[name] = LoadProfile(name, dir);
    return cache.at(name);
  };
  auto add = [&](const std::string& label, const std::string& pname, const Point& pt) {
    t.rows.push_back({label, pname, pt, Predict(pt, prof(pname))});
  };
  const std::vector<std::string> kv_systems = {"herd", "pilaf", "farm", "farm-var"};
  if (id == "herd14-fig9-kv") {
    std::string p = profile.empty() ? "cx3-pcie2" : profile;
    t.title = "herd14 Fig. 9: end-to-end throughput, 48-byte items (SK 16, SV 32), Mops";
    t.note = "HERD without guide16's batching/multi-queue; Pilaf-em-OPT, FaRM-em, FaRM-em-VAR as emulated in herd14";
    for (const std::string link : {"ib", "roce"})
      for (double put : {0.05, 0.5, 1.0})
        for (const auto& s : kv_systems) add(s + " " + link + " " + Pct(put), p, Kv(s, put, 32, link));
  } else if (id == "herd14-fig10-valuesize") {
    std::string p = profile.empty() ? "cx3-pcie2" : profile;
    t.title = "herd14 Fig. 10: throughput vs value size, read-intensive (5% PUT), SK 16, IB, Mops";
    for (uint32_t sv : {4u, 8u, 16u, 32u, 64u, 128u, 256u, 512u, 1000u})
      for (const auto& s : kv_systems) add(s + " SV=" + std::to_string(sv), p, Kv(s, 0.05, sv, "ib"));
  } else if (id == "guide16-table3") {
    std::string p = profile.empty() ? "cib" : profile;
    t.title = "guide16 Table 3: sequencer throughput and bottleneck per design (all cores), Mops";
    for (const auto& d : Designs())
      // guide16 Sec. 4.2: 70 client processes; HERD's window of 4 (the sequencer's default)
      add(d, p, PointFromJson(json{{"mode", "sequencer"}, {"roles", {{"client", 70}}},
                                   {"params", {{"design", d}, {"window_bound", false}}}}));
  } else if (id == "guide16-fig9-herd-batching") {
    std::string p = profile.empty() ? "cib" : profile;
    t.title = "guide16 Fig. 9: HERD throughput vs server cores, 5% PUT, 48-byte items, with and without batching, Mops";
    for (uint32_t cores : {1u, 2u, 4u, 6u, 8u, 10u, 12u, 14u})
      for (bool batch : {false, true})
        add(std::string("herd ") + (batch ? "batched" : "baseline") + " cores=" + std::to_string(cores), p,
            Kv("herd", 0.05, 32, "ib", {{"workers", cores}, {"batching", batch}, {"queues", batch ? 3 : 1}}));
    add("READ-based store bound (half of peak inbound READ)", p, Kv("read-based", 0, 32, "ib"));
  } else if (id == "guide16-fig10-drtm") {
    t.title = "guide16 Fig. 10: emulated DrTM-KV throughput vs PUT fraction (GET = 1 READ, PUT = 2 atomics), Mops";
    std::vector<std::string> profs = profile.empty() ? std::vector<std::string>{"cx3", "cib"} : std::vector<std::string>{profile};
    for (const auto& p : profs)
      for (double put : {0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0}) add(p + " " + Pct(put), p, Kv("drtm", put, 32, "ib"));
  } else if (id == "herd14-fig6-alltoall") {
    std::string p = profile.empty() ? "cx3-pcie2" : profile;
    t.title = "herd14 Fig. 6: all-to-all 32 B per node vs nodes N (N x N connected QPs), Mops";
    t.note = "outbound UC WRITEs fall once N x N QPs overflow the QP-context cache; UD SENDs need N QPs";
    for (uint32_t n : {2u, 4u, 8u, 12u, 16u})
      for (const auto& [verb, conn] : std::vector<std::pair<std::string, std::string>>{
               {"write_inline", "UC"}, {"send_inline", "UD"}})
        add(verb + " " + conn + " N=" + std::to_string(n), p,
            PointFromJson(json{{"mode", "tput"}, {"roles", {{"node", n}}},
                               {"params", {{"verb", verb}, {"connection", conn}, {"size", 32},
                                           {"direction", "alltoall"}, {"tx_depth", 16}, {"cq_mod", 64}}}}));
  } else if (id == "herd14-fig12-clients") {
    std::string p = profile.empty() ? "cx3" : profile;  // herd14 Sec. 5.5: E5-2450, ConnectX-3, PCIe 3.0 x8
    t.title = "herd14 Fig. 12: HERD throughput vs client processes (6 server processes), window 4 and 16, Mops";
    for (uint32_t window : {4u, 16u})
      for (uint32_t clients : {16u, 64u, 128u, 256u, 512u, 768u, 1024u})
        add("window=" + std::to_string(window) + " clients=" + std::to_string(clients), p,
            Kv("herd", 0.05, 32, "ib", {{"workers", 6}, {"clients", clients}, {"window", window}}));
  } else if (id == "guide16-fig7-sequencer") {
    std::string p = profile.empty() ? "cib" : profile;
    t.title = "guide16 Fig. 7: sequencer throughput vs server cores, 70 clients (requests per sweep in the notes), Mops";
    for (const std::string design : {"herd-rpc", "herd-rpc-batch", "herd-rpc-mq", "spec-s0"})
      for (uint32_t cores : {1u, 2u, 4u, 6u, 8u, 10u, 12u, 14u}) {
        Point pt = PointFromJson(json{{"mode", "sequencer"}, {"roles", {{"client", 70}}},
                                      {"params", {{"design", design}, {"threads", cores}, {"window_bound", false}}}});
        Prediction pr = Predict(pt, prof(p));
        char sweep[32];
        std::snprintf(sweep, sizeof sweep, " (%.1f per sweep)", pr.requests_per_sweep);
        t.rows.push_back({design + " cores=" + std::to_string(cores) + sweep, p, pt, pr});
      }
  } else if (id == "nosql-fig14-distribution") {
    std::string p = profile.empty() ? "cx-nosql" : profile;
    t.title = "nosql Fig. 14: inbound READ vs value size, 4 M keys, Zipf vs uniform, clustered vs unclustered, Mops";
    for (const std::string dist : {"uniform", "zipf"})
      for (const std::string placement : {"clustered", "unclustered"})
        for (uint32_t size : {2u, 4u, 8u, 16u, 32u, 64u})
          add(dist + " " + placement + " SV=" + std::to_string(size), p,
              PointFromJson(json{{"mode", "tput"}, {"roles", {{"client", 8}}},
                                 {"params", {{"verb", "read"}, {"connection", "RC"}, {"direction", "inbound"},
                                             {"tx_depth", 16}, {"keys", 4 << 20}, {"size", size},
                                             {"distribution", dist}, {"placement", placement}}}}));
  } else {
    std::string valid;
    for (const auto& e : ExperimentIds()) valid += (valid.empty() ? "" : ", ") + e;
    throw ModelError("unknown experiment '" + id + "' for the built-in tables (valid: " + valid +
                     "); other experiments run point by point with `predict --json`");
  }
  return t;
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
