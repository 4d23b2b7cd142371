// Per-message accounting: the one place where what a transfer costs is counted. Today it
// counts packets (MTU segmentation) and payload bytes on both ends. The PCIe/NIC model
// (model/, a later issue) plugs its per-WR cost function in here, so that softnic's
// "modeled PCIe counters" come from the same source of truth as the model's predictions.
#pragma once

#include <cstdint>

#include "softnic/fabric/layout.h"

namespace softnic {

struct TransferShape {
  uint64_t payload_bytes;
  uint32_t path_mtu_bytes;
};

// A process only ever writes its own counter blocks, and a thread its own lane (relaxed
// load + store, no read-modify-write); the shared overflow lane takes atomic adds.
inline void Count(CounterBlock& block, Counter counter, uint64_t amount = 1) {
  if (__builtin_expect(block.shared != 0, 0)) {
    __atomic_fetch_add(&block.value[counter], amount, __ATOMIC_RELAXED);
    return;
  }
  __atomic_store_n(&block.value[counter],
                   __atomic_load_n(&block.value[counter], __ATOMIC_RELAXED) + amount,
                   __ATOMIC_RELAXED);
}

inline void AccountTransfer(const TransferShape& shape, CounterBlock& requester, CounterBlock& responder) {
  uint64_t bytes = shape.payload_bytes;
  uint64_t packets = bytes <= shape.path_mtu_bytes ? 1 : (bytes + shape.path_mtu_bytes - 1) / shape.path_mtu_bytes;
  Count(requester, kTxPackets, packets);
  Count(requester, kTxBytes, bytes);
  Count(responder, kRxPackets, packets);
  Count(responder, kRxBytes, bytes);
}

}  // namespace softnic
