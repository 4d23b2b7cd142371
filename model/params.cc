#include "model/params.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "model/programs.h"

namespace rdmalab::model {
namespace {

using nlohmann::json;
using T = ParamType;
using E = Effect;
using Apply = void (*)(PointDraft&, const json&);

constexpr const char* kBench = "rdmalab-bench";
constexpr const char* kKv = "rdmalab-kv";
constexpr const char* kModel = "rdmalab-model";
constexpr uint64_t kBenchDefaultKeys = 4 << 20;  // rdmalab-bench --keys 0 (its help says so)

// Rows' apply functions: the value is already checked against the declaration's type, range, choices.
#define SET(field, T) [](PointDraft& d, const json& v) { d.p.field = static_cast<T>(v.get<int64_t>()); }
#define SET_NUM(field) [](PointDraft& d, const json& v) { d.p.field = v.get<double>(); }
#define SET_BOOL(field) [](PointDraft& d, const json& v) { d.p.field = v.get<bool>(); }
#define SET_STR(field) [](PointDraft& d, const json& v) { d.p.field = v.get<std::string>(); }

// What the model makes of a program's parameter: its effect, how it sets the point, and a note
// where the program's help does not say what the model does with it. A parameter of a program
// without a row here changes no prediction (effect none): a program may add parameters, and
// the model accepts each as the program does until it models it.
struct EffectRow {
  const char* name;
  Effect effect;
  Apply apply;
  const char* note;
};

const std::vector<EffectRow>& EffectRows() {
  static const std::vector<EffectRow> rows = {
      // verbs (rdmalab-bench)
      {"verb", E::kModeled, [](PointDraft& d, const json& v) { d.verb = v.get<std::string>(); },
       "unset: write (atomics: faa; sgbatch: send); *_inline: the payload goes inline"},
      {"connection", E::kModeled, [](PointDraft& d, const json& v) { d.connection = v.get<std::string>(); },
       "echo: the request's transport"},
      {"size", E::kModeled, SET(size_B, int64_t), nullptr},
      {"direction", E::kModeled, SET_STR(direction), "alltoall: roles.node nodes"},
      {"tx_depth", E::kModeled, SET(tx_depth, uint32_t), "sequencer: a client's requests in flight"},
      {"cq_mod", E::kModeled, SET(cq_mod, uint32_t),
       "the sequencer's and HERD's responses: one in 64 (guide16), whatever the value"},
      {"post_list", E::kModeled, SET(post_list, uint32_t),
       "1 = WQE-by-MMIO, more = one doorbell and a DMA read of the batch"},
      {"qp", E::kModeled, SET(qp, uint32_t), "QPs at the measured NIC"},
      {"threads", E::kModeled,
       [](PointDraft& d, const json& v) {
         if (d.p.mode != "kv") d.p.threads = static_cast<uint32_t>(v.get<int64_t>());
         else d.client_threads = static_cast<uint32_t>(v.get<int64_t>());
       },
       "the cores used at the measured host; kv: client threads per client process, which change only a "
       "host-engine profile's prediction (the server's cores are `workers`)"},
      {"inline_size", E::kModeled, [](PointDraft& d, const json& v) { d.inline_size = d.p.inline_size_B = v.get<int64_t>(); },
       "the sequencer's 8-byte responses are always inline"},
      {"sge", E::kModeled, SET(sge, uint32_t), nullptr},
      {"header_only", E::kModeled, [](PointDraft& d, const json& v) { d.header_only = v.get<bool>(); }, nullptr},
      {"lat_method", E::kModeled, [](PointDraft& d, const json& v) { d.p.lat_pingpong = v == "pingpong"; }, nullptr},
      {"events", E::kNotModeled, SET_BOOL(events), "true is not modeled (interrupt and wake-up costs)"},
      {"stack", E::kNotModeled, SET_STR(stack), "only rdma is modeled"},
      {"io_batch", E::kNone, nullptr, "the kernel's and raw-packet stacks are not modeled"},
      {"numa", E::kNotModeled, [](PointDraft& d, const json& v) { d.p.numa = v == "far" ? "far" : "near"; },
       "far is not modeled (one memory)"},
      {"page_offset", E::kNotModeled,
       [](PointDraft& d, const json& v) { d.p.page_offset_B = static_cast<uint32_t>(std::max<int64_t>(0, v.get<int64_t>())); },
       "> 0 is not modeled (DMAs split at page boundaries)"},
      {"buffers", E::kNotModeled,
       [](PointDraft& d, const json& v) { d.p.buffers = static_cast<uint32_t>(std::max<int64_t>(1, v.get<int64_t>())); },
       "> 1 is not modeled (no cache of buffer contents)"},
      {"distribution", E::kModeled,
       [](PointDraft& d, const json& v) {
         d.unkeyed = v == "none";
         d.p.keyed = !d.unkeyed;
         d.p.distribution = v == "zipf" ? "zipf" : "uniform";
       },
       nullptr},
      {"placement", E::kModeled,
       [](PointDraft& d, const json& v) {
         d.p.placement = v.get<std::string>();
         d.p.keyed = !d.unkeyed;
       },
       nullptr},
      {"keys", E::kModeled,
       [](PointDraft& d, const json& v) {
         d.p.keys = v == 0 ? kBenchDefaultKeys : static_cast<uint64_t>(v.get<int64_t>());
         d.p.keyed = !d.unkeyed;
       },
       nullptr},
      {"zipf_theta", E::kModeled, SET_NUM(zipf_theta), nullptr},
      {"all", E::kNotModeled, SET_BOOL(all_sizes), "true is not modeled: a point has one size (sweep size instead)"},
      {"rdma_cm", E::kNone, nullptr, "connection setup, before measuring"},
      // echo
      {"request", E::kModeled, [](PointDraft& d, const json& v) { d.request = v.get<std::string>(); }, nullptr},
      {"response", E::kModeled, [](PointDraft& d, const json& v) { d.response = v.get<std::string>(); }, nullptr},
      {"response_connection", E::kModeled,
       [](PointDraft& d, const json& v) { d.response_connection = v.get<std::string>(); }, nullptr},
      {"accesses", E::kModeled, SET(accesses, uint32_t), nullptr},
      {"prefetch", E::kModeled, SET_BOOL(prefetch), nullptr},
      {"table_mb", E::kNone, nullptr, "the model charges every access as a DRAM miss whatever the table's size"},
      // atomics
      {"counters", E::kModeled, SET(counters, uint64_t), nullptr},
      {"counter_stride", E::kNotModeled, SET(counter_stride_B, uint32_t),
       "other than 8 is not modeled (lock buckets by address bits)"},
      // sequencer
      {"design", E::kModeled, SET_STR(design),
       "herd-rpc-mq: 3 response QPs per core; atomics: FAA on one counter"},
      {"count", E::kNone, nullptr, "the run's length; the model predicts the steady rate"},
      {"batch", E::kModeled,
       [](PointDraft& d, const json& v) {
         d.p.post_list = static_cast<uint32_t>(v.get<int64_t>());
         d.p.batch_given = true;
       },
       "1: one post each"},
      // key-value systems (rdmalab-kv)
      {"system", E::kNotModeled, SET_STR(system), "memcached and redis (kernel TCP) are not modeled"},
      {"put_fraction", E::kModeled, SET_NUM(put_fraction), nullptr},
      {"get_fraction", E::kModeled, [](PointDraft& d, const json& v) { d.p.put_fraction = 1 - v.get<double>(); },
       nullptr},
      {"key_size", E::kModeled, SET(key_B, uint32_t), nullptr},
      {"value_size", E::kModeled, SET(value_B, uint32_t), nullptr},
      {"window", E::kModeled, SET(window, uint32_t), nullptr},
      {"clients", E::kModeled, [](PointDraft& d, const json& v) { d.clients_per_process = v.get<int64_t>(); },
       "clients in all = roles.client x clients (a point without roles: herd14 Sec. 5's 51)"},
      {"workers", E::kModeled, SET(threads, uint32_t), "one core each"},
      {"core", E::kModeled, SET(core, int32_t), nullptr},
      {"batching", E::kModeled, SET_BOOL(batching), nullptr},
      {"queues", E::kModeled, SET(queues, uint32_t), nullptr},
      {"lock_placement", E::kModeled, [](PointDraft& d, const json& v) { d.p.same_bits_locks = v == "same-bits"; },
       "same-bits: every lock word in one of the NIC's lock buckets"},
      {"store", E::kNotModeled, SET_STR(store), "full (checksummed tables, probing) is not modeled"},
      {"corrupt", E::kNotModeled, SET(corrupt, uint64_t), "> 0 is not modeled"},
      {"retry_ms", E::kNone, nullptr, "the model predicts a lossless run"},
      {"log_mb", E::kNone, nullptr, "the model charges MICA lookups per operation whatever the log's size"},
      {"index_log2", E::kNone, nullptr, "the model charges MICA lookups per operation"},
      {"preload", E::kNone, nullptr, "the model assumes GETs hit"},
      {"farm_load_factor", E::kNone, nullptr, "the full store is not modeled"},
      {"farm_buffer_slots", E::kNone, nullptr, "the model charges each PUT's WRITE alone"},
      {"lock_retries", E::kNone, nullptr, "the model assumes no contention on a lock word"},
      {"hydradb_miss_path", E::kNone, nullptr, "the model predicts the steady state"},
      // run control (rdmalab-bench and rdmalab-kv)
      {"iters", E::kNone, nullptr, "the run's length; the model predicts the steady rate"},
      {"duration", E::kNone, nullptr, "the run's length; the model predicts the steady rate"},
      {"warmup", E::kNone, nullptr, "the model is warm"},
      {"validate", E::kNone, nullptr, "the model assumes correct transfers"},
      {"seed", E::kNone, nullptr, "the model uses the distributions, not draws"},
      {"cpus", E::kNone, nullptr, "the model's cores are alike and near the NIC"},
      {"use_hugepages", E::kNone, nullptr,
       "the model's translation cache is charged only by key-addressed points"},
  };
  return rows;
}

// Where the model deliberately departs from a program's declaration: `fields`, a JSON object
// of the model's values, replaces the program's (--describe then shows both), for the reason
// `why`; "more_choices" adds to the program's choices. Every other field is the program's.
struct Departure {
  const char* program;
  const char* name;
  const char* fields;
  const char* why;
};

const std::vector<Departure>& Departures() {
  static const std::vector<Departure> departures = {
      {kBench, "verb", R"({"more_choices": ["send_inline"]})",
       "send_inline: a SEND whose payload goes inline, which the program runs as send with --inline_size"},
      {kBench, "connection", R"({"more_choices": ["DC"]})",
       "DC: a dynamically connected transport the program cannot open"},
      {kBench, "response_connection", R"({"more_choices": ["DC"]})",
       "DC: a dynamically connected transport the program cannot open"},
      {kBench, "size", R"({"list": false, "default": 32})",
       "a point has one size (sweep size); unset: 32 B, where the program's mode picks (lat 8, tput 64, echo 32, "
       "sgbatch 64)"},
      {kBench, "tx_depth", R"({"default": null})",
       "unset: the papers' testbeds, which kept every queue full (the sequencer's clients: HERD's 4 each); a "
       "prediction of a run gets the program's default from the harness"},
      {kBench, "qp", R"({"default": null, "max": 16777216})",
       "unset: enough QPs to engage every processing unit; up to 16 Mi: QP-cache what-ifs beyond a host's"},
      {kBench, "threads", R"({"default": null, "max": 4096})",
       "unset: every core of the profile's host (the papers' servers); hosts beyond the program's 256 threads"},
      {kBench, "batch", R"({"default": null})",
       "unset: the requests a worker finds in a sweep, which the program's 16 only caps"},
      {kKv, "system", R"({"more_choices": ["read-based"]})",
       "read-based: the bound guide16 Fig. 9 draws for a READ-based store, which no program runs"},
      {kKv, "workers", R"({"default": null, "max": 4096})",
       "unset: every core of the profile's host (the papers' servers); hosts beyond the program's 64 workers"},
      {kKv, "window", R"({"max": 65536})", "windows beyond what a client posts, for what-if exploration"},
      {kKv, "clients", R"({"max": 1048576})", "client counts beyond a process's 1024, the papers' scale and past it"},
      {kKv, "value_size", R"({"max": 1048576})", "values beyond the program's 1000 B, for what-if exploration"},
  };
  return departures;
}

// The model's own parameters: no program takes them.
ParamDef Own(const char* name, ParamType type, const char* unit, double min, double max,
             std::vector<std::string> choices, json default_value, const char* help, Apply apply, bool list = false) {
  ParamDef d;
  d.name = name;
  d.program = kModel;
  d.type = type;
  d.list = list;
  d.unit = unit ? json(unit) : json(nullptr);
  d.min = min;
  d.max = max;
  d.choices = std::move(choices);
  d.default_value = std::move(default_value);
  d.help = help;
  d.effect = E::kModeled;
  d.apply = apply;
  return d;
}

std::vector<ParamDef> OwnParams() {
  return {
      Own("inline_recv", T::kBoolean, nullptr, 0, 0, {}, false, "small payloads land in the CQE (inline-receive)",
          SET_BOOL(inline_recv)),
      Own("optimizations", T::kString, nullptr, 0, 0, {"none", "inline", "unsignaled", "uc"}, "none",
          "echo: herd14's optimizations added to the point (inline, unsignaled responses, UC for RC)",
          [](PointDraft& d, const json& v) { d.optimizations = v.get<std::vector<std::string>>(); }, true),
      Own("link", T::kString, nullptr, 0, 0, {"ib", "roce"}, "ib",
          "wire headers of InfiniBand or RoCE (profiles with a roce block)", SET_STR(link)),
      Own("window_bound", T::kBoolean, nullptr, 0, 0, {}, true,
          "Little's law (clients x window outstanding over the unloaded latency) bounds the rate; false assumes "
          "enough clients (the papers' scale)",
          SET_BOOL(window_bound)),
      Own("simulate", T::kBoolean, nullptr, 0, 0, {}, false,
          "run the discrete-event simulator (latency percentiles, cache effects)", SET_BOOL(simulate)),
      Own("sim_ops", T::kInteger, "ops", 1000, 1ll << 34, {}, 1000000, "operations simulated", SET(sim_ops, uint64_t)),
      Own("sim_exponential", T::kBoolean, nullptr, 0, 0, {}, false,
          "exponential instead of deterministic service times in the simulator", SET_BOOL(sim_exponential)),
      // pcie: guide16's formula tables
      Own("formula", T::kString, nullptr, 0, 0, {"transfer", "wqe_header", "wqe_batch"}, "transfer",
          "pcie: transfer (bytes of an x-byte transfer) | wqe_header (WQE header sizes) | wqe_batch (N WQEs)",
          SET_STR(formula)),
      Own("method", T::kString, nullptr, 0, 0, {"dma", "mmio", "doorbell"}, "dma",
          "pcie: transfer by dma | mmio; wqe_batch by mmio | doorbell", SET_STR(method)),
      Own("wqe_type", T::kString, nullptr, 0, 0, {"rc_uc", "ud", "recv"}, "rc_uc", "pcie, wqe_header: the WQE's kind",
          SET_STR(wqe_type)),
      Own("wqes", T::kInteger, "WRs", 1, 1 << 16, {}, 10, "pcie, wqe_batch: WQEs in the batch (N)",
          SET(wqes, uint32_t)),
      Own("wqe_size", T::kInteger, "bytes", 1, 1 << 16, {}, 65, "pcie, wqe_batch: bytes per WQE (D)",
          SET(wqe_B, uint32_t)),
  };
}

Prediction PredictFormulaMode(const Point&, const Profile&) {
  throw ModelError("mode pcie evaluates a formula (bytes), not a rate: use `predict`, which prints its value");
}

// The model's side of a program's mode: its prediction and the parameters it takes beyond the
// program's (the model's knobs, and what it predicts that the program refuses). A program's
// mode without a row is described with the program's parameters and answers "not modeled".
struct ModeEffect {
  const char* name;
  Prediction (*predict)(const Point&, const Profile&);
  std::vector<std::string> adds;
};

const std::vector<ModeEffect>& ModeEffects() {
  static const std::vector<ModeEffect> modes = {
      {"lat", PredictVerb, {"sge", "header_only", "inline_recv", "link", "simulate", "sim_ops", "sim_exponential"}},
      {"tput", PredictVerb, {"inline_recv", "link", "simulate", "sim_ops", "sim_exponential", "window_bound"}},
      {"atomics", PredictVerb, {"connection", "link", "simulate", "sim_ops", "sim_exponential", "window_bound"}},
      {"echo", PredictVerb,
       {"sge", "header_only", "direction", "post_list", "qp", "optimizations", "link", "simulate", "sim_ops",
        "sim_exponential", "window_bound"}},
      {"sequencer", PredictSequencer,
       {"iters", "duration", "warmup", "validate", "link", "simulate", "sim_ops", "sim_exponential", "window_bound"}},
      {"sgbatch", PredictVerb,
       {"verb", "header_only", "direction", "post_list", "qp", "threads", "all", "link", "simulate", "sim_ops",
        "sim_exponential", "window_bound"}},
      {"kv", PredictKv, {"link", "simulate", "sim_ops", "sim_exponential", "window_bound"}},
  };
  return modes;
}

// The model's own mode and system: nothing runs them.
const char* const kPcieSummary = "guide16's PCIe formula tables (Fig. 2b, Table 1, Appendix A): bytes, not a rate";
const std::vector<std::string> kPcieParams = {"formula", "method", "wqe_type", "wqes", "wqe_size", "size"};
const char* const kReadBasedSummary = "the bound guide16 Fig. 9 draws for a READ-based store (2 READs per GET)";

size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Up to three names close to `name` (by edit distance, or one containing the other), nearest first.
std::vector<std::string> Nearest(const std::string& name, const std::vector<std::string>& valid) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& v : valid) {
    size_t d = Distance(name, v);
    bool related = v.find(name) != std::string::npos || name.find(v) != std::string::npos;
    if (d <= std::max<size_t>(1, name.size() / 3) || related) scored.push_back({d, v});
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

std::string NearestText(const std::string& name, const std::vector<std::string>& valid) {
  std::vector<std::string> near = Nearest(name, valid);
  return near.empty() ? "" : "nearest: " + Join(near) + "; ";
}

std::string Range(const ParamDef& d) {
  auto fmt = [&](double x) {
    std::ostringstream o;
    if (d.type == T::kInteger) o << static_cast<long long>(x);
    else o << x;
    return o.str();
  };
  return fmt(d.min) + ".." + fmt(d.max);
}

const char* TypeName(ParamType t) {
  switch (t) {
    case T::kInteger: return "integer";
    case T::kNumber: return "number";
    case T::kBoolean: return "boolean";
    case T::kString: return "string";
  }
  return "?";
}

const char* EffectName(Effect e) {
  switch (e) {
    case E::kModeled: return "modeled";
    case E::kNone: return "none";
    case E::kNotModeled: return "not_modeled";
  }
  return "?";
}

std::string Where(const ParamDef& d) { return "params." + d.name; }

// The value as the row's type (strings of digits and "true"/"false" as the command line gives
// them), checked against its range or choices.
json Checked(const ParamDef& d, const json& v) {
  const std::string where = Where(d);
  switch (d.type) {
    case T::kInteger: {
      int64_t x = 0;
      bool ok = v.is_number_integer();
      if (ok) x = v.get<int64_t>();
      if (v.is_string()) {
        const std::string s = v.get<std::string>();
        char* end = nullptr;
        x = std::strtoll(s.c_str(), &end, 10);
        ok = !s.empty() && end && *end == '\0';
      }
      if (!ok) throw ModelError(where + " = " + v.dump() + " is not an integer (valid: " + Range(d) + ")");
      if (x < d.min || x > d.max)
        throw ModelError(where + " = " + std::to_string(x) + " is out of range (valid: " + Range(d) + ")");
      return x;
    }
    case T::kNumber: {
      if (!v.is_number()) throw ModelError(where + " = " + v.dump() + " is not a number (valid: " + Range(d) + ")");
      double x = v.get<double>();
      if (!(x >= d.min && x <= d.max))
        throw ModelError(where + " = " + v.dump() + " is out of range (valid: " + Range(d) + ")");
      return x;
    }
    case T::kBoolean:
      if (v.is_boolean()) return v;
      if (v == "true" || v == "false") return v == "true";
      throw ModelError(where + " = " + v.dump() + " is not valid (valid: true, false)");
    case T::kString: {
      std::vector<std::string> items;
      if (d.list && v.is_array()) {
        for (const auto& e : v) {
          if (!e.is_string()) throw ModelError(where + " = " + v.dump() + ": every item must be a string");
          items.push_back(e.get<std::string>());
        }
      } else if (v.is_string()) {
        const std::string s = v.get<std::string>();
        if (!d.list) items.push_back(s);
        else
          for (size_t a = 0; a <= s.size();) {
            size_t b = std::min(s.find_first_of(",+", a), s.size());
            if (b > a) items.push_back(s.substr(a, b - a));
            a = b + 1;
          }
      } else {
        throw ModelError(where + " = " + v.dump() + " must be a string" +
                         (d.choices.empty() ? "" : " (valid: " + Join(d.choices) + ")"));
      }
      for (const auto& item : items)
        if (!d.choices.empty() && std::find(d.choices.begin(), d.choices.end(), item) == d.choices.end())
          throw ModelError(where + " = '" + item + "' is not valid (" + NearestText(item, d.choices) +
                           "valid: " + Join(d.choices) + ")");
      if (d.list) return items;
      return items.front();
    }
  }
  return v;
}

Prediction PredictUnmodeledMode(const Point& pt, const Profile&) {
  throw NotModeled("mode " + pt.mode + ": the model has no prediction for it yet (model/params.cc ModeEffects)");
}

const json& ProgramDoc(const std::string& program) {
  static const json bench = json::parse(kBenchDescription);
  static const json kv = json::parse(kKvDescription);
  return program == kBench ? bench : kv;
}

ParamType TypeOf(const std::string& type) {
  if (type == "integer") return T::kInteger;
  if (type == "number") return T::kNumber;
  if (type == "boolean") return T::kBoolean;
  return T::kString;
}

// The departure's fields over the program's entry; the program's own values of them in `departs`.
json Departed(const std::string& program, const json& entry, json& departs) {
  json declared = entry;
  for (const auto& dep : Departures()) {
    if (program != dep.program || entry["name"] != dep.name) continue;
    json own = json::object();
    const json fields = json::parse(dep.fields);
    for (const auto& [field, value] : fields.items()) {
      if (field == "more_choices") {
        own["choices"] = entry["choices"];
        for (const auto& choice : value) declared["choices"].push_back(choice);
      } else {
        own[field] = entry.contains(field) ? entry[field] : json(nullptr);
        declared[field] = value;
      }
    }
    departs = {{"program", own}, {"why", dep.why}};
  }
  return declared;
}

// A program's parameter as the model takes it: the program's declaration, any departure, the
// model's effect.
ParamDef FromProgram(const std::string& program, const json& entry) {
  ParamDef d;
  const json declared = Departed(program, entry, d.departs);
  d.name = declared["name"];
  d.program = program;
  d.type = TypeOf(declared["type"]);
  d.list = declared.value("list", false);
  d.unit = declared["unit"];
  if (declared.contains("min")) {
    d.min = declared["min"].get<double>();
    d.max = declared["max"].get<double>();
  }
  if (declared.contains("choices")) d.choices = declared["choices"].get<std::vector<std::string>>();
  d.default_value = declared["default"];
  d.coordinator = declared["scope"] == "coordinator";
  d.help = declared["help"];
  for (const auto& row : EffectRows()) {
    if (d.name != row.name) continue;
    d.effect = row.effect;
    d.apply = row.apply;
    d.effect_note = row.note ? row.note : "";
  }
  if (d.effect == E::kNone && d.effect_note.empty()) d.effect_note = "what the program does with it changes no prediction";
  return d;
}

std::vector<ParamDef> ProgramParams(const std::string& program) {
  std::vector<ParamDef> params;
  for (const auto& entry : ProgramDoc(program)["params"]) params.push_back(FromProgram(program, entry));
  return params;
}

const std::vector<ParamDef>& BenchParams() {
  static const std::vector<ParamDef> params = ProgramParams(kBench);
  return params;
}

const std::vector<ParamDef>& KvParams() {
  static const std::vector<ParamDef> params = ProgramParams(kKv);
  return params;
}

const std::vector<ParamDef>& ModelParams() {
  static const std::vector<ParamDef> params = OwnParams();
  return params;
}

const ParamDef* FindIn(const std::vector<ParamDef>& params, const std::string& name) {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

// A program's mode with the model's effect: its prediction and the parameters the model adds.
ModeDef FromProgramMode(const std::string& program, const json& entry, const std::vector<ParamDef>* declarations) {
  ModeDef mode{entry["name"], entry["summary"], program, declarations, entry["params"], {}, PredictUnmodeledMode};
  for (const auto& effect : ModeEffects()) {
    if (mode.name != effect.name) continue;
    mode.predict = effect.predict;
    mode.model_adds = effect.adds;
    mode.params.insert(mode.params.end(), effect.adds.begin(), effect.adds.end());
  }
  return mode;
}

std::vector<ModeDef> BuildModes() {
  std::vector<ModeDef> modes;
  for (const auto& entry : ProgramDoc(kBench)["modes"]) modes.push_back(FromProgramMode(kBench, entry, &BenchParams()));
  for (const auto& entry : ProgramDoc(kKv)["modes"]) modes.push_back(FromProgramMode(kKv, entry, &KvParams()));
  // pcie's size is the bytes of a transfer, as rdmalab-bench's
  modes.push_back({"pcie", kPcieSummary, kModel, &BenchParams(), kPcieParams, kPcieParams, PredictFormulaMode});
  return modes;
}

std::vector<SystemDef> BuildSystems() {
  std::vector<SystemDef> systems;
  std::vector<std::string> every;  // the parameters every rdmalab-kv system reads (workers among them)
  for (const auto& entry : ProgramDoc(kKv)["systems"]) {
    SystemDef system{entry["name"], entry.value("display", entry["name"]), entry["summary"], kKv, entry["params"]};
    if (systems.empty()) every = system.params;
    std::erase_if(every, [&](const std::string& p) { return !std::count(system.params.begin(), system.params.end(), p); });
    systems.push_back(system);
  }
  systems.push_back({"read-based", "READ-based bound", kReadBasedSummary, kModel, every});
  return systems;
}

nlohmann::ordered_json ParamJson(const ParamDef& p) {
  using ojson = nlohmann::ordered_json;
  ojson row = {{"name", p.name}, {"program", p.program}, {"type", TypeName(p.type)}, {"list", p.list},
               {"unit", ojson::parse(p.unit.dump())}};
  if (p.type == T::kInteger) row["min"] = static_cast<int64_t>(p.min), row["max"] = static_cast<int64_t>(p.max);
  if (p.type == T::kNumber) row["min"] = p.min, row["max"] = p.max;
  if (!p.choices.empty()) row["choices"] = p.choices;
  row["default"] = ojson::parse(p.default_value.dump());
  row["scope"] = p.coordinator ? "coordinator" : "experiment";
  row["help"] = p.help;
  row["effect"] = EffectName(p.effect);
  if (!p.effect_note.empty()) row["effect_note"] = p.effect_note;
  if (!p.departs.is_null()) row["departs"] = ojson::parse(p.departs.dump());
  return row;
}

// Every declaration the modes take, once each, in the modes' order: a name both programs
// declare alike (the participant's) once, one they declare apart (keys, cq_mod, ...) once per
// declaration, each naming its modes.
struct Listed {
  const ParamDef* def;
  std::vector<std::string> modes;
};

bool DeclaredAlike(const ParamDef& a, const ParamDef& b) {
  nlohmann::ordered_json x = ParamJson(a), y = ParamJson(b);
  x.erase("program");
  y.erase("program");
  return x == y;
}

std::vector<Listed> ListedParams() {
  std::vector<Listed> listed;
  for (const auto& mode : Modes()) {
    for (const auto& name : mode.params) {
      const ParamDef* def = FindParam(mode, name);
      auto it = std::find_if(listed.begin(), listed.end(), [&](const Listed& l) {
        return l.def == def || (l.def->name == name && DeclaredAlike(*l.def, *def));
      });
      if (it == listed.end()) it = listed.insert(listed.end(), {def, {}});
      it->modes.push_back(mode.name);
    }
  }
  return listed;
}

bool DeclaredApart(const std::vector<Listed>& listed, const std::string& name) {
  return std::count_if(listed.begin(), listed.end(), [&](const Listed& l) { return l.def->name == name; }) > 1;
}

}  // namespace

const std::vector<ModeDef>& Modes() {
  static const std::vector<ModeDef> modes = BuildModes();
  return modes;
}

const std::vector<SystemDef>& Systems() {
  static const std::vector<SystemDef> systems = BuildSystems();
  return systems;
}

const ParamDef* FindParam(const ModeDef& mode, const std::string& name) {
  if (!ModeTakes(mode, name)) return nullptr;
  const ParamDef* def = FindIn(*mode.declarations, name);
  return def ? def : FindIn(ModelParams(), name);
}

const ParamDef* FindParam(const std::string& name) {
  for (const auto* params : {&BenchParams(), &KvParams(), &ModelParams()})
    if (const ParamDef* def = FindIn(*params, name)) return def;
  return nullptr;
}

std::vector<std::string> ModeNames() {
  std::vector<std::string> out;
  for (const auto& m : Modes()) out.push_back(m.name);
  return out;
}

std::vector<std::string> SystemNames() {
  std::vector<std::string> out;
  for (const auto& s : Systems()) out.push_back(s.name);
  return out;
}

const std::vector<std::string>& Designs() { return FindParam("design")->choices; }

const ModeDef& FindMode(const std::string& name) {
  for (const auto& m : Modes())
    if (name == m.name) return m;
  throw ModelError("mode = '" + name + "' is not valid (" + NearestText(name, ModeNames()) +
                   "valid: " + Join(ModeNames()) + ")");
}

bool ModeTakes(const ModeDef& mode, const std::string& param) {
  return std::find(mode.params.begin(), mode.params.end(), param) != mode.params.end();
}

void ApplyDefaults(PointDraft& draft, const ModeDef& mode) {
  for (const auto& name : mode.params) {
    const ParamDef* def = FindParam(mode, name);
    if (def->apply && !def->default_value.is_null()) def->apply(draft, Checked(*def, def->default_value));
  }
}

void ApplyParam(PointDraft& draft, const ModeDef& mode, const std::string& name, const json& value) {
  const ParamDef* def = FindParam(mode, name);
  if (!def) {
    // the harness sets the coordinator's parameters: the list names those a point would set
    std::vector<std::string> settable;
    for (const auto& p : mode.params)
      if (!FindParam(mode, p)->coordinator) settable.push_back(p);
    const std::string valid = NearestText(name, settable) + "valid for " + mode.name + ": " + Join(settable) + ")";
    if (!FindParam(name)) throw ModelError("unknown parameter '" + name + "' for mode " + mode.name + " (" + valid);
    std::vector<std::string> takers;
    for (const auto& m : Modes())
      if (ModeTakes(m, name)) takers.push_back(m.name);
    throw ModelError("parameter '" + name + "' is not taken by mode " + mode.name + " (modes that take it: " +
                     Join(takers) + "; " + valid);
  }
  json v = Checked(*def, value);
  if (def->apply) def->apply(draft, v);
}

nlohmann::ordered_json DescribeJson() {
  using ojson = nlohmann::ordered_json;
  const std::vector<Listed> listed = ListedParams();
  ojson params = ojson::array();
  for (const auto& l : listed) {
    ojson row = ParamJson(*l.def);
    if (DeclaredApart(listed, l.def->name)) row["modes"] = l.modes;
    params.push_back(row);
  }
  ojson modes = ojson::array();
  for (const auto& m : Modes()) {
    ojson mode = {{"name", m.name}, {"summary", m.summary}, {"program", m.program}, {"params", m.params}};
    if (!m.model_adds.empty()) mode["model_adds"] = m.model_adds;
    modes.push_back(mode);
  }
  ojson systems = ojson::array();
  for (const auto& s : Systems())
    systems.push_back(
        {{"name", s.name}, {"display", s.display}, {"summary", s.summary}, {"program", s.program}, {"params", s.params}});
  ojson doc = ojson::object();
  doc["schema_version"] = "rdmalab-describe/1";
  doc["program"] = kModel;
  doc["backends"] = ojson::array({"model"});
  doc["params"] = params;
  doc["modes"] = modes;
  doc["systems"] = systems;
  return doc;
}

std::string ParamsHelp() {
  std::ostringstream o;
  for (const auto& l : ListedParams()) {
    const ParamDef& p = *l.def;
    std::string kind = TypeName(p.type);
    if (!p.choices.empty()) kind = Join(p.choices);
    if (p.list) kind = "list of " + kind;
    if (p.type == T::kInteger || p.type == T::kNumber) kind += " " + Range(p);
    if (p.unit.is_string()) kind += " " + p.unit.get<std::string>();
    o << "  --" << p.name << " (" << kind << "; " << EffectName(p.effect) << "; " << Join(l.modes) << ")\n      "
      << p.help << (p.effect_note.empty() ? "" : "; model: " + p.effect_note) << "\n";
  }
  return o.str();
}

}  // namespace rdmalab::model
