// What a key-value role measured (one row: the run's rate, latency, per-client counts),
// kept apart from how it is printed (program.cc, rdma/program.h), with the system's own side.
#pragma once

#include <nlohmann/json.hpp>

#include "rdma/program.h"

namespace rdmalab::kv {

// validation: {"enabled", "ok", "checked", "wrong_key", "corrupt"}; ok false fails the run.
struct Report : RunReport {
  // The system's own side: server workers' counts, a TCP server's statistics, ...
  nlohmann::json server = nullptr;
};

}  // namespace rdmalab::kv
