// Pieces every mode shares: registered regions and how peers address them, the byte
// pattern that --validate checks, pinned worker threads, and completion-error reporting.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "benchmarks/bench/session.h"
#include "rdma/buffer.h"
#include "rdma/verbs.h"

namespace rdmalab::bench {

constexpr int kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                           IBV_ACCESS_REMOTE_ATOMIC;
constexpr std::uint32_t kCacheLineBytes = 64;
constexpr std::uint32_t kUdGrhBytes = 40;
constexpr int kPollBatch = 16;

struct Region {
  Buffer buffer;
  MrPtr mr;
  std::uint8_t* data() const { return buffer.data(); }
  nlohmann::json Describe() const;
};
Region MakeRegion(const Session& session, std::size_t bytes);

struct RemoteRegion {
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint64_t bytes = 0;
  static RemoteRegion FromJson(const nlohmann::json& json);
};

// --validate's pattern: message `tag` carries byte (tag * 131 + i * 7 + 1) mod 256 at offset i.
inline std::uint8_t PatternByte(std::uint32_t tag, std::uint32_t offset) {
  return static_cast<std::uint8_t>(tag * 131u + offset * 7u + 1u);
}
void FillPattern(std::uint8_t* data, std::uint32_t bytes, std::uint32_t tag);
// Number of bytes that differ from the pattern.
std::uint64_t PatternMismatches(const std::uint8_t* data, std::uint32_t bytes, std::uint32_t tag);

// Bytes a message slot takes: the payload rounded up to a cache line (at least one).
inline std::uint32_t SlotBytes(std::uint32_t payload) {
  return payload == 0 ? kCacheLineBytes : (payload + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes;
}

// Runs body(t) for t in [0, threads), each thread placed per Session::CpusForThread; the
// first exception of any thread is rethrown here after all have joined.
void RunPinnedThreads(const Session& session, int threads, const std::function<void(int)>& body);

// A failed work completion, said the way a user can act on it. Cold path.
[[noreturn]] void CompletionFailed(const ibv_wc& completion, const char* while_doing);

// Raised by any thread to make every loop of the process stop early (an error elsewhere).
extern std::atomic<bool> g_abort;

// Whole-number division rounding up.
constexpr std::uint64_t DivideRoundUp(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

}  // namespace rdmalab::bench
