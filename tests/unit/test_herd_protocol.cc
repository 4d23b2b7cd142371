// HERD's request parser against every byte pattern a client (or a torn read) can leave in a
// slot: the slot sits between two inaccessible pages, so a read outside it crashes the test;
// every outcome is checked against the encoder's rules.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kv/herd/protocol.h"

namespace rdmalab::kv::herd {
namespace {

constexpr std::uint64_t kFuzzedRequests = 1'000'000;

class GuardedSlot {
 public:
  GuardedSlot() {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    base_ = static_cast<std::uint8_t*>(
        mmap(nullptr, 3 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
    EXPECT_EQ(mprotect(base_, page_, PROT_NONE), 0);
    EXPECT_EQ(mprotect(base_ + 2 * page_, page_, PROT_NONE), 0);
  }
  ~GuardedSlot() { munmap(base_, 3 * page_); }
  // The slot ends exactly where the second guard page starts.
  std::uint8_t* slot() const { return base_ + 2 * page_ - kSlotBytes; }

 private:
  std::size_t page_ = 0;
  std::uint8_t* base_ = nullptr;
};

TEST(HerdProtocol, EncodedRequestsParseBack) {
  GuardedSlot guarded;
  std::uint8_t copy[kMaxValueBytes];
  std::uint8_t value[kMaxValueBytes];
  for (std::uint32_t bytes : {0u, 1u, 7u, 8u, 32u, 999u, 1000u}) {
    for (std::uint32_t i = 0; i < bytes; ++i) value[i] = static_cast<std::uint8_t>(i * 31 + 5);
    const KeyHash key = KeyHashOf(bytes + 17);
    std::memset(guarded.slot(), 0, kSlotBytes);
    EncodeRequest(guarded.slot() + kSlotBytes, key, 0xABCD01u, value, static_cast<std::uint16_t>(bytes));
    ParsedRequest parsed;
    const std::uint32_t workers = 4;
    const RequestKind kind = ParseRequest(guarded.slot(), Partition(key, workers), workers, &parsed, copy);
    ASSERT_EQ(kind, bytes == 0 ? RequestKind::kGet : RequestKind::kPut) << bytes;
    EXPECT_EQ(parsed.id, 0xABCD01u);
    EXPECT_EQ(parsed.value_bytes, bytes);
    EXPECT_TRUE(parsed.key == key);
    EXPECT_EQ(std::memcmp(parsed.value, value, bytes), 0);
    EXPECT_EQ(ParseRequest(guarded.slot(), (Partition(key, workers) + 1) % workers, workers, &parsed, copy),
              RequestKind::kMalformed)
        << "a key of another worker's partition";
    ClearRequest(guarded.slot());
    EXPECT_EQ(ParseRequest(guarded.slot(), Partition(key, workers), workers, &parsed, copy), RequestKind::kEmpty);
  }
}

TEST(HerdProtocol, MillionFuzzedSlotsNeverReadOutsideOrAcceptGarbage) {
  GuardedSlot guarded;
  std::mt19937_64 rng(20261123);
  std::uint8_t copy[kMaxValueBytes];
  std::uint8_t value[kMaxValueBytes];
  std::uint64_t counts[5] = {};  // by RequestKind
  std::uint64_t changed_but_accepted = 0;
  for (std::uint64_t n = 0; n < kFuzzedRequests; ++n) {
    std::uint8_t* slot = guarded.slot();
    const std::uint64_t shape = rng() % 4;
    if (shape == 0) {
      // Random bytes in the trailer (LEN anywhere in 0..1023, random keys and checks).
      for (std::uint32_t i = kSlotBytes - kTrailerBytes; i < kSlotBytes; i += 8) {
        const std::uint64_t word = rng();
        std::memcpy(slot + i, &word, std::min<std::uint32_t>(8, kSlotBytes - i));
      }
    } else {
      // A real request, then some of its bytes changed: a torn read or a hostile client.
      const std::uint32_t bytes = static_cast<std::uint32_t>(rng() % (kMaxValueBytes + 1));
      for (std::uint32_t i = 0; i < bytes; ++i) value[i] = static_cast<std::uint8_t>(rng());
      EncodeRequest(slot + kSlotBytes, KeyHashOf(rng() % 1000), static_cast<std::uint32_t>(rng()), value,
                    static_cast<std::uint16_t>(bytes));
      const std::uint64_t flips = shape == 1 ? 0 : 1 + rng() % 3;
      for (std::uint64_t f = 0; f < flips; ++f) {
        const std::uint32_t at = kSlotBytes - 1 - static_cast<std::uint32_t>(rng() % (bytes + kTrailerBytes));
        slot[at] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      }
    }
    ParsedRequest parsed;
    const std::uint32_t workers = 1 + static_cast<std::uint32_t>(rng() % 4);
    const RequestKind kind = ParseRequest(slot, static_cast<std::uint32_t>(rng() % workers), workers, &parsed, copy);
    ++counts[static_cast<int>(kind)];
    if (kind == RequestKind::kGet || kind == RequestKind::kPut) {
      ASSERT_LE(parsed.value_bytes, kMaxValueBytes);
      ASSERT_EQ(RequestCheck(parsed.key, parsed.id, parsed.value_bytes, parsed.value),
                RequestCheck(parsed.key, parsed.id, parsed.value_bytes, slot + kSlotBytes - kTrailerBytes - parsed.value_bytes));
      if (shape != 1) ++changed_but_accepted;  // only by a 22-bit check collision
    }
  }
  EXPECT_GT(counts[static_cast<int>(RequestKind::kGet)] + counts[static_cast<int>(RequestKind::kPut)], 100'000u);
  EXPECT_GT(counts[static_cast<int>(RequestKind::kMalformed)], 100'000u);
  EXPECT_GT(counts[static_cast<int>(RequestKind::kTorn)], 100'000u);
  EXPECT_LT(changed_but_accepted, 5u) << "changed requests that passed the check";
}

TEST(HerdProtocol, PolledLinesOfConsecutiveSlotsSpreadOverL1Sets) {
  // A worker polls each slot's last byte; 64 consecutive slots' polled lines must fall into
  // 64 different sets of a 64-set L1 (at a 1 KB stride they fell into 4).
  constexpr std::uint64_t kLine = 64, kSets = 64;
  RegionLayout layout;
  layout.clients = 16;
  layout.window = 4;
  std::vector<bool> seen(kSets, false);
  for (std::uint32_t client = 0; client < layout.clients; ++client) {
    for (std::uint32_t w = 0; w < layout.window; ++w) {
      const std::uint64_t polled = layout.Slot(0, client, w) * kSlotStrideBytes + kSlotBytes - 1;
      seen[polled / kLine % kSets] = true;
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(kSets));
  EXPECT_GE(kSlotStrideBytes, kSlotBytes);
  EXPECT_EQ(layout.Bytes(), std::uint64_t{layout.clients} * layout.window * kSlotStrideBytes);
}

}  // namespace
}  // namespace rdmalab::kv::herd
