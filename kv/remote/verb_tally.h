// Verbs per operation, by opcode, as the client counts them (softnic's device counters
// count packets and work requests, not opcodes; tests/kv compares the two), and the PCIe
// bytes those verbs move at the client's and the server's NIC by the model's per-WR
// accounting (model/wr_accounting.h, header-only: the same rules softnic's modeled
// counters follow). A system declares its verb classes once; its hot path only increments
// a count.
#pragma once

#include <infiniband/verbs.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace rdmalab::kv::remote {

enum class Verb : std::uint8_t { kRead, kWrite, kSend, kCas };
enum class Side : std::uint8_t { kClient, kServer };  // who posts the WR
enum class OpKind : std::uint8_t { kGet, kPut };

struct VerbClass {
  const char* name;  // e.g. "bucket READ"
  OpKind op;
  Side poster;
  Verb verb;
  ibv_qp_type transport;
  std::uint32_t bytes;  // payload
  bool inline_payload;
  std::uint32_t signal_every;  // 1: every WR signaled; 0: none (retired by a later signaled WR)
};

constexpr std::size_t kMaxVerbClasses = 8;

struct VerbTally {
  std::array<std::uint64_t, kMaxVerbClasses> wrs{};
  std::uint64_t gets = 0, puts = 0;  // operations completed (warm-up included, as the WRs are)
  void Add(const VerbTally& other);
  nlohmann::json Json() const;
  static VerbTally FromJson(const nlohmann::json& json);
};

// {"source", "per_get": {"client": {"RC READ": 2.6}, "server": {...}}, "per_put": ..., "per_op": ...,
//  "pcie_modeled_bytes_per_op": {"client_nic": {"h2d", "d2h"}, "server_nic": ...}} and flat
// per-op numbers for plots ("verbs_per_op", "server_pcie_bytes_per_op").
nlohmann::json VerbsJson(const std::vector<VerbClass>& classes, const VerbTally& tally);

}  // namespace rdmalab::kv::remote
