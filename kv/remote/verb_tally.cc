#include "kv/remote/verb_tally.h"

#include <map>
#include <string>

#include "model/wr_accounting.h"

namespace rdmalab::kv::remote {
namespace {

using nlohmann::json;
namespace m = rdmalab::model;

const char* VerbName(Verb verb) {
  switch (verb) {
    case Verb::kRead: return "READ";
    case Verb::kWrite: return "WRITE";
    case Verb::kSend: return "SEND";
    case Verb::kCas: return "CAS";
  }
  return "?";
}

std::string OpcodeName(const VerbClass& c) {
  return std::string(c.transport == IBV_QPT_UC ? "UC " : c.transport == IBV_QPT_UD ? "UD " : "RC ") + VerbName(c.verb);
}

m::WrShape ShapeOf(const VerbClass& c, bool signaled) {
  m::WrShape wr;
  wr.op = c.verb == Verb::kRead ? m::Opcode::kRead
          : c.verb == Verb::kWrite ? m::Opcode::kWrite
          : c.verb == Verb::kSend ? m::Opcode::kSend
                                  : m::Opcode::kCas;
  wr.transport = c.transport == IBV_QPT_UC ? m::Transport::kUc : c.transport == IBV_QPT_UD ? m::Transport::kUd
                                                                                         : m::Transport::kRc;
  wr.payload_B = c.verb == Verb::kCas ? 8 : c.bytes;
  wr.inline_data = c.inline_payload;
  wr.signaled = signaled;
  return wr;
}

struct NicBytes {
  double h2d = 0, d2h = 0;
  void Add(const m::ModeledCounters& c, double weight) {
    h2d += weight * static_cast<double>(c.pcie_mmio_bytes + c.pcie_dma_cpl_bytes);
    d2h += weight * static_cast<double>(c.pcie_d2h_bytes);
  }
  json Json(double per) const { return {{"h2d_bytes", h2d * per}, {"d2h_bytes", d2h * per}, {"bytes", (h2d + d2h) * per}}; }
};

// One WR of class `c` posted alone (WQE-by-MMIO: every post here carries one WR), signaled
// one in c.signal_every: its bytes at the poster's NIC and at the other side's.
void AccountClass(const VerbClass& c, double wrs, NicBytes& poster, NicBytes& target) {
  const m::DeviceModel device;
  const double signaled_share = c.signal_every ? 1.0 / static_cast<double>(c.signal_every) : 0.0;
  for (const bool signaled : {true, false}) {
    const double weight = wrs * (signaled ? signaled_share : 1.0 - signaled_share);
    if (weight == 0) continue;
    const m::WrShape wr = ShapeOf(c, signaled);
    m::ModeledCounters requester, responder;
    m::PostAccumulator post;
    post.Add(wr, device.wqe);
    post.Flush(device, requester);
    m::AccountRequesterWr(device, wr, requester);
    m::AccountResponderWr(device, wr, responder);
    poster.Add(requester, weight);
    target.Add(responder, weight);
  }
}

}  // namespace

void VerbTally::Add(const VerbTally& o) {
  for (std::size_t i = 0; i < kMaxVerbClasses; ++i) wrs[i] += o.wrs[i];
  gets += o.gets;
  puts += o.puts;
}

json VerbTally::Json() const { return {{"wrs", wrs}, {"gets", gets}, {"puts", puts}}; }

VerbTally VerbTally::FromJson(const json& j) {
  VerbTally t;
  t.wrs = j.at("wrs").get<std::array<std::uint64_t, kMaxVerbClasses>>();
  t.gets = j.at("gets");
  t.puts = j.at("puts");
  return t;
}

json VerbsJson(const std::vector<VerbClass>& classes, const VerbTally& tally) {
  const double ops = static_cast<double>(tally.gets + tally.puts);
  const auto per = [](std::uint64_t n) { return n ? 1.0 / static_cast<double>(n) : 0.0; };
  std::map<std::string, double> get_verbs[2], put_verbs[2], op_verbs[2];
  NicBytes client_nic, server_nic;
  double wrs_per_op = 0;
  for (std::size_t i = 0; i < classes.size(); ++i) {
    const VerbClass& c = classes[i];
    const double wrs = static_cast<double>(tally.wrs[i]);
    const int side = c.poster == Side::kClient ? 0 : 1;
    const std::string name = OpcodeName(c);
    (c.op == OpKind::kGet ? get_verbs : put_verbs)[side][name] += wrs * per(c.op == OpKind::kGet ? tally.gets : tally.puts);
    op_verbs[side][name] += ops > 0 ? wrs / ops : 0.0;
    wrs_per_op += ops > 0 ? wrs / ops : 0.0;
    if (c.poster == Side::kClient) {
      AccountClass(c, wrs, client_nic, server_nic);
    } else {
      AccountClass(c, wrs, server_nic, client_nic);
    }
  }
  const auto sides = [](const std::map<std::string, double>* by_side) {
    return json{{"client", json(by_side[0])}, {"server", json(by_side[1])}};
  };
  const double per_op = ops > 0 ? 1.0 / ops : 0.0;
  return {{"source", "the client's count of the WRs it posted and of the server's answers it received"},
          {"gets", tally.gets},
          {"puts", tally.puts},
          {"per_get", sides(get_verbs)},
          {"per_put", sides(put_verbs)},
          {"per_op", sides(op_verbs)},
          {"verbs_per_op", wrs_per_op},
          {"pcie_modeled_bytes_per_op",
           {{"model", "model/wr_accounting.h default device (Connect-IB, PCIe 3.0 x16), one WR per post"},
            {"client_nic", client_nic.Json(per_op)},
            {"server_nic", server_nic.Json(per_op)}}},
          {"server_pcie_bytes_per_op", (server_nic.h2d + server_nic.d2h) * per_op}};
}

}  // namespace rdmalab::kv::remote
