// rdmalab-model: predict | sweep | explain | simulate | calibrate | profiles (see model/README.md).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "model/analytic.h"
#include "model/calibrate.h"
#include "model/experiments.h"
#include "model/point.h"
#include "model/params.h"
#include "model/profile.h"
#include "model/report.h"
#include "model/sim.h"

namespace rm = rdmalab::model;
using nlohmann::json;

namespace {

constexpr const char* kUsage = R"(usage: rdmalab-model COMMAND [flags]
       rdmalab-model --describe      modes, systems and parameters as JSON (rdmalab-describe/1)

commands:
  predict    predict one point: throughput, latency, bottleneck, per-resource utilization
               predict --json < point.json          contract 3: point on stdin, JSON document on stdout
               predict --profile P --mode M [--roles ROLE=N,...] [--PARAM=VALUE ...] [--json] [--simulate]
               predict --experiment ID [--profile P] [--json]
  sweep      predict over values of one parameter: --sweep NAME=V1,V2,... plus predict's flags
  explain    per-operation PCIe/wire/NIC/CPU breakdown and the resource that limits the rate
  simulate   discrete-event simulation of a point (latency percentiles, cache effects)
  calibrate  fit the profiles' `fit` fields to calibration.yaml and print predicted vs published
               [--calibration FILE] [--tolerance 0.10] [--json]
             calibrate --measured POINTS.json [--tolerance 0.15]: fit a profile to verb-level points
               measured on a backend (run_all.py calibrate writes them); JSON: the fit table and
               every field of the fitted profile with its source
  profiles   list profiles; `profiles NAME` prints every field with its value and source

common flags: --profile NAME|FILE.yaml (default cib), --profile_dir DIR, --mode MODE (default tput),
  --roles ROLE=N[,ROLE=N] (process counts: client, node, server), and the point's parameters,
  each taken by the modes named after it (an unknown one, or one the mode does not take, is an
  error; effect none: accepted, changes no prediction; not_modeled: some values answer
  "not modeled: <reason>"):
)";

std::string Usage() {
  std::string modes, systems;
  for (const auto& m : rm::Modes()) modes += "  " + std::string(m.name) + ": " + m.summary + "\n";
  for (const auto& s : rm::Systems()) systems += "  " + std::string(s.name) + ": " + s.summary + "\n";
  std::string experiments;
  for (const auto& e : rm::ExperimentIds()) experiments += (experiments.empty() ? "" : ", ") + e;
  return kUsage + rm::ParamsHelp() + "modes:\n" + modes + "systems (kv):\n" + systems +
         "built-in experiment tables (--experiment): " + experiments + "\n";
}

struct Args {
  std::string command;
  std::map<std::string, std::string> flags;  // CLI-only flags
  json params = json::object();              // everything else: point parameters
  std::vector<std::string> positional;
};

const std::vector<std::string> kCliFlags = {"json", "profile", "profile_dir", "mode", "experiment", "calibration",
                                            "measured", "tolerance", "simulate", "sweep", "help", "describe", "roles"};
const std::vector<std::string> kCliBoolFlags = {"json", "simulate", "help", "describe"};

// A flag given without a value: the CLI's switches and the table's boolean parameters.
bool IsSwitch(const std::string& name) {
  if (std::find(kCliBoolFlags.begin(), kCliBoolFlags.end(), name) != kCliBoolFlags.end()) return true;
  const rm::ParamDef* def = rm::FindParam(name);
  return def && def->type == rm::ParamType::kBoolean;
}

json ParamValue(const std::string& v) {
  if (v == "true" || v == "false") return v == "true";
  char* end = nullptr;
  long long i = std::strtoll(v.c_str(), &end, 10);
  if (end && *end == '\0' && !v.empty()) return i;
  double d = std::strtod(v.c_str(), &end);
  if (end && *end == '\0' && !v.empty()) return d;
  return v;
}

