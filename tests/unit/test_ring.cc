// softnic's shared ring (softnic/fabric/ring.h) under concurrent producers and consumers:
// every entry is taken exactly once and whole, full and empty are reported, and the
// producers' free-space cache never lets a push overwrite an entry not yet taken.
#include <gtest/gtest.h>

#include <algorithm>
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

// Pushes values first..first+count-1 as one list; returns how many went in.
uint32_t PushMany(Ring& ring, uint64_t first, uint32_t count) {
  return ring.TryPushMany(count, [&](uint32_t i, void* payload) {
    auto* entry = static_cast<Entry*>(payload);
    for (uint64_t& word : entry->words) word = first + i;
  });
}

uint32_t PopMany(Ring& ring, Entry* out, uint32_t max, uint64_t* dequeued = nullptr,
                 Consumers consumers = Consumers::kMany) {
  return ring.TryPopMany(
      max, dequeued, [&](uint32_t i, const void* payload) { std::memcpy(&out[i], payload, sizeof(Entry)); },
      consumers);
}

TEST(Ring, ListsPushAsMuchAsFitsAndPopInOrder) {
  RingMemory memory(4);
  Ring& ring = memory.ring();
  Entry out[8];
  EXPECT_EQ(PopMany(ring, out, 8), 0u);
  EXPECT_EQ(PushMany(ring, 1, 6), 4u) << "a ring of 4 took more than 4 of a list of 6";
  EXPECT_EQ(PushMany(ring, 7, 1), 0u);
  uint64_t dequeued = 0;
  ASSERT_EQ(PopMany(ring, out, 3, &dequeued), 3u);
  EXPECT_EQ(dequeued, 3u);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(out[i].words[kPayloadWords - 1], i + 1);
  EXPECT_EQ(PushMany(ring, 5, 5), 3u) << "space freed by a pop of 3 is 3 slots";
  ASSERT_EQ(PopMany(ring, out, 8, &dequeued), 4u);
  EXPECT_EQ(dequeued, 7u);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(out[i].words[0], i + 4);
  Entry one;
  EXPECT_FALSE(ring.TryPop(&one, sizeof(one)));
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

// Producers push one entry or lists of `push_list`; consumers (two, or one for
// Consumers::kOne) pop one or up to `pop_list`.
void TakeEveryEntryOnceAndWhole(uint32_t push_list, uint32_t pop_list, Consumers consumers = Consumers::kMany) {
  // More threads than the 2 cores here: preemption mid-push and mid-pop happens too.
  constexpr uint32_t kProducers = 2;
  const uint32_t consumer_count = consumers == Consumers::kOne ? 1 : 2;
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
        uint32_t want = push_list == 1 ? 1 : uint32_t(std::min<uint64_t>(push_list, kPerProducer - i));
        uint32_t pushed;
        while ((pushed = want == 1 ? uint32_t(Push(ring, value)) : PushMany(ring, value, want)) == 0) {
          if (!in_time()) return;
          std::this_thread::yield();
        }
        i += pushed - 1;
      }
    });
  }
  for (uint32_t c = 0; c < consumer_count; ++c) {
    threads.emplace_back([&] {
      Ring ring = memory.Handle();
      std::vector<Entry> out(pop_list);
      uint32_t empty_polls = 0;
      while (taken.load(std::memory_order_relaxed) < kProducers * kPerProducer) {
        uint32_t got = pop_list == 1 ? uint32_t(ring.TryPop(&out[0], sizeof(Entry), nullptr, consumers))
                                     : PopMany(ring, out.data(), pop_list, nullptr, consumers);
        if (got == 0) {
          if (++empty_polls % kEmptyPollsPerYield == 0) {
            if (!in_time()) return;
            std::this_thread::yield();
          }
          continue;
        }
        for (uint32_t e = 0; e < got; ++e) {
          const Entry& entry = out[e];
          bool whole = entry.words[0] != 0 && entry.words[0] < seen.size();
          for (uint64_t word : entry.words) whole = whole && word == entry.words[0];
          if (!whole) {
            torn.fetch_add(1);  // never index `seen` with a value no producer pushed
          } else {
            seen[entry.words[0]].fetch_add(1);
          }
        }
        taken.fetch_add(got);
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

TEST(Ring, ConcurrentProducersAndConsumersTakeEveryEntryOnceAndWhole) { TakeEveryEntryOnceAndWhole(1, 1); }

TEST(Ring, ConcurrentListPushesAndPopsTakeEveryEntryOnceAndWhole) { TakeEveryEntryOnceAndWhole(3, 5); }

// A CQ of a SOFTNIC_SINGLE_THREADED process: producers in several processes, one consumer
// claiming with a store.
TEST(Ring, ConcurrentProducersAndTheOneConsumerTakeEveryEntryOnceAndWhole) {
  TakeEveryEntryOnceAndWhole(1, 1, Consumers::kOne);
  TakeEveryEntryOnceAndWhole(3, 5, Consumers::kOne);
}

}  // namespace
}  // namespace softnic
