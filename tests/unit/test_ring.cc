// softnic's shared ring (softnic/fabric/ring.h) under concurrent producers and consumers:
// every entry is taken exactly once and whole, full and empty are reported, and the
// producers' free-space cache never lets a push overwrite an entry not yet taken.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "softnic/fabric/ring.h"

namespace softnic {
namespace {

constexpr uint32_t kPayloadWords = 6;  // 48 B: a slot spans a cache-line boundary
struct Entry {
  uint64_t words[kPayloadWords];
};

// Zeroed, cache-line-aligned memory as a fabric object provides it.
class RingMemory {
 public:
  explicit RingMemory(uint32_t capacity) {
    size_t bytes = (RingBytes(capacity, sizeof(Entry)) + kCacheLineBytes - 1) & ~(kCacheLineBytes - 1);
    memory_.reset(static_cast<uint8_t*>(std::aligned_alloc(kCacheLineBytes, bytes)));
    std::memset(memory_.get(), 0, bytes);
    ring_ = Ring::Format(memory_.get(), capacity, sizeof(Entry));
  }
  Ring& ring() { return ring_; }
  Ring Handle() { return Ring(memory_.get()); }  // another process's view

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], Free> memory_;
  Ring ring_;
};

bool Push(Ring& ring, uint64_t value) {
  return ring.TryPush([&](void* payload) {
    auto* entry = static_cast<Entry*>(payload);
    for (uint64_t& word : entry->words) word = value;
  });
}

TEST(Ring, FullAndEmptyAreReportedInOrder) {
  RingMemory memory(4);
  Ring& ring = memory.ring();
  Entry out;
  EXPECT_FALSE(ring.TryPop(&out, sizeof(out)));
  for (uint64_t v = 1; v <= 4; ++v) EXPECT_TRUE(Push(ring, v));
  EXPECT_FALSE(Push(ring, 5)) << "a ring of 4 took a 5th entry";
  uint64_t dequeued = 0;
  ASSERT_TRUE(ring.TryPop(&out, sizeof(out), &dequeued));
  EXPECT_EQ(out.words[0], 1u);
  EXPECT_EQ(dequeued, 1u);
  EXPECT_TRUE(Push(ring, 5));
  for (uint64_t v = 2; v <= 5; ++v) {
    ASSERT_TRUE(ring.TryPop(&out, sizeof(out)));
    EXPECT_EQ(out.words[kPayloadWords - 1], v);
  }
  EXPECT_FALSE(ring.TryPop(&out, sizeof(out)));
}

TEST(Ring, AProducerHandleSeesSpaceFreedThroughAnotherHandle) {
  RingMemory memory(2);
  Ring producer = memory.Handle();
  Ring consumer = memory.Handle();
  Entry out;
  for (uint64_t round = 1; round <= 10; ++round) {
    ASSERT_TRUE(Push(producer, 2 * round));
    ASSERT_TRUE(Push(producer, 2 * round + 1));
    ASSERT_FALSE(Push(producer, 0));
    uint64_t dequeued = 0;
    ASSERT_TRUE(consumer.TryPop(&out, sizeof(out), &dequeued));
    EXPECT_EQ(out.words[0], 2 * round);
    if (round % 2 == 0) producer.NoteDequeued(dequeued);  // learned from a completion
    ASSERT_TRUE(consumer.TryPop(&out, sizeof(out)));
    EXPECT_EQ(out.words[0], 2 * round + 1);
  }
}

TEST(Ring, ConcurrentProducersAndConsumersTakeEveryEntryOnceAndWhole) {
  // More threads than the 2 cores here: preemption mid-push and mid-pop happens too.
  constexpr uint32_t kProducers = 2;
  constexpr uint32_t kConsumers = 2;
  constexpr uint64_t kPerProducer = 100'000;
  constexpr uint32_t kEmptyPollsPerYield = 256;
  constexpr std::chrono::seconds kBudget{30};  // about 0.1 s when the ring works
  RingMemory memory(8);
  std::vector<std::atomic<uint8_t>> seen(kProducers * kPerProducer + 1);
  std::atomic<uint64_t> taken{0};
  std::atomic<uint64_t> torn{0};
  const auto deadline = std::chrono::steady_clock::now() + kBudget;
  auto in_time = [&] { return std::chrono::steady_clock::now() < deadline; };
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      Ring ring = memory.Handle();
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        uint64_t value = p * kPerProducer + i + 1;
        while (!Push(ring, value)) {
          if (!in_time()) return;
          std::this_thread::yield();
        }
      }
    });
  }
  for (uint32_t c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      Ring ring = memory.Handle();
      Entry out;
      uint32_t empty_polls = 0;
      while (taken.load(std::memory_order_relaxed) < kProducers * kPerProducer) {
        if (!ring.TryPop(&out, sizeof(out))) {
          if (++empty_polls % kEmptyPollsPerYield == 0) {
            if (!in_time()) return;
            std::this_thread::yield();
          }
          continue;
        }
        bool whole = out.words[0] != 0 && out.words[0] < seen.size();
        for (uint64_t word : out.words) whole = whole && word == out.words[0];
        if (!whole) {
          torn.fetch_add(1);  // never index `seen` with a value no producer pushed
        } else {
          seen[out.words[0]].fetch_add(1);
        }
        taken.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(in_time()) << "stuck: " << taken.load() << " of " << kProducers * kPerProducer << " entries taken";
  EXPECT_EQ(torn.load(), 0u);
  uint64_t wrong = 0;
  for (uint64_t v = 1; v < seen.size(); ++v) wrong += seen[v].load() != 1;
  EXPECT_EQ(wrong, 0u) << "entries taken zero or several times";
}

}  // namespace
}  // namespace softnic
