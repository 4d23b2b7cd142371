#include "model/point.h"

#include <algorithm>

#include "model/params.h"
#include "model/profile.h"

namespace rdmalab::model {
namespace {

using nlohmann::json;

std::string OneOf(const std::string& field, const std::string& value, const std::vector<std::string>& valid) {
  if (std::find(valid.begin(), valid.end(), value) == valid.end())
    throw ModelError("params." + field + " = '" + value + "' is not valid (valid: " + Join(valid) + ")");
  return value;
}

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

namespace {

// The client processes of a point's roles (process counts): the model reads roles.client, or
// the nodes of an all-to-all run (the server is the measured node; other roles, e.g. pcie's
// host, run nothing it predicts).
uint32_t ClientProcesses(const json& doc) {
  if (!doc.contains("roles")) return 0;
  const json& roles = doc["roles"];
  if (!roles.is_object()) throw ModelError("point field 'roles' must map role -> process count");
  for (const auto& [role, count] : roles.items())
    if (!count.is_number_integer() || count.get<int64_t>() < 0 || count.get<int64_t>() > (1 << 20))
      throw ModelError("roles." + role + " = " + count.dump() + " must be a process count in 0..1048576");
  if (roles.contains("node")) return roles["node"].get<uint32_t>();
  return roles.contains("client") ? roles["client"].get<uint32_t>() : 0;
}

// The verb from verb, connection, header_only and inline_size, as the mode allows it.
void ResolveVerb(PointDraft& draft) {
  Point& p = draft.p;
  std::string verb = draft.verb, conn = draft.connection.empty() ? "RC" : draft.connection;
  if (verb.empty()) verb = p.mode == "atomics" ? "faa" : p.mode == "sgbatch" ? "send" : "write";
  p.verb = ParseVerb("verb", verb, conn);
  p.verb.header_only = draft.header_only;
  if (draft.header_only && p.verb.op != Opcode::kSend && p.verb.op != Opcode::kWrite)
    throw ModelError("params.header_only applies to send and write only (verb is " + verb + ")");
  if (draft.header_only) p.size_B = 0;
  if (draft.inline_size >= 0 && p.size_B <= draft.inline_size &&
      (p.verb.op == Opcode::kSend || p.verb.op == Opcode::kWrite))
    p.verb.inline_data = true;
  if (p.mode == "sgbatch" && p.verb.op != Opcode::kSend)
    throw ModelError("params.verb = " + verb + " is not valid for sgbatch (valid: send)");
  if (p.mode == "atomics" && !IsAtomic(p.verb.op))
    throw ModelError("params.verb = " + verb + " is not valid for atomics (valid: cas, faa)");
}

// As rdmalab-bench: `connection` is the request's transport, `response_connection` the
// response's (UD for SEND responses by default), inline when size <= inline_size, one
// signaled response in cq_mod; `optimizations` (inline, unsignaled, uc) adds to that.
void ResolveEcho(PointDraft& draft) {
  Point& p = draft.p;
  bool uc = false, inl = false, unsig = false;
  for (const auto& o : draft.optimizations) {
    uc |= o == "uc";
    inl |= o == "inline";
    unsig |= o == "unsignaled";
  }
  std::string req_conn = draft.connection, resp_conn = draft.response_connection;
  if (req_conn.empty()) req_conn = "RC";
  if (resp_conn.empty()) resp_conn = draft.response.rfind("send", 0) == 0 ? "UD" : req_conn;
  if (uc && req_conn == "RC") req_conn = "UC";
  if (uc && resp_conn == "RC") resp_conn = "UC";
  p.request = ParseVerb("request", draft.request, req_conn);
  p.response = ParseVerb("response", draft.response, resp_conn);
  bool by_size = draft.inline_size >= 0 && p.size_B <= draft.inline_size;
  p.request.inline_data |= inl || by_size;
  p.response.inline_data |= inl || by_size;
  p.request.signaled = p.response.signaled = !unsig;
  for (VerbSpec* v : {&p.request, &p.response})
    if (v->op != Opcode::kSend && v->op != Opcode::kWrite)
      throw ModelError("params.request/response: echo verbs are write or send (got " + VerbName(*v) + ")");
}

void CheckPcieMethod(const Point& p) {
  std::vector<std::string> methods = p.formula == "transfer" ? std::vector<std::string>{"dma", "mmio"}
                                                             : std::vector<std::string>{"mmio", "doorbell"};
  if (p.formula != "wqe_header" && std::find(methods.begin(), methods.end(), p.method) == methods.end())
    throw ModelError("params.method = '" + p.method + "' is not valid for formula " + p.formula + " (valid: " +
                     Join(methods) + ")");
}

}  // namespace

Point PointFromJson(const json& doc) {
  static const std::vector<std::string> top = {"experiment", "profile", "mode", "roles", "params", "backend"};
  if (!doc.is_object()) throw ModelError("the point must be a JSON object with keys: " + Join(top));
  for (const auto& [k, v] : doc.items())
    if (std::find(top.begin(), top.end(), k) == top.end())
      throw ModelError("unknown point field '" + k + "' (valid: " + Join(top) + ")");
  if (!doc.contains("mode")) throw ModelError("point field 'mode' is missing (valid: " + Join(ModeNames()) + ")");
  if (!doc["mode"].is_string()) throw ModelError("point field 'mode' must be a string (valid: " + Join(ModeNames()) + ")");
  const ModeDef& mode = FindMode(doc["mode"].get<std::string>());
  PointDraft draft;
  Point& p = draft.p;
  if (doc.contains("experiment") && doc["experiment"].is_string()) p.experiment = doc["experiment"];
  p.mode = mode.name;
  const uint32_t processes = ClientProcesses(doc);
  json params = doc.value("params", json::object());
  if (!params.is_object()) throw ModelError("point field 'params' must be an object");
  ApplyDefaults(draft, mode);
  for (const auto& [k, v] : params.items()) ApplyParam(draft, mode, k, v);
  p.clients = processes;
  p.peer_threads = processes * (p.mode == "kv" ? draft.client_threads : 1);
  // rdmalab-kv: clients per client process; a point that names neither client processes nor
  // clients leaves the count to the system (herd14's 51)
  if (draft.clients_per_process > 0 && (processes > 0 || params.contains("clients")))
    p.clients = std::max<uint32_t>(processes, 1) * static_cast<uint32_t>(draft.clients_per_process);
  // the sequencer's clients keep rdmalab-bench's tx_depth requests in flight each
  if (p.mode == "sequencer" && p.tx_depth) p.window = p.tx_depth;
  ResolveVerb(draft);
  if (p.mode == "echo") ResolveEcho(draft);
  if (p.mode == "pcie") CheckPcieMethod(p);
  return p;
}

}  // namespace rdmalab::model
