// Discrete-event simulator (README "Simulator": what the bound cannot say): closed-loop clients
// with windows drive one server NIC through its processing units (one PU per QP), atomic
// lock buckets, PCIe and the link, with an LRU QP-context cache and a WQE cache. It gives
// latency under load (mean and percentiles) and cache effects. The event loop allocates
// nothing: every array is sized before the first event.
#pragma once

#include <cstdint>

#include "model/analytic.h"
#include "model/point.h"
#include "model/profile.h"

namespace rdmalab::model {

struct SimConfig {
  uint32_t clients = 16;        // closed-loop clients
  uint32_t window = 4;          // operations each keeps outstanding
  uint32_t qps = 16;            // QPs at the server; client c uses QP c % qps
  uint64_t ops = 1'000'000;     // operations to complete (after warm-up)
  uint64_t seed = 1;
  uint32_t pus = 8;             // QP q is served by PU q % pus
  double pu_service_ns = 50;    // one op on one PU
  double host_service_ns = 0;   // serialized host share (CPU / PIO), per op
  double pcie_service_ns = 0;   // per op, the busier PCIe direction
  double link_service_ns = 0;   // per op, the busier link direction
  double base_latency_ns = 2000;  // unloaded round trip besides the service times above
  uint32_t qp_cache_entries = 0;  // 0 = no QP-context cache modeled
  double qp_miss_ns = 0;          // extra PU time on a miss
  double qp_miss_pcie_ns = 0;     // extra PCIe time on a miss (context DMA)
  uint32_t wqe_cache_entries = 0; // 0 = unlimited; more queued WQEs than this -> re-read
  double wqe_miss_ns = 0;
  double wqe_miss_pcie_ns = 0;
  uint32_t lock_buckets = 0;    // 0 = no atomics
  uint64_t counters = 1;        // distinct atomic targets, spread over the buckets
  double lock_hold_ns = 0;
  bool exponential = false;     // exponential instead of deterministic service times
};

struct SimResult {
  double mops = 0;
  double lat_us_mean = 0, lat_us_p50 = 0, lat_us_p90 = 0, lat_us_p99 = 0, lat_us_p999 = 0, lat_us_max = 0;
  uint64_t completed = 0, events = 0, qp_misses = 0, wqe_misses = 0;
  double uniformity_ratio = 0;  // max / min operations completed per client (1 = fair)
  double simulated_s = 0;
  double wall_s = 0;
};

SimResult Simulate(const SimConfig& c);
// The simulator configuration for a point: service times from the analytic per-op demand.
SimConfig SimConfigFor(const Point& pt, const Profile& prof, const Prediction& analytic);

}  // namespace rdmalab::model
