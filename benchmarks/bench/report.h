// What a mode measured, kept apart from how it is printed (program.cc, rdma/program.h): rows
// of results, one per payload size, with per-thread and per-peer breakdowns and a latency
// histogram, and the PCIe and wire counters the model expects.
#pragma once

#include <nlohmann/json.hpp>

#include "rdma/program.h"

namespace rdmalab::bench {

struct Report : RunReport {
  // Expected PCIe/wire counters per row (modeled_pcie.h), or null when the mode has none.
  nlohmann::json pcie_modeled = nullptr;
};

}  // namespace rdmalab::bench
