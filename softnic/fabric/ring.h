// A bounded multi-producer multi-consumer ring in shared memory (Vyukov's sequence-number
// queue). Completion queues, receive queues and SRQs are rings: a CQ has producers in
// several processes (local send completions, remote receivers' completions); a receive
// queue or SRQ has one producer (its owner's post_recv) and consumers in every sender.
//
// Contract: any number of producers and consumers, in any processes that map the ring.
// A producer claims a position with a relaxed CAS on enqueue_pos, writes the payload and
// publishes it with a release store of the slot sequence; a consumer acquires the sequence
// before reading. No locks, no allocation, no system calls (except sched_yield while a
// producer waits for a consumer that is preempted in the middle of a pop, see TryPush).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "softnic/fabric/layout.h"

namespace softnic {

enum NotifyArm : uint32_t { kNotArmed = 0, kArmedAny = 1, kArmedSolicited = 2 };

struct alignas(kCacheLineBytes) RingHeader {
  uint32_t capacity = 0;  // power of two
  uint32_t payload_bytes = 0;
  uint32_t slot_bytes = 0;
  uint32_t reserved = 0;
  alignas(kCacheLineBytes) std::atomic<uint64_t> enqueue_pos{0};
  alignas(kCacheLineBytes) std::atomic<uint64_t> dequeue_pos{0};
  // Completion-queue notification and error state (unused by receive queues), on its own
  // line so that producers' one load of `armed` does not contend with the positions.
  alignas(kCacheLineBytes) std::atomic<uint32_t> armed{kNotArmed};
  std::atomic<uint32_t> event_pending{0};  // CQ: completion events not yet taken; SRQ: limit reached
  std::atomic<uint32_t> overrun{0};
  std::atomic<uint32_t> srq_limit{0};  // SRQ: armed low watermark, 0 = not armed
  uint64_t channel_id = 0;             // completion channel FIFO object, 0 = none
  uint64_t async_channel_id = 0;       // the owner context's async-event FIFO object
};

struct RingSlot {
  std::atomic<uint64_t> sequence;
  // payload follows
};

constexpr size_t kRingSlotHeaderBytes = sizeof(RingSlot);

inline size_t RingSlotBytes(size_t payload_bytes) {
  size_t bytes = kRingSlotHeaderBytes + payload_bytes;
  return (bytes + 15) & ~size_t{15};
}

inline size_t RingBytes(uint32_t capacity, size_t payload_bytes) {
  return sizeof(RingHeader) + size_t{capacity} * RingSlotBytes(payload_bytes);
}

inline uint32_t RoundUpPowerOfTwo(uint32_t value) {
  uint32_t power = 1;
  while (power < value) power <<= 1;
  return power;
}

// How long a producer waits for a consumer that claimed a slot's entry but has not finished
// reading it (normally nanoseconds; a scheduler quantum when the consumer is preempted).
inline constexpr uint64_t kClaimedSlotWaitNs = 200'000'000;
inline constexpr uint32_t kClaimedSlotSpinsBeforeYield = 1024;

// One wait step; false once the wait has lasted kClaimedSlotWaitNs. Cold path.
bool WaitForClaimedSlot(uint32_t& waits, uint64_t& deadline_ns);

class Ring {
 public:
  Ring() = default;
  explicit Ring(void* memory) : header_(static_cast<RingHeader*>(memory)) {
    slots_ = reinterpret_cast<uint8_t*>(header_ + 1);
    mask_ = header_->capacity - 1;
    slot_bytes_ = header_->slot_bytes;
  }

  // Formats fresh (zeroed) memory of RingBytes(capacity, payload_bytes).
  static Ring Format(void* memory, uint32_t capacity, uint32_t payload_bytes) {
    auto* header = new (memory) RingHeader;
    header->capacity = capacity;
    header->payload_bytes = payload_bytes;
    header->slot_bytes = static_cast<uint32_t>(RingSlotBytes(payload_bytes));
    Ring ring(memory);
    for (uint32_t i = 0; i < capacity; ++i) {
      ring.Slot(i)->sequence.store(i, std::memory_order_relaxed);
    }
    return ring;
  }

  RingHeader* header() const { return header_; }
  bool valid() const { return header_ != nullptr; }

  // Calls fill(void* payload) in a claimed slot. False when the ring is full: when the
  // slot still holds an entry no consumer has claimed. A slot whose entry a consumer has
  // claimed (dequeue_pos is past it) but not finished reading does not make the ring full
  // (fewer than `capacity` entries are outstanding): the producer waits for that consumer,
  // up to kClaimedSlotWaitNs, and reports full only if it never finishes (it died mid-pop).
  template <typename Fill>
  bool TryPush(Fill&& fill) {
    uint64_t pos = header_->enqueue_pos.load(std::memory_order_relaxed);
    uint32_t waits = 0;
    uint64_t wait_deadline_ns = 0;
    for (;;) {
      RingSlot* slot = Slot(pos & mask_);
      uint64_t sequence = slot->sequence.load(std::memory_order_acquire);
      int64_t diff = static_cast<int64_t>(sequence - pos);
      if (diff == 0) {
        if (header_->enqueue_pos.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          fill(Payload(slot));
          slot->sequence.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        const uint64_t previous_lap = pos - (uint64_t{mask_} + 1);
        if (header_->dequeue_pos.load(std::memory_order_acquire) <= previous_lap) return false;
        if (!WaitForClaimedSlot(waits, wait_deadline_ns)) return false;
        pos = header_->enqueue_pos.load(std::memory_order_relaxed);
      } else {
        pos = header_->enqueue_pos.load(std::memory_order_relaxed);
      }
    }
  }

  // Calls take(const void* payload) on the oldest entry. False when the ring is empty.
  template <typename Take>
  bool TryPop(Take&& take) {
    uint64_t pos = header_->dequeue_pos.load(std::memory_order_relaxed);
    for (;;) {
      RingSlot* slot = Slot(pos & mask_);
      uint64_t sequence = slot->sequence.load(std::memory_order_acquire);
      int64_t diff = static_cast<int64_t>(sequence - (pos + 1));
      if (diff == 0) {
        if (header_->dequeue_pos.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          take(static_cast<const void*>(Payload(slot)));
          slot->sequence.store(pos + mask_ + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;
      } else {
        pos = header_->dequeue_pos.load(std::memory_order_relaxed);
      }
    }
  }

  // Entries published or being published; exact when nobody is mid-operation.
  uint64_t Size() const {
    uint64_t tail = header_->enqueue_pos.load(std::memory_order_acquire);
    uint64_t head = header_->dequeue_pos.load(std::memory_order_acquire);
    return tail >= head ? tail - head : 0;
  }

 private:
  RingSlot* Slot(uint64_t index) const {
    return reinterpret_cast<RingSlot*>(slots_ + index * slot_bytes_);
  }
  static void* Payload(RingSlot* slot) { return reinterpret_cast<uint8_t*>(slot) + kRingSlotHeaderBytes; }

  RingHeader* header_ = nullptr;
  uint8_t* slots_ = nullptr;
  uint64_t mask_ = 0;
  uint32_t slot_bytes_ = 0;
};

}  // namespace softnic
