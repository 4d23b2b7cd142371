// The shape of a tput/atomics run, derived once from the options and the device: which
// side is active (posts) and passive (exposes memory, receives), how the exposed region
// is cut into slots, inlining and signaling. Both sides derive the same layout from the
// symmetric options, so a slot's address never needs to be exchanged.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "benchmarks/bench/session.h"

namespace rdmalab::bench {

enum class VerbKind { kRead, kWrite, kSend, kCas, kFaa };
inline bool IsAtomicKind(VerbKind kind) { return kind == VerbKind::kCas || kind == VerbKind::kFaa; }

constexpr int kMaxPostList = 64;
constexpr int kMaxSges = 32;
// 4 Mi values: 2-B values span 8 MiB (an LLC holds them), 64-B values 256 MiB (8x a 32 MiB LLC).
constexpr std::uint64_t kDefaultKeys = std::uint64_t{1} << 22;
constexpr std::uint64_t kLaneBytes = std::uint64_t{1} << 20;  // exposed memory per (source, lane)

struct TputPlan {
  VerbKind kind = VerbKind::kWrite;
  ibv_qp_type qp_type = IBV_QPT_RC;
  bool active = false;
  bool passive = false;
  std::uint32_t lanes = 1;           // threads x qp of the active side
  std::uint32_t sources = 1;         // active processes that target this one
  std::uint32_t slot_bytes = 64;
  std::uint32_t slots_per_lane = 1;
  // The active side's source buffers: slot k of a lane at k * local_stride + local_offset.
  std::uint32_t local_stride = 64;
  std::uint32_t local_offset = 0;
  std::uint64_t exposed_bytes = 4096;
  std::uint32_t exposed_slots = 0;
  std::uint32_t inline_threshold = 0;  // payloads up to this many bytes go inline
  std::uint32_t max_inline_bytes = 0;  // the QPs' inline capacity
  std::uint8_t max_rd_atomic = 1;
  bool send_with_imm = false;
  // --distribution: READs go to key-chosen values of an array of `keys` values, packed at
  // the payload size (the passive side exposes keys x the largest payload).
  bool keyed = false;
  std::uint64_t keys = 0;

  std::uint32_t Tag(std::uint32_t source, std::uint32_t lane, std::uint32_t slot) const {
    return (source * lanes + lane) * slots_per_lane + slot;
  }
  std::uint64_t RemoteOffset(std::uint32_t source, std::uint32_t lane, std::uint32_t slot) const {
    return std::uint64_t{Tag(source, lane, slot)} * slot_bytes;
  }
};

VerbKind ParseVerbKind(const std::string& verb);
ibv_qp_type ParseQpType(const std::string& connection);
// Checks the combination of verb, transport, sizes, window and signaling (tput and atomics).
void CheckThroughputOptions(Options& options);
TputPlan MakeTputPlan(const Session& session);

// "role/index" of this process, as peers key it.
std::string SelfName(const Session& session);
// This process's source index in a passive peer's region: clients and nodes by index,
// the server as the only source of an outbound run.
std::uint32_t SourceIndex(const Session& session);

}  // namespace rdmalab::bench