Args Parse(int argc, char** argv) {
  Args a;
  if (argc < 2) throw rm::ModelError("missing command\n" + Usage());
  a.command = argv[1];
  for (int i = a.command.rfind("--", 0) == 0 ? 1 : 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    std::string name = s.substr(2), value;
    size_t eq = name.find('=');
    bool is_bool = false;
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    // Flag names take either spelling; values keep theirs (--design=herd-rpc).
    for (auto& ch : name) if (ch == '-') ch = '_';
    if (eq == std::string::npos) {
      is_bool = IsSwitch(name);
      // a boolean takes an explicit true/false after it (--window_bound false), else means true
      if (is_bool) value = i + 1 < argc && (std::string(argv[i + 1]) == "true" || std::string(argv[i + 1]) == "false")
                               ? argv[++i] : "true";
      else if (i + 1 < argc) value = argv[++i];
      else throw rm::ModelError("flag --" + name + " needs a value");
    }
    if (std::find(kCliFlags.begin(), kCliFlags.end(), name) != kCliFlags.end()) a.flags[name] = value;
    else a.params[name] = ParamValue(value);
  }
  return a;
}

std::string Flag(const Args& a, const std::string& k, const std::string& def) {
  auto it = a.flags.find(k);
  return it == a.flags.end() ? def : it->second;
}

std::string ProfileDir(const Args& a) { return Flag(a, "profile_dir", rm::DefaultProfileDir()); }

// --roles client=8,server=1 -> {"client": 8, "server": 1}
json Roles(const Args& a) {
  json roles = json::object();
  std::stringstream ss(Flag(a, "roles", ""));
  for (std::string item; std::getline(ss, item, ',');) {
    size_t eq = item.find('=');
    json count = eq == std::string::npos ? json(nullptr) : ParamValue(item.substr(eq + 1));
    if (eq == std::string::npos || !count.is_number_integer())
      throw rm::ModelError("--roles " + Flag(a, "roles", "") + ": '" + item +
                           "' is not ROLE=N (valid roles: client, node, server)");
    roles[item.substr(0, eq)] = count;
  }
  return roles;
}

json PointDoc(const Args& a) {
  return {{"experiment", Flag(a, "experiment", "")}, {"profile", Flag(a, "profile", "cib")},
          {"mode", Flag(a, "mode", "tput")}, {"roles", Roles(a)}, {"params", a.params}};
}

std::string SimText(const rm::SimResult& r) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "simulated %llu ops (%llu events) in %.2f s wall: %.2f Mops, latency mean %.2f us, p50 %.2f, p90 %.2f, "
                "p99 %.2f, p99.9 %.2f, max %.2f; QP-cache misses %llu, WQE-cache misses %llu\n",
                static_cast<unsigned long long>(r.completed), static_cast<unsigned long long>(r.events), r.wall_s, r.mops,
                r.lat_us_mean, r.lat_us_p50, r.lat_us_p90, r.lat_us_p99, r.lat_us_p999, r.lat_us_max,
                static_cast<unsigned long long>(r.qp_misses), static_cast<unsigned long long>(r.wqe_misses));
  return buf;
}

void AddSim(json& row, const rm::SimResult& r) {
  row["mops"] = r.mops;
  row["lat_us_mean"] = r.lat_us_mean;
  row["lat_us_p50"] = r.lat_us_p50;
  row["lat_us_p90"] = r.lat_us_p90;
  row["lat_us_p99"] = r.lat_us_p99;
  row["lat_us_p999"] = r.lat_us_p999;
  row["lat_us_max"] = r.lat_us_max;
  row["ops"] = r.completed;
  row["uniformity_ratio"] = r.uniformity_ratio > 0 ? json(r.uniformity_ratio) : json(nullptr);
  row["duration_s"] = r.simulated_s;
  row["simulation"] = {{"events", r.events}, {"wall_s", r.wall_s}, {"qp_cache_misses", r.qp_misses},
                       {"wqe_cache_misses", r.wqe_misses}};
}

