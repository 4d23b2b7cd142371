// The "expected" PCIe and wire bytes of a run, from the model's per-WR accounting
// (model/wr_accounting.h): what a NIC like the default device model would move for the
// ops this process posted or served. Beside measured counters (PCM), the difference is
// what the NIC fetched beyond the model, e.g. WQE or QP-context cache misses.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

#include "benchmarks/bench/options.h"
#include "benchmarks/bench/tput_plan.h"

namespace rdmalab::bench {

struct WorkShape {
  VerbKind kind = VerbKind::kWrite;
  ibv_qp_type qp_type = IBV_QPT_RC;
  std::uint32_t size_bytes = 0;
  bool inline_payload = false;
  bool header_only = false;
  int sge = 1;
  int post_list = 1;
  int cq_mod = 1;
  bool ethernet = false;
  std::uint32_t mtu_bytes = 4096;
};

// Per-op and total modeled counters for `ops` operations of `shape`, on the requester (the
// side that posts) or the responder side.
nlohmann::json ModeledPcie(const WorkShape& shape, std::uint64_t ops, bool requester);

}  // namespace rdmalab::bench
