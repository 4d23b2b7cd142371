// A bounded multi-producer multi-consumer ring in shared memory. Completion queues, receive
// queues and SRQs are rings: a CQ has producers in several processes (local send
// completions, remote receivers' completions); a receive queue or SRQ has one producer (its
// owner's post_recv) and consumers in every sender.
//
// Contract: any number of producers and consumers, in any processes that map the ring.
// A producer claims a position with a CAS on enqueue_pos, writes the payload and publishes
// it with a release store of the slot's sequence (position + 1). A consumer copies a
// published payload out first and then claims it with a CAS on dequeue_pos (a release
// store when the caller is the only consumer, Consumers::kOne); a failed claim
// discards the copy. So only producers write slots, and a slot is free again as soon as
// dequeue_pos has passed it. Producers learn that from a cached dequeue_pos, re-read only
// when the cache says full: in steady state a producer reads no cache line a consumer
// wrote, and a consumer reads only the lines it polls (the cross-core transfers of a
// message are the payload's, as with a NIC's DMA). No locks, no allocation, no system calls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "softnic/fabric/layout.h"

namespace softnic {

enum NotifyArm : uint32_t { kNotArmed = 0, kArmedAny = 1, kArmedSolicited = 2 };

// Who may pop concurrently: kMany claims with a CAS; kOne (a CQ of a process that promised
// SOFTNIC_SINGLE_THREADED) with a release store, a locked instruction fewer per poll.
enum class Consumers : uint8_t { kMany, kOne };

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

  // Calls fill(void* payload) in a claimed slot. False when the ring is full. Inline, so
  // that what fill() stores comes straight from the caller's registers.
  template <typename Fill>
  [[gnu::always_inline]] bool TryPush(Fill&& fill) {
    uint64_t pos = header_->enqueue_pos.load(std::memory_order_relaxed);
    for (;;) {
      // Acquire (here and on dequeue_pos) pairs with the consumers' release claims: their
      // copies of a slot's previous entry are done before fill() overwrites it.
      if (pos - __atomic_load_n(&dequeue_seen_, __ATOMIC_ACQUIRE) > mask_) {
        // Looks full: refresh the cache. dequeue_pos only grows, so any value read is a
        // safe lower bound for every thread sharing this handle.
        uint64_t dequeued = header_->dequeue_pos.load(std::memory_order_acquire);
        __atomic_store_n(&dequeue_seen_, dequeued, __ATOMIC_RELEASE);
        if (pos - dequeued > mask_) {
          uint64_t now = header_->enqueue_pos.load(std::memory_order_relaxed);
          if (now == pos) return false;
          pos = now;
          continue;
        }
      }
      if (header_->enqueue_pos.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        RingSlot* slot = Slot(pos & mask_);
        fill(Payload(slot));
        slot->sequence.store(pos + 1, std::memory_order_release);
        return true;
      }
    }
  }

  // TryPush for a list: claims up to `count` consecutive positions with one CAS and calls
  // fill(i, payload) for the i-th, publishing each as soon as it is filled (so a consumer
  // takes the first while the rest are written). Returns how many it pushed; fewer than
  // `count` only when the ring is full.
  template <typename Fill>
  uint32_t TryPushMany(uint32_t count, Fill&& fill) {
    uint64_t pos = header_->enqueue_pos.load(std::memory_order_relaxed);
    for (;;) {
      uint64_t free = FreeAfter(pos, __atomic_load_n(&dequeue_seen_, __ATOMIC_ACQUIRE));
      if (free < count) {
        uint64_t dequeued = header_->dequeue_pos.load(std::memory_order_acquire);
        __atomic_store_n(&dequeue_seen_, dequeued, __ATOMIC_RELEASE);
        free = FreeAfter(pos, dequeued);
        if (free == 0) {
          uint64_t now = header_->enqueue_pos.load(std::memory_order_relaxed);
          if (now == pos) return 0;
          pos = now;
          continue;
        }
      }
      uint32_t claimed = free < count ? uint32_t(free) : count;
      if (header_->enqueue_pos.compare_exchange_weak(pos, pos + claimed, std::memory_order_relaxed)) {
        for (uint32_t i = 0; i < claimed; ++i) {
          RingSlot* slot = Slot((pos + i) & mask_);
          fill(i, Payload(slot));
          slot->sequence.store(pos + i + 1, std::memory_order_release);
        }
        return claimed;
      }
    }
  }

  // TryPop for up to `max` entries with one claim: copy(i, payload) copies out the i-th
  // oldest; what it copied is the caller's only if the call returns more than i (a failed
  // claim drops the copies and starts over). Returns the count taken, 0 when empty;
  // `dequeued` as for TryPop.
  template <typename Copy>
  uint32_t TryPopMany(uint32_t max, uint64_t* dequeued, Copy&& copy, Consumers consumers = Consumers::kMany) {
    uint64_t pos = header_->dequeue_pos.load(std::memory_order_relaxed);
    for (;;) {
      uint32_t ready = 0;
      while (ready < max) {
        RingSlot* slot = Slot((pos + ready) & mask_);
        if (slot->sequence.load(std::memory_order_acquire) != pos + ready + 1) break;
        copy(ready, static_cast<const void*>(Payload(slot)));
        ++ready;
      }
      if (ready == 0) {
        int64_t diff = static_cast<int64_t>(Slot(pos & mask_)->sequence.load(std::memory_order_acquire) - (pos + 1));
        if (diff < 0) return 0;
        pos = header_->dequeue_pos.load(std::memory_order_relaxed);  // another consumer took it
        continue;
      }
      // Success means nobody claimed pos..pos+ready-1 since they were published, so no
      // producer can have refilled them under the copies.
      if (consumers == Consumers::kOne) {
        header_->dequeue_pos.store(pos + ready, std::memory_order_release);
      } else if (!header_->dequeue_pos.compare_exchange_weak(pos, pos + ready, std::memory_order_release,
                                                             std::memory_order_relaxed)) {
        continue;
      }
      if (dequeued != nullptr) *dequeued = pos + ready;
      return ready;
    }
  }

