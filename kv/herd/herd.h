// HERD (spec: systems.md): the pieces the server (server.cc) and the client transport
// (client.cc) agree on beyond the wire formats: what each side publishes through the
// rendezvous, and the checks of the options.
#pragma once

#include <cstdint>

#include "kv/core/options.h"

namespace rdmalab::kv::herd {

constexpr std::uint32_t kMaxInlineRequestBytes = 256;  // requests up to this size go inline
// RECVs re-posted per doorbell (original: 64 of 128). Few, so that a client's buffers,
// receive ring and CQ ring stay small: each response's lines are then written where the
// last round's were, still cached, not into a new stretch of a large ring.
constexpr std::uint32_t kRecvRefill = 8;
constexpr std::uint32_t kEmptyPollsBeforeNoop = 100;   // HERD: push a no-op after 100 empty polls

// Every client's total count: each client process runs --clients of them.
inline std::uint32_t TotalClients(const Options& o, int client_processes) {
  return static_cast<std::uint32_t>(o.clients * client_processes);
}

}  // namespace rdmalab::kv::herd
