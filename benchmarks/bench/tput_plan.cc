#include "benchmarks/bench/tput_plan.h"

#include <algorithm>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/modes.h"
#include "rdma/error.h"

namespace rdmalab::bench {

VerbKind ParseVerbKind(const std::string& verb) {
  if (verb == "read") return VerbKind::kRead;
  if (verb == "write" || verb == "write_inline") return VerbKind::kWrite;
  if (verb == "send") return VerbKind::kSend;
  if (verb == "cas") return VerbKind::kCas;
  if (verb == "faa") return VerbKind::kFaa;
  Fail("bad verb '", verb, "': valid verbs are read, write, write_inline, send, cas, faa");
}

ibv_qp_type ParseQpType(const std::string& connection) {
  if (connection == "RC") return IBV_QPT_RC;
  if (connection == "UC") return IBV_QPT_UC;
  if (connection == "UD") return IBV_QPT_UD;
  Fail("bad connection '", connection, "': valid are RC, UC, UD");
}

void CheckThroughputOptions(Options& o) {
  const VerbKind kind = ParseVerbKind(o.verb);
  const bool placed = o.numa != "device" || o.page_offset >= 0 || o.buffers > 0;
  if (placed && (o.validate || IsAtomicKind(kind) || o.direction == "alltoall")) {
    Fail("--numa, --page-offset and --buffers place tput's source buffers (nosql Fig. 9-11): they do not combine with "
         "--validate (reused buffers hold no per-message pattern), atomics or --direction alltoall");
  }
  // A sweep over the distribution shares one --zipf-theta, which uniform points do not use.
  if (o.distribution == "none") {
    if (o.placement != "clustered" || o.keys != 0 || o.zipf_theta != 0.99) {
      Fail("--placement, --keys and --zipf-theta describe keyed READs: they need --distribution uniform|zipf");
    }
  } else {
    if (kind != VerbKind::kRead || o.direction == "alltoall") {
      Fail("--distribution ", o.distribution, " with --verb ", o.verb, " --direction ", o.direction,
           ": keyed addresses are for READs (nosql Fig. 14), inbound or outbound; use --verb read");
    }
    if (o.validate) Fail("--distribution ", o.distribution, " does not combine with --validate: slots of the "
                         "window hold values of changing keys, no per-slot pattern");
  }
  if (o.connection == "UD" && kind != VerbKind::kSend) {
    Fail("--verb ", o.verb, " over UD is impossible: UD carries only SEND (use --verb send, or -c RC/UC)");
  }
  if (o.connection == "UC" && (kind == VerbKind::kRead || IsAtomicKind(kind))) {
    Fail("--verb ", o.verb, " over UC is impossible: UC carries WRITE and SEND only (use -c RC)");
  }
  if (o.header_only) {
    if (kind != VerbKind::kSend) Fail("--header-only needs --verb send (it is a zero-byte SEND with immediate)");
    if (o.sizes.empty()) o.sizes.push_back(0);
    for (auto size : o.sizes) {
      if (size != 0) Fail("--header-only with --size ", size, ": header-only SENDs carry 0 payload bytes");
    }
  }
  if (IsAtomicKind(kind)) {
    if (o.sizes.empty()) o.sizes.push_back(8);
    for (auto size : o.sizes) {
      if (size != 8) Fail("--size ", size, " with --verb ", o.verb, ": atomics move exactly 8 bytes");
    }
    if (o.counter_stride % 8 != 0) Fail("--counter-stride ", o.counter_stride, " is not a multiple of 8");
  }
  for (auto size : o.sizes) {
    if (size == 0 && kind != VerbKind::kSend && kind != VerbKind::kWrite) {
      Fail("--size 0 with --verb ", o.verb, ": only SEND and WRITE can carry 0 bytes");
    }
    if (size != 0 && static_cast<std::uint32_t>(o.sge) > size) {
      Fail("--sge ", o.sge, " with --size ", size, ": every SGE needs at least one byte");
    }
    if (o.verb == "write_inline" && o.inline_size != 0 && static_cast<std::uint32_t>(o.inline_size) < size) {
      Fail("--verb write_inline with --inline_size ", o.inline_size, " < --size ", size,
           ": the payload would not be inline; raise --inline_size or use --verb write");
    }
  }
  if (o.post_list > kMaxPostList) Fail("--post_list ", o.post_list, " exceeds ", kMaxPostList);
  if (o.sge > kMaxSges) Fail("--sge ", o.sge, " exceeds ", kMaxSges);
  if (o.cq_mod + o.post_list - 1 > o.tx_depth) {
    Fail("--tx-depth ", o.tx_depth, " is too small for --cq-mod ", o.cq_mod, " and --post_list ", o.post_list,
         ": a signaled WR must fit in the window, i.e. tx-depth >= cq-mod + post_list - 1 = ",
         o.cq_mod + o.post_list - 1);
  }
}

std::string SelfName(const Session& session) { return session.role() + "/" + std::to_string(session.index()); }

std::uint32_t SourceIndex(const Session& session) {
  return session.role() == "server" ? 0u : static_cast<std::uint32_t>(session.index());
}

TputPlan MakeTputPlan(const Session& session) {
  const Options& o = session.options();
  TputPlan plan;
  plan.kind = ParseVerbKind(o.verb);
  plan.qp_type = ParseQpType(o.connection);
  const std::string& role = session.role();
  if (o.direction == "inbound") {
    plan.active = role == "client";
    plan.passive = role == "server";
  } else if (o.direction == "outbound") {
    plan.active = role == "server";
    plan.passive = role == "client";
  } else {
    plan.active = plan.passive = true;
  }
  plan.lanes = static_cast<std::uint32_t>(o.threads * o.qp);
  plan.sources = role == "client" ? 1u : static_cast<std::uint32_t>(session.clients());
  const std::uint32_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  plan.slot_bytes = SlotBytes(max_size);
  plan.slots_per_lane = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(o.tx_depth, std::max<std::uint64_t>(1, kLaneBytes / plan.slot_bytes)));
  if (o.buffers > 0) plan.slots_per_lane = std::min(plan.slots_per_lane, static_cast<std::uint32_t>(o.buffers));
  plan.local_stride = plan.slot_bytes;
  if (o.page_offset >= 0) {  // every buffer in its own page(s), the payload starting page_offset into it
    plan.local_offset = static_cast<std::uint32_t>(o.page_offset);
    plan.local_stride = static_cast<std::uint32_t>(DivideRoundUp(plan.slot_bytes + plan.local_offset, kPageBytes) * kPageBytes);
  }
  if (plan.kind == VerbKind::kCas && plan.slots_per_lane < static_cast<std::uint32_t>(o.tx_depth)) {
    Fail("--tx-depth ", o.tx_depth, " with CAS needs ", o.tx_depth, " result slots per QP; the most is ",
         plan.slots_per_lane);
  }
  plan.exposed_slots = plan.passive ? plan.sources * plan.lanes * plan.slots_per_lane : 0;
  plan.exposed_bytes = std::max<std::uint64_t>(4096, std::uint64_t{plan.exposed_slots} * plan.slot_bytes);
  plan.keyed = o.distribution != "none";
  if (plan.keyed) {
    plan.keys = o.keys != 0 ? o.keys : kDefaultKeys;
    if (plan.passive) plan.exposed_bytes = std::max<std::uint64_t>(4096, plan.keys * max_size);
  }
  if (IsAtomicKind(plan.kind)) {
    plan.exposed_bytes = std::max<std::uint64_t>(plan.exposed_bytes,
                                                 std::uint64_t(o.counters) * std::uint64_t(o.counter_stride));
  }
  if (o.verb == "write_inline") {
    plan.inline_threshold = o.inline_size != 0 ? static_cast<std::uint32_t>(o.inline_size) : max_size;
  } else if (plan.kind == VerbKind::kWrite || plan.kind == VerbKind::kSend) {
    plan.inline_threshold = static_cast<std::uint32_t>(o.inline_size);
  }
  plan.max_inline_bytes = std::min(plan.inline_threshold, max_size);
  plan.max_rd_atomic = static_cast<std::uint8_t>(std::clamp(session.device().attr().max_qp_rd_atom, 1, 16));
  plan.send_with_imm = plan.kind == VerbKind::kSend && (o.header_only || o.validate);
  if (plan.qp_type == IBV_QPT_UD) {
    const std::uint32_t mtu = MtuBytes(session.address().mtu);
    if (max_size > mtu) {
      Fail("--size ", max_size, " over UD exceeds the path MTU of ", mtu, " B: a UD message is one packet");
    }
  }
  return plan;
}

}  // namespace rdmalab::bench