// One point -> document (contract 3). Simulation replaces rate/latency when params.simulate.
json Document(const json& point_doc, const std::string& dir) {
  rm::Point pt = rm::PointFromJson(point_doc);
  if (!point_doc.contains("profile") || !point_doc["profile"].is_string())
    throw rm::ModelError("point field 'profile' is missing (valid: " + [&] {
      std::string s;
      for (const auto& n : rm::ListProfiles(dir)) s += (s.empty() ? "" : ", ") + n;
      return s;
    }() + ")");
  rm::Profile prof = rm::LoadProfile(point_doc["profile"], dir);
  if (pt.mode == "pcie") {
    json doc = rm::PredictionDocument(point_doc, pt, prof, {}, {});
    doc["results"] = json::array({rm::FormulaRow(pt, rm::EvaluateFormula(pt, prof))});
    return doc;
  }
  rm::Prediction p;
  try {
    p = rm::Predict(pt, prof);
  } catch (const rm::NotModeled& e) {
    // Contract 3: a point outside the model's scope is answered, with no results rows.
    json doc = rm::PredictionDocument(point_doc, pt, prof, {}, {});
    doc["not_modeled"] = e.what();
    return doc;
  }
  json doc = rm::PredictionDocument(point_doc, pt, prof, {p}, {pt});
  if (pt.simulate) AddSim(doc["results"][0], rm::Simulate(rm::SimConfigFor(pt, prof, p)));
  return doc;
}

int Predict(const Args& a, bool explain) {
  std::string dir = ProfileDir(a);
  bool as_json = a.flags.count("json");
  std::string exp = Flag(a, "experiment", "");
  bool builtin = std::find(rm::ExperimentIds().begin(), rm::ExperimentIds().end(), exp) != rm::ExperimentIds().end();
  if (!exp.empty() && !builtin && !a.flags.count("mode")) rm::RunExperiment(exp, "", dir);  // throws: lists the ids
  if (builtin && !a.flags.count("mode")) {
    rm::ExperimentTable t = rm::RunExperiment(exp, Flag(a, "profile", ""), dir);
    if (as_json) std::cout << rm::ExperimentJson(t).dump(2) << "\n";
    else std::cout << rm::FormatExperiment(t);
    return 0;
  }
  if (as_json && !a.flags.count("mode") && a.params.empty()) {  // contract 3
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    json point;
    try {
      point = json::parse(text);
    } catch (const json::parse_error& e) {
      throw rm::ModelError(std::string("stdin is not a JSON point: ") + e.what());
    }
    std::cout << Document(point, dir).dump(2) << "\n";
    return 0;
  }
  json point = PointDoc(a);
  if (a.flags.count("simulate")) point["params"]["simulate"] = true;
  if (as_json) {
    std::cout << Document(point, dir).dump(2) << "\n";
    return 0;
  }
  rm::Point pt = rm::PointFromJson(point);
  rm::Profile prof = rm::LoadProfile(point["profile"], dir);
  if (pt.mode == "pcie") {
    std::cout << rm::FormatFormula(pt, prof, rm::EvaluateFormula(pt, prof));
    return 0;
  }
  rm::Prediction p;
  try {
    p = rm::Predict(pt, prof);
  } catch (const rm::NotModeled& e) {
    std::cout << "not modeled: " << e.what() << "\n";
    return 0;
  }
  std::cout << (explain ? rm::Explain(pt, prof, p) : rm::FormatPrediction(pt, prof, p));
  if (pt.simulate) std::cout << SimText(rm::Simulate(rm::SimConfigFor(pt, prof, p)));
  return 0;
}

