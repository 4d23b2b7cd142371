#include "model/point.h"

#include <algorithm>

#include "model/profile.h"

namespace rdmalab::model {
namespace {

using nlohmann::json;

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string OneOf(const std::string& field, const std::string& value, const std::vector<std::string>& valid) {
  if (std::find(valid.begin(), valid.end(), value) == valid.end())
    throw ModelError("params." + field + " = '" + value + "' is not valid (valid: " + Join(valid) + ")");
  return value;
}

int64_t Int(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() && !(v.is_string() && !v.get<std::string>().empty()))
    throw ModelError("params." + field + " must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  int64_t x;
  try {
    x = v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>();
  } catch (const std::exception&) {
    throw ModelError("params." + field + " = " + v.dump() + " is not an integer (valid: " + std::to_string(lo) +
                     ".." + std::to_string(hi) + ")");
  }
  if (x < lo || x > hi)
    throw ModelError("params." + field + " = " + std::to_string(x) + " is out of range (valid: " +
                     std::to_string(lo) + ".." + std::to_string(hi) + ")");
  return x;
}

double Num(const json& v, const std::string& field, double lo, double hi) {
  if (!v.is_number())
    throw ModelError("params." + field + " = " + v.dump() + " must be a number in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  double x = v.get<double>();
  if (!(x >= lo && x <= hi))
    throw ModelError("params." + field + " = " + v.dump() + " is out of range (valid: " + std::to_string(lo) +
                     " .. " + std::to_string(hi) + ")");
  return x;
}

bool Bool(const json& v, const std::string& field) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_string() && (v == "true" || v == "false")) return v == "true";
  throw ModelError("params." + field + " = " + v.dump() + " is not valid (valid: true, false)");
}

std::string Str(const json& v, const std::string& field) {
  if (!v.is_string()) throw ModelError("params." + field + " = " + v.dump() + " must be a string");
  return v.get<std::string>();
}

// Params rdmalab-bench takes that change nothing in a prediction.
const std::vector<std::string> kRunOnlyParams = {"iters", "duration", "warmup", "validate", "timeout",
                                                 "ib_dev", "ib_port", "gid_index", "count", "counters_file"};

}  // namespace

const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kRc: return "RC";
    case Transport::kUc: return "UC";
    case Transport::kUd: return "UD";
    case Transport::kDc: return "DC";
  }
  return "?";
}

VerbSpec ParseVerb(const std::string& field, const std::string& verb, const std::string& connection) {
  static const std::vector<std::string> verbs = {"read", "write", "write_inline", "send", "send_inline",
                                                 "cas", "faa"};
  static const std::vector<std::string> conns = {"RC", "UC", "UD", "DC"};
  OneOf(field + ".verb", verb, verbs);
  OneOf(field + ".connection", connection, conns);
  VerbSpec v;
  v.transport = connection == "RC" ? Transport::kRc : connection == "UC" ? Transport::kUc
              : connection == "UD" ? Transport::kUd : Transport::kDc;
  if (verb == "read") v.op = Opcode::kRead;
  else if (verb.rfind("write", 0) == 0) v.op = Opcode::kWrite;
  else if (verb.rfind("send", 0) == 0) v.op = Opcode::kSend;
  else if (verb == "cas") v.op = Opcode::kCas;
  else v.op = Opcode::kFaa;
  v.inline_data = verb.find("inline") != std::string::npos;
  if ((v.op == Opcode::kRead || IsAtomic(v.op)) && !IsReliable(v.transport))
    throw ModelError("params." + field + ": " + verb + " over " + connection +
                     " is impossible (READ and atomics need a reliable connection; valid connections for " + verb +
                     ": RC, DC)");
  if (v.op == Opcode::kWrite && v.transport == Transport::kUd)
    throw ModelError("params." + field + ": write over UD is impossible (valid connections for write: RC, UC, DC)");
  return v;
}