  // Copies the oldest entry's first `bytes` (at most payload_bytes) to `out`. False when
  // the ring is empty. `dequeued`, if given, receives the dequeue count after this pop:
  // whoever later learns it (a receive completion carries it to the ring's owner) can pass
  // it to NoteDequeued and spare the producer a read of the consumers' line.
  bool TryPop(void* out, size_t bytes, uint64_t* dequeued = nullptr, Consumers consumers = Consumers::kMany) {
    auto copy = [&](const void* payload) {
      std::memcpy(out, payload, bytes);
      return true;
    };
    return TryPopIf(dequeued, copy, consumers) == PopResult::kTaken;
  }

  enum class PopResult : uint8_t { kEmpty, kDeclined, kTaken };

  // TryPop for a consumer that reads what it needs of the oldest entry itself and decides
  // whether to take it: take(payload) copies fields out and returns true to claim the
  // entry; false leaves it for the next consumer. take may read an entry that a racing
  // consumer and producer tore: the claim then fails and what it read is dropped, so take
  // must only read the payload and keep what it read until the claim succeeds.
  template <typename Take>
  [[gnu::always_inline]] PopResult TryPopIf(uint64_t* dequeued, Take&& take, Consumers consumers = Consumers::kMany) {
    uint64_t pos = header_->dequeue_pos.load(std::memory_order_relaxed);
    for (;;) {
      RingSlot* slot = Slot(pos & mask_);
      uint64_t sequence = slot->sequence.load(std::memory_order_acquire);
      int64_t diff = static_cast<int64_t>(sequence - (pos + 1));
      if (diff < 0) return PopResult::kEmpty;
      if (diff == 0) {
        // The copy may race with a producer refilling the slot only if another consumer
        // claimed `pos` first, and then the claim below fails and the copy is dropped.
        if (!take(static_cast<const void*>(Payload(slot)))) {
          if (header_->dequeue_pos.load(std::memory_order_relaxed) == pos) return PopResult::kDeclined;
          pos = header_->dequeue_pos.load(std::memory_order_relaxed);
          continue;
        }
        if (consumers == Consumers::kOne) {
          header_->dequeue_pos.store(pos + 1, std::memory_order_release);
        } else if (!header_->dequeue_pos.compare_exchange_weak(pos, pos + 1, std::memory_order_release,
                                                               std::memory_order_relaxed)) {
          continue;
        }
        if (dequeued != nullptr) *dequeued = pos + 1;
        return PopResult::kTaken;
      } else {
        pos = header_->dequeue_pos.load(std::memory_order_relaxed);
      }
    }
  }

  // Starts loading the slot the next pop reads: a sender taking one RECV per message hides
  // the cross-core transfer of the next WQE behind its current one.
  [[gnu::always_inline]] void PrefetchHead() const {
    __builtin_prefetch(Slot(header_->dequeue_pos.load(std::memory_order_relaxed) & mask_));
  }

  // Whether a pop would find nothing now, as TryPopMany decides it (the oldest entry not yet
  // published): a consumer busy-polling an empty ring learns it from one slot's sequence.
  [[gnu::always_inline]] bool SeemsEmpty() const {
    uint64_t pos = header_->dequeue_pos.load(std::memory_order_relaxed);
    return static_cast<int64_t>(Slot(pos & mask_)->sequence.load(std::memory_order_acquire) - (pos + 1)) < 0;
  }

  // Raises the producers' free-space cache to `dequeued`, a dequeue count known to have
  // been reached (with happens-before to that pop, e.g. through its completion). A racing
  // update may leave the cache lower: it is a lower bound either way.
  void NoteDequeued(uint64_t dequeued) {
    if (dequeued > __atomic_load_n(&dequeue_seen_, __ATOMIC_RELAXED)) {
      __atomic_store_n(&dequeue_seen_, dequeued, __ATOMIC_RELEASE);
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

  // Free slots after enqueue position `pos` if the consumers have taken `dequeued`. Either may
  // be stale: a pos behind dequeued fails its claim anyway, a dequeued more than a ring
  // behind pos (a stale cache) proves no space.
  uint64_t FreeAfter(uint64_t pos, uint64_t dequeued) const {
    if (dequeued > pos || pos - dequeued > mask_) return 0;
    return mask_ + 1 - (pos - dequeued);
  }

  RingHeader* header_ = nullptr;
  uint8_t* slots_ = nullptr;
  uint64_t mask_ = 0;
  uint32_t slot_bytes_ = 0;
  // This process's last read of header_->dequeue_pos (producers' free-space cache).
  uint64_t dequeue_seen_ = 0;
};

}  // namespace softnic
