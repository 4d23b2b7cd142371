#include "benchmarks/bench/modes.h"

#include "rdma/error.h"

namespace rdmalab::bench {

// Each mode's entry points, defined in its own file: the table below is their one caller.
void CheckLat(Options& options);
Report RunLat(Session& session);
void CheckTput(Options& options);
void CheckAtomics(Options& options);
Report RunTput(Session& session);
void CheckEcho(Options& options);
Report RunEcho(Session& session);
void CheckSgbatch(Options& options);
Report RunSgbatch(Session& session);
void CheckSequencer(Options& options);
Report RunSequencer(Session& session);
void CheckSockets(Options& options);
Report RunSockets(Session& session);
Report RunRawPacket(Session& session);

namespace {

bool NeverNodes(const Options&) { return false; }
bool AllToAll(const Options& options) { return options.direction == "alltoall"; }

}  // namespace

const std::vector<Mode>& Modes() {
  static const std::vector<Mode> modes = {
      {"lat",
       "latency of one op at a time: READ, WRITE, SEND, CAS, FAA; ping-pong (ECHO)",
       {"verb", "connection", "size", "all", "iters", "duration", "warmup", "tx_depth", "cq_mod", "inline_size",
        "lat_method", "events", "rdma_cm", "stack", "io_batch", "validate"},
       CheckLat, NeverNodes, RunLat},
      {"tput",
       "windowed throughput, inbound / outbound / all-to-all",
       {"verb", "connection", "size", "all", "iters", "duration", "warmup", "tx_depth", "cq_mod", "post_list", "qp",
        "threads", "inline_size", "sge", "header_only", "direction", "rdma_cm", "numa", "page_offset", "buffers",
        "distribution", "placement", "keys", "zipf_theta", "stack", "io_batch", "validate"},
       CheckTput, AllToAll, RunTput},
      {"atomics",
       "atomics throughput over Z counters",
       {"verb", "iters", "duration", "warmup", "tx_depth", "cq_mod", "post_list", "qp", "threads", "rdma_cm",
        "counters", "counter_stride", "validate"},
       CheckAtomics, NeverNodes, RunTput},
      {"echo",
       "request/response round trips (WRITE or SEND each way), server-side random accesses",
       {"connection", "size", "all", "iters", "duration", "warmup", "tx_depth", "cq_mod", "threads", "inline_size",
        "rdma_cm", "request", "response", "response_connection", "accesses", "prefetch", "table_mb", "validate"},
       CheckEcho, NeverNodes, RunEcho},
      {"sequencer",
       "integers handed out by HERD-RPC (+batching, +multi-queue), Spec-S0 or atomics, checked once each",
       {"tx_depth", "cq_mod", "threads", "inline_size", "rdma_cm", "design", "count", "batch"},
       CheckSequencer, NeverNodes, RunSequencer},
      {"sgbatch",
       "router-style forwarding of k gathered packets per SEND, one-way latency",
       {"connection", "size", "iters", "duration", "warmup", "tx_depth", "cq_mod", "inline_size", "sge", "rdma_cm",
        "validate"},
       CheckSgbatch, NeverNodes, RunSgbatch},
  };
  return modes;
}

const Mode& FindMode(const std::string& name) {
  for (const auto& mode : Modes()) {
    if (name == mode.name) return mode;
  }
  Fail("unknown mode '", name, "': valid modes are ", ModeNames());
}

std::string ModeNames() {
  std::string names;
  for (const auto& mode : Modes()) names += (names.empty() ? "" : ", ") + std::string(mode.name);
  return names;
}

const Mode& ModeFor(const Options& options) {
  static const Mode sockets = {"sockets", "lat and tput over kernel UDP or TCP sockets", {}, CheckSockets,
                               NeverNodes, RunSockets};
  static const Mode raw = {"raw", "lat and tput as UDP frames over a raw-packet QP", {}, CheckSockets, NeverNodes,
                           RunRawPacket};
  if (options.stack == "raw") return raw;
  if (options.stack != "rdma") return sockets;
  if (options.io_batch != 1) Fail("--io-batch ", options.io_batch, " applies to --stack udp and raw only");
  return FindMode(options.mode);
}

std::uint64_t IterationsOrDefault(const Options& options, std::uint64_t mode_default) {
  return options.iters != 0 ? options.iters : mode_default;
}

void DefaultSizes(Options& options, std::uint32_t size) {
  if (options.all) {
    if (!options.sizes.empty()) Fail("-a/--all and -s/--size both given: choose one");
    for (std::uint32_t s = 2; s <= (1u << 23); s *= 2) options.sizes.push_back(s);
  }
  if (options.sizes.empty()) options.sizes.push_back(size);
  if (options.duration_s > 0 && options.iters != 0) {
    Fail("-D/--duration ", options.duration_s, " and -n/--iters ", options.iters, " both given: choose one");
  }
}

bool IsAtomic(const std::string& verb) { return verb == "cas" || verb == "faa"; }

}  // namespace rdmalab::bench