int Sweep(const Args& a) {
  std::string spec = Flag(a, "sweep", "");
  size_t eq = spec.find('=');
  if (eq == std::string::npos) throw rm::ModelError("--sweep needs NAME=V1,V2,... (e.g. --sweep size=4,64,1024)");
  std::string name = spec.substr(0, eq);
  std::vector<std::string> values;
  std::stringstream ss(spec.substr(eq + 1));
  for (std::string v; std::getline(ss, v, ',');) values.push_back(v);
  std::string dir = ProfileDir(a);
  json point = PointDoc(a);
  rm::Profile prof = rm::LoadProfile(point["profile"], dir);
  std::vector<rm::Prediction> preds;
  std::vector<rm::Point> pts;
  for (const auto& v : values) {
    json p = point;
    p["params"][name] = ParamValue(v);
    pts.push_back(rm::PointFromJson(p));
    preds.push_back(rm::Predict(pts.back(), prof));
  }
  if (a.flags.count("json")) {
    std::cout << rm::PredictionDocument(point, pts.front(), prof, preds, pts).dump(2) << "\n";
    return 0;
  }
  std::printf("%-12s %10s %10s %10s  %s\n", name.c_str(), "Mops", "Gb/s", "lat_us", "bottleneck");
  for (size_t i = 0; i < values.size(); ++i)
    std::printf("%-12s %10.2f %10.2f %10.2f  %s (%s)\n", values[i].c_str(), preds[i].mops, preds[i].gbps,
                preds[i].lat_us, preds[i].bottleneck.c_str(), preds[i].bottleneck_label.c_str());
  return 0;
}

// A field's value as a profile file writes it: link kinds by name, booleans as true/false.
json FieldValue(const rm::FieldInfo& f, const rm::Profile& p) {
  static const std::vector<std::string> kinds = {"ib", "roce_v1", "roce_v2"};
  std::string unit = f.unit;
  if (unit.rfind("0 ib", 0) == 0) return kinds.at(static_cast<size_t>(f.get(p)));
  if (unit == "bool") return f.get(p) != 0;
  return f.get(p);
}

int CalibrateMeasured(const Args& a) {
  double tol = std::stod(Flag(a, "tolerance", "0.15"));
  std::ifstream in(Flag(a, "measured", ""));
  if (!in) throw rm::ModelError("--measured " + Flag(a, "measured", "") + ": cannot read the file");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    throw rm::ModelError("--measured " + Flag(a, "measured", "") + ": not JSON (" + e.what() + ")");
  }
  rm::MeasuredFit r = rm::FitMeasured(doc, ProfileDir(a), tol);
  json rows = json::array(), fields = json::array(), fits = json::array();
  for (const auto& row : r.rows)
    rows.push_back({{"id", row.id}, {"field", row.field}, {"metric", row.metric}, {"measured", row.measured},
                    {"predicted", row.predicted}, {"error", row.error}, {"spread", row.spread},
                    {"bottleneck", row.bottleneck}, {"pass", row.pass}, {"files", row.files}});
  for (const auto& f : r.fits)
    fits.push_back({{"field", f.field}, {"points", f.target}, {"extended", f.stored}, {"fitted", f.fitted}});
  for (const auto& f : rm::ProfileFields()) {
    if (std::string(f.path).rfind("roce.", 0) == 0 && !r.profile.roce) continue;
    auto src = r.profile.sources.find(f.path);
    json field = {{"path", f.path}, {"value", FieldValue(f, r.profile)},
                  {"source", src == r.profile.sources.end() ? json(nullptr) : json(src->second)}};
    if (r.profile.fits.count(f.path)) field["fit"] = r.profile.fits.at(f.path), field["points"] = r.profile.points.at(f.path);
    fields.push_back(field);
  }
  std::cout << json{{"schema_version", "rdmalab-model-calibration/1"}, {"ok", r.ok}, {"tolerance", tol},
                    {"extends", doc["extends"]}, {"rows", rows}, {"fits", fits}, {"fields", fields}}.dump(2) << "\n";
  return r.ok ? 0 : 1;
}

