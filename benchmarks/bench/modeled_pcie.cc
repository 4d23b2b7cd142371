#include "benchmarks/bench/modeled_pcie.h"

#include "model/wr_accounting.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;
namespace m = rdmalab::model;

m::Opcode ModelOpcode(VerbKind kind) {
  switch (kind) {
    case VerbKind::kRead: return m::Opcode::kRead;
    case VerbKind::kWrite: return m::Opcode::kWrite;
    case VerbKind::kSend: return m::Opcode::kSend;
    case VerbKind::kCas: return m::Opcode::kCas;
    case VerbKind::kFaa: return m::Opcode::kFaa;
  }
  return m::Opcode::kWrite;
}

m::Transport ModelTransport(ibv_qp_type type) {
  return type == IBV_QPT_UD ? m::Transport::kUd : type == IBV_QPT_UC ? m::Transport::kUc : m::Transport::kRc;
}

json CountersJson(const m::ModeledCounters& c, double scale) {
  json out = json::object();
  for (const auto& [name, field] : m::kModeledCounterFields) out[name] = static_cast<double>(c.*field) * scale;
  return out;
}

}  // namespace

json ModeledPcie(const WorkShape& shape, std::uint64_t ops, bool requester) {
  m::DeviceModel device;
  device.wire.kind = shape.ethernet ? m::LinkKind::kRoceV2 : m::LinkKind::kIb;
  device.wire.mtu_B = shape.mtu_bytes;
  // One period of the posting pattern: cq_mod batches of post_list WRs, the signaled WRs
  // spaced cq_mod apart, so that per-op averages are exact for the run's steady state.
  const std::uint64_t period = static_cast<std::uint64_t>(shape.post_list) * static_cast<std::uint64_t>(shape.cq_mod);
  m::ModeledCounters requester_counters, responder_counters;
  m::PostAccumulator post;
  for (std::uint64_t i = 0; i < period; ++i) {
    m::WrShape wr;
    wr.op = ModelOpcode(shape.kind);
    wr.transport = ModelTransport(shape.qp_type);
    wr.payload_B = IsAtomicKind(shape.kind) ? 8 : shape.size_bytes;
    wr.inline_data = shape.inline_payload;
    wr.signaled = (i + 1) % static_cast<std::uint64_t>(shape.cq_mod) == 0;
    wr.header_only = shape.header_only;
    wr.with_imm = shape.header_only;  // a header-only SEND carries its 4 B as immediate data
    wr.sge = static_cast<std::uint32_t>(shape.sge);
    post.Add(wr, device.wqe);
    m::AccountRequesterWr(device, wr, requester_counters);
    m::AccountResponderWr(device, wr, responder_counters);
    m::AccountWire(device, wr, requester_counters, responder_counters);
    if ((i + 1) % static_cast<std::uint64_t>(shape.post_list) == 0) post.Flush(device, requester_counters);
  }
  const m::ModeledCounters& mine = requester ? requester_counters : responder_counters;
  const double per_op = 1.0 / static_cast<double>(period);
  return {{"device_model", "model/wr_accounting.h default: Connect-IB, PCIe 3.0 x16"},
          {"side", requester ? "requester" : "responder"},
          {"ops", ops},
          {"per_op", CountersJson(mine, per_op)},
          {"total", CountersJson(mine, per_op * static_cast<double>(ops))}};
}

}  // namespace rdmalab::bench
