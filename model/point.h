// One configuration to predict: the mode and parameters of an rdmalab-bench run (contract
// 1's parameter names) or of a key-value system / sequencer, validated up front.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/cost.h"

namespace rdmalab::model {

// Thrown by Predict for a point that asks for what the model does not represent (kernel
// sockets, NUMA, translation caches, ...): reported as "not modeled: <reason>", never guessed.
struct NotModeled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A verb as the benchmarks name it: verb + connection (+ inline/header-only).
struct VerbSpec {
  Opcode op = Opcode::kWrite;
  Transport transport = Transport::kRc;
  bool inline_data = false;
  bool header_only = false;
  bool signaled = true;
};

struct Point {
  std::string experiment;
  std::string mode = "tput";  // a row of Modes() (model/params.h)
  VerbSpec verb;
  int64_t size_B = 32;
  std::string direction = "inbound";  // inbound | outbound | alltoall
  uint32_t post_list = 1;             // doorbell batch size B (1 = WQE-by-MMIO)
  bool batch_given = false;           // sequencer: --batch was set (else the sweep decides)
  uint32_t cq_mod = 1;                // signal one WR in cq_mod
  uint32_t qp = 0;                    // QPs at the measured NIC (0 = enough to engage every PU)
  uint32_t threads = 0;               // cores used at the measured host (0 = all; kv: params.workers)
  uint32_t tx_depth = 0;              // outstanding WRs per QP (0 = unbounded)
  uint32_t clients = 0;               // clients in all: roles.client (or roles.node) x kv's clients per process
  uint32_t peer_threads = 0;          // the client processes' threads (kv: x its client threads per process)
  uint32_t sge = 1;
  bool inline_recv = false;
  uint64_t counters = 1;              // atomics: Z distinct counters
  std::string link = "ib";            // ib | roce (profiles with a roce block)
  bool lat_pingpong = false;          // lat: half a round trip instead of the signaled op until its CQE
  // echo
  VerbSpec request, response;
  // sequencer
  std::string design = "herd-rpc";
  // key-value systems
  std::string system = "herd";
  double put_fraction = 0.05;
  uint32_t key_B = 16, value_B = 32;
  uint32_t window = 4;                // kv: requests in flight per client; sequencer: tx_depth (HERD's 4)
  bool batching = false;
  uint32_t queues = 1;  // UD response QPs per worker (multi-queue)
  int64_t inline_size_B = -1;         // kv (HERD): largest inline response; -1 = HERD's 192 B
  bool same_bits_locks = false;       // DrTM: every lock word in one atomic lock bucket
  uint32_t accesses = 0;  // echo: random memory accesses per request (herd14 Fig. 7)
  bool prefetch = false;
  // key popularity (workload.h): uniform or Zipf over `keys` keys, hashed to the workers
  std::string distribution = "uniform";
  double zipf_theta = 0.99;
  uint64_t keys = 8 << 20;
  // tput READs/WRITEs: the point addresses values by key (distribution, keys or placement
  // given), so the NIC translates scattered addresses instead of one benchmark buffer
  bool keyed = false;
  int32_t core = -1;  // kv: the throughput of this worker alone (herd14 Fig. 14); -1 = all
  // pcie mode: the formula tables of guide16 (Fig. 2b, Table 1, Appendix A)
  std::string formula = "transfer";  // transfer | wqe_header | wqe_batch
  std::string method = "dma";        // transfer: dma | mmio; wqe_batch: mmio | doorbell
  std::string wqe_type = "rc_uc";    // wqe_header: rc_uc | ud | recv
  uint32_t wqes = 10, wqe_B = 65;    // wqe_batch: N WQEs of D bytes
  // values laid out in key order (clustered) or at random pages (unclustered), nosql Sec. 4.4
  std::string placement = "clustered";
  // Conditions the model does not represent; a point that asks for one is "not modeled"
  // (predict.cc says why for each).
  std::string stack = "rdma";          // rdma | udp | tcp | raw (kernel sockets, raw packets)
  std::string numa = "near";           // near | far (memory on the NIC's socket or the other)
  uint32_t page_offset_B = 0;          // buffer offset within a page (0: packed or page-aligned)
  uint32_t buffers = 1;                // distinct memory blocks reused round robin
  uint32_t counter_stride_B = 8;       // atomics: bytes between counters
  bool events = false;                 // lat: completion channel (interrupts) instead of polling
  bool all_sizes = false;              // rdmalab-bench --all: a size sweep in one run
  std::string store = "emulated";      // kv: emulated (herd14's -em designs) | full
  uint64_t corrupt = 0;                // kv: keys corrupted on purpose (checksum tests)
  // Little's law (clients x tx_depth or window outstanding over the unloaded latency) bounds
  // the rate; false = assume enough clients (papers' scale) whatever the roles say.
  bool window_bound = true;
  // simulator
  bool simulate = false;
  uint64_t sim_ops = 1'000'000;
  bool sim_exponential = false;  // exponential instead of deterministic service times
};

// Parses a contract-3 point (`{"experiment", "profile", "mode", "roles", "params"}`) through
// the parameter table (model/params.h); throws ModelError naming the bad field, the mode and
// the valid values. Every path is strict: a parameter the table lacks or the mode does not
// take is an error.
Point PointFromJson(const nlohmann::json& doc);
VerbSpec ParseVerb(const std::string& field, const std::string& verb, const std::string& connection);
std::string VerbName(const VerbSpec& v);
const char* TransportName(Transport t);

}  // namespace rdmalab::model