int Calibrate(const Args& a) {
  if (a.flags.count("measured")) return CalibrateMeasured(a);
  double tol = std::stod(Flag(a, "tolerance", "0.10"));
  rm::CalibrationResult r = rm::Calibrate(Flag(a, "calibration", rm::DefaultCalibrationPath()), ProfileDir(a), tol);
  if (a.flags.count("json")) {
    json rows = json::array();
    for (const auto& row : r.rows)
      rows.push_back({{"profile", row.profile}, {"what", row.what}, {"unit", row.unit}, {"published", row.published},
                      {"predicted", row.predicted}, {"error", row.error}, {"published_bottleneck", row.published_bottleneck},
                      {"predicted_bottleneck", row.predicted_bottleneck}, {"fitted", row.fitted}, {"pass", row.pass},
                      {"note", row.note}, {"source", row.source}});
    json fits = json::array();
    for (const auto& f : r.fits)
      fits.push_back({{"profile", f.profile}, {"field", f.field}, {"target", f.target}, {"stored", f.stored}, {"fitted", f.fitted}});
    std::cout << json{{"schema_version", "rdmalab-model-calibration/1"}, {"ok", r.ok}, {"tolerance", tol},
                      {"rows", rows}, {"fits", fits}, {"unmapped", r.unmapped}}.dump(2) << "\n";
  } else {
    std::cout << rm::FormatCalibration(r);
  }
  return r.ok ? 0 : 1;
}

int Simulate(const Args& a) {
  json point = PointDoc(a);
  point["params"]["simulate"] = true;
  rm::Point pt = rm::PointFromJson(point);
  rm::Profile prof = rm::LoadProfile(point["profile"], ProfileDir(a));
  rm::Prediction p = rm::Predict(pt, prof);
  rm::SimConfig c = rm::SimConfigFor(pt, prof, p);
  rm::SimResult r = rm::Simulate(c);
  if (a.flags.count("json")) {
    json doc = rm::PredictionDocument(point, pt, prof, {p}, {pt});
    AddSim(doc["results"][0], r);
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::cout << "analytic: " << rm::FormatPrediction(pt, prof, p) << SimText(r);
  return 0;
}

int Profiles(const Args& a) {
  std::string dir = ProfileDir(a);
  if (a.positional.empty()) {
    for (const auto& n : rm::ListProfiles(dir)) std::cout << n << ": " << rm::LoadProfile(n, dir).description << "\n";
    return 0;
  }
  rm::Profile p = rm::LoadProfile(a.positional[0], dir);
  std::cout << p.name << ": " << p.description << "\n";
  for (const auto& f : rm::ProfileFields()) {
    if (std::string(f.path).rfind("roce.", 0) == 0 && !p.roce) continue;
    auto src = p.sources.find(f.path);
    std::printf("  %-28s %12.6g %-10s %s%s\n", f.path, f.get(p), f.unit[0] == '0' ? "" : f.unit,
                src == p.sources.end() ? "(default)" : src->second.c_str(), p.fits.count(f.path) ? " [fit]" : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = Parse(argc, argv);
    if (a.command == "-h" || a.command == "--help" || a.command == "help" || a.flags.count("help")) {
      std::cout << Usage();
      return 0;
    }
    if (a.command == "--describe") {
      if (!a.params.empty() || a.flags.size() > 1 || !a.positional.empty())
        throw rm::ModelError("--describe takes no other flags or arguments");
      std::cout << rm::DescribeJson().dump(2) << "\n";
      return 0;
    }
    if (a.command == "predict") return Predict(a, false);
    if (a.command == "explain") return Predict(a, true);
    if (a.command == "sweep") return Sweep(a);
    if (a.command == "calibrate") return Calibrate(a);
    if (a.command == "simulate") return Simulate(a);
    if (a.command == "profiles") return Profiles(a);
    throw rm::ModelError("unknown command '" + a.command +
                         "' (valid: predict, sweep, explain, simulate, calibrate, profiles, --describe)");
  } catch (const std::exception& e) {
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    std::cerr << "rdmalab-model: error: " << msg << "\n";
    return 2;
  }
}