std::string VerbName(const VerbSpec& v) {
  std::string op = v.op == Opcode::kRead ? "READ" : v.op == Opcode::kWrite ? "WRITE" : v.op == Opcode::kSend ? "SEND"
                 : v.op == Opcode::kCas ? "CAS" : "FAA";
  std::string s = op + "-" + TransportName(v.transport);
  if (v.inline_data) s += "-inline";
  if (v.header_only) s += "-header-only";
  return s;
}

Point PointFromJson(const json& doc, bool strict) {
  static const std::vector<std::string> top = {"experiment", "profile", "mode", "roles", "params", "backend"};
  if (!doc.is_object()) throw ModelError("the point must be a JSON object with keys: " + Join(top));
  for (const auto& [k, v] : doc.items())
    if (std::find(top.begin(), top.end(), k) == top.end())
      throw ModelError("unknown point field '" + k + "' (valid: " + Join(top) + ")");
  Point p;
  if (doc.contains("experiment") && doc["experiment"].is_string()) p.experiment = doc["experiment"];
  if (!doc.contains("mode")) throw ModelError("point field 'mode' is missing (valid: " + Join(kModes) + ")");
  p.mode = OneOf("mode", Str(doc["mode"], "mode"), kModes);
  if (doc.contains("roles")) {
    const json& roles = doc["roles"];
    if (!roles.is_object()) throw ModelError("point field 'roles' must map role -> count");
    if (roles.contains("client")) p.clients = static_cast<uint32_t>(Int(roles["client"], "roles.client", 1, 1 << 20));
    if (roles.contains("node")) p.clients = static_cast<uint32_t>(Int(roles["node"], "roles.node", 1, 1 << 20));
  }
  json params = doc.value("params", json::object());
  if (!params.is_object()) throw ModelError("point field 'params' must be an object");
  // normalise '-' to '_' as the bench does
  json norm = json::object();
  for (const auto& [k, v] : params.items()) {
    std::string key = k;
    std::replace(key.begin(), key.end(), '-', '_');
    norm[key] = v;
  }
  std::string verb = "write", conn = "RC";
  if (p.mode == "atomics") verb = "faa";
  if (p.mode == "sgbatch") verb = "send";
  std::string req_verb = "write", req_conn, resp_verb = "send", resp_conn;
  int64_t inline_size = -1;
  bool header_only = false;
  std::vector<std::string> opts;
  for (const auto& [k, v] : norm.items()) {
    if (k == "verb") verb = Str(v, k);
    else if (k == "connection") conn = Str(v, k);
    else if (k == "size" || k == "payload") p.size_B = Int(v, k, 0, 1 << 30);
    else if (k == "direction") p.direction = OneOf(k, Str(v, k), {"inbound", "outbound", "alltoall"});
    else if (k == "post_list") p.post_list = static_cast<uint32_t>(Int(v, k, 1, 4096));
    else if (k == "batch") {
      p.post_list = static_cast<uint32_t>(Int(v, k, 1, 4096));
      p.batch_given = true;
    }
    else if (k == "cq_mod" || k == "signal_every") p.cq_mod = static_cast<uint32_t>(Int(v, k, 1, 1 << 20));
    else if (k == "qp" || k == "qps") p.qp = static_cast<uint32_t>(Int(v, k, 1, 1 << 24));
    else if (k == "threads" || k == "cores" || k == "workers") p.threads = static_cast<uint32_t>(Int(v, k, 1, 4096));
    else if (k == "tx_depth") p.tx_depth = static_cast<uint32_t>(Int(v, k, 1, 1 << 20));
    else if (k == "clients" || k == "machines") p.clients = static_cast<uint32_t>(Int(v, k, 1, 1 << 20));
    else if (k == "inline_size") inline_size = Int(v, k, 0, 1 << 16);
    else if (k == "sge") p.sge = static_cast<uint32_t>(Int(v, k, 1, 1024));
    else if (k == "header_only") header_only = Bool(v, k);
    else if (k == "inline_recv") p.inline_recv = Bool(v, k);
    else if (k == "counters") p.counters = static_cast<uint64_t>(Int(v, k, 1, int64_t(1) << 40));
    else if (k == "link") p.link = OneOf(k, Str(v, k), {"ib", "roce"});
    else if (k == "request") req_verb = Str(v, k);
    else if (k == "response") resp_verb = Str(v, k);
    else if (k == "request_connection") req_conn = Str(v, k);
    else if (k == "response_connection") resp_conn = Str(v, k);
    else if (k == "optimizations") {
      if (v.is_string()) {
        std::string s = v;
        for (size_t a = 0; a < s.size();) {
          size_t b = s.find_first_of(",+", a);
          if (b == std::string::npos) b = s.size();
          if (b > a) opts.push_back(s.substr(a, b - a));
          a = b + 1;
        }
      } else if (v.is_array()) {
        for (const auto& o : v) opts.push_back(Str(o, k));
      } else {
        throw ModelError("params.optimizations must be a list or a comma-separated string of: none, inline, unsignaled, uc");
      }
      for (const auto& o : opts) OneOf("optimizations", o, {"none", "inline", "unsignaled", "uc"});
    } else if (k == "design") {
      // rdmalab-bench spells designs with '-' (herd-rpc-mq); both spellings are accepted
      std::string d = Str(v, k);
      std::replace(d.begin(), d.end(), '-', '_');
      if (d == "herd_rpc_mq") d = "herd_rpc_batch_mq";
      p.design = OneOf(k, d, kDesigns);
    }
    else if (k == "system") p.system = OneOf(k, Str(v, k), kSystems);
    else if (k == "put_fraction") p.put_fraction = Num(v, k, 0, 1);
    else if (k == "get_fraction") p.put_fraction = 1 - Num(v, k, 0, 1);
    else if (k == "key_size") p.key_B = static_cast<uint32_t>(Int(v, k, 1, 1024));
    else if (k == "value_size") p.value_B = static_cast<uint32_t>(Int(v, k, 0, 1 << 20));
    else if (k == "window") p.window = static_cast<uint32_t>(Int(v, k, 1, 1 << 16));
    else if (k == "batching") p.batching = Bool(v, k);
    else if (k == "multi_queue") p.queues = Bool(v, k) ? 3 : 1;
    else if (k == "queues") p.queues = static_cast<uint32_t>(Int(v, k, 1, 64));
    else if (k == "accesses") p.accesses = static_cast<uint32_t>(Int(v, k, 0, 1024));
    else if (k == "prefetch") p.prefetch = Bool(v, k);
    else if (k == "distribution") p.distribution = OneOf(k, Str(v, k), {"uniform", "zipf"}), p.keyed = true;
    else if (k == "zipf_theta") p.zipf_theta = Num(v, k, 0, 0.9999);
    else if (k == "keys") p.keys = static_cast<uint64_t>(Int(v, k, 1, int64_t(1) << 40)), p.keyed = true;
    else if (k == "core") p.core = static_cast<int32_t>(Int(v, k, 0, 4095));
    else if (k == "formula") p.formula = OneOf(k, Str(v, k), {"transfer", "wqe_header", "wqe_batch"});
    else if (k == "method") p.method = OneOf(k, Str(v, k), {"dma", "mmio", "doorbell"});
    else if (k == "wqe_type") p.wqe_type = OneOf(k, Str(v, k), {"rc_uc", "ud", "recv"});
    else if (k == "wqes") p.wqes = static_cast<uint32_t>(Int(v, k, 1, 1 << 16));
    else if (k == "wqe_size") p.wqe_B = static_cast<uint32_t>(Int(v, k, 1, 1 << 16));
    else if (k == "stack") p.stack = OneOf(k, Str(v, k), {"rdma", "udp", "tcp"});
    else if (k == "placement") p.placement = OneOf(k, Str(v, k), {"clustered", "unclustered"}), p.keyed = true;
    else if (k == "numa") p.numa = OneOf(k, Str(v, k), {"near", "far"});
    else if (k == "page_offset") p.page_offset_B = static_cast<uint32_t>(Int(v, k, 0, 4095));
    else if (k == "buffers") p.buffers = static_cast<uint32_t>(Int(v, k, 1, 1 << 20));
    else if (k == "simulate") p.simulate = Bool(v, k);
    else if (k == "window_bound") p.window_bound = Bool(v, k);
    else if (k == "sim_exponential") p.sim_exponential = Bool(v, k);
    else if (k == "sim_ops") p.sim_ops = static_cast<uint64_t>(Int(v, k, 1000, int64_t(1) << 34));
    else if (std::find(kRunOnlyParams.begin(), kRunOnlyParams.end(), k) != kRunOnlyParams.end()) p.ignored.push_back(k);
    else if (strict)
      throw ModelError("unknown parameter '" + k + "' (valid: verb, connection, size, direction, post_list, cq_mod, "
                       "qp, threads, tx_depth, clients, inline_size, sge, header_only, inline_recv, counters, link, "
                       "request, response, optimizations, design, system, put_fraction, get_fraction, key_size, "
                       "value_size, window, batching, multi_queue, queues, accesses, prefetch, distribution, zipf_theta, keys, "
                       "core, formula, method, wqe_type, wqes, wqe_size, stack, placement, numa, page_offset, buffers, "
                       "window_bound, simulate, sim_ops, sim_exponential)");
    else p.ignored.push_back(k);
  }
  p.verb = ParseVerb("verb", verb, conn);
  p.verb.header_only = header_only;
  if (header_only && p.verb.op != Opcode::kSend && p.verb.op != Opcode::kWrite)
    throw ModelError("params.header_only applies to send and write only (verb is " + verb + ")");
  if (header_only) p.size_B = 0;
  if (inline_size >= 0 && p.size_B <= inline_size &&
      (p.verb.op == Opcode::kSend || p.verb.op == Opcode::kWrite))
    p.verb.inline_data = true;
  if (p.mode == "sgbatch" && p.verb.op != Opcode::kSend)
    throw ModelError("params.verb = " + verb + " is not valid for sgbatch (valid: send)");
  if (p.mode == "atomics" && !IsAtomic(p.verb.op))
    throw ModelError("params.verb = " + verb + " is not valid for atomics (valid: cas, faa)");
  if (p.mode == "echo") {
    // As rdmalab-bench: `connection` is the request's transport, `response_connection` the
    // response's (UD for SEND responses by default), inline when size <= inline_size, one
    // signaled response in cq_mod; `optimizations` (inline, unsignaled, uc) adds to that.
    bool uc = false, inl = false, unsig = false;
    for (const auto& o : opts) {
      uc |= o == "uc";
      inl |= o == "inline";
      unsig |= o == "unsignaled";
    }
    if (req_conn.empty()) req_conn = norm.contains("connection") ? conn : "RC";
    if (resp_conn.empty()) resp_conn = resp_verb.rfind("send", 0) == 0 ? "UD" : req_conn;
    if (uc && req_conn == "RC") req_conn = "UC";
    if (uc && resp_conn == "RC") resp_conn = "UC";
    p.request = ParseVerb("request", req_verb, req_conn);
    p.response = ParseVerb("response", resp_verb, resp_conn);
    bool by_size = inline_size >= 0 && p.size_B <= inline_size;
    p.request.inline_data |= inl || by_size;
    p.response.inline_data |= inl || by_size;
    p.request.signaled = p.response.signaled = !unsig;
    for (VerbSpec* v : {&p.request, &p.response})
      if (v->op != Opcode::kSend && v->op != Opcode::kWrite)
        throw ModelError("params.request/response: echo verbs are write or send (got " + VerbName(*v) + ")");
  }
  if (p.mode == "pcie") {
    std::vector<std::string> methods = p.formula == "transfer" ? std::vector<std::string>{"dma", "mmio"}
                                                               : std::vector<std::string>{"mmio", "doorbell"};
    if (p.formula != "wqe_header" && std::find(methods.begin(), methods.end(), p.method) == methods.end())
      throw ModelError("params.method = '" + p.method + "' is not valid for formula " + p.formula + " (valid: " +
                       Join(methods) + ")");
  }
  return p;
}

}  // namespace rdmalab::model
