// Per-message accounting: the one place where what a transfer costs is counted. softnic
// counts what it moved (packets by MTU, payload bytes) and, through the model's per-WR
// cost function (model/wr_accounting.h, the same source of truth as the model's
// predictions), what a real NIC would have done on PCIe and on the wire.
//
// The counters one message adds are a pure function of its shape (opcode, transport,
// size, flags, MTU, link layer, side), so the hot path only adds 1 to the shape's slot in
// the lane (CounterBlock::shapes) and readers multiply: one store per side per message,
// instead of one per counter.
#pragma once

#include <cstdint>

#include "model/wr_accounting.h"
#include "softnic/fabric/layout.h"

namespace softnic {

namespace model = rdmalab::model;

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

// The NIC every softnic device models: model/wr_accounting.h's default device (Connect-IB on
// PCIe 3.0 x16) on the fabric's link layer (IB, or RoCEv2 on Ethernet) and the path MTU.
inline model::DeviceModel ModeledDevice(LinkLayer link_layer, uint32_t path_mtu_bytes) {
  model::DeviceModel device;
  device.wire.kind = link_layer == LinkLayer::kEthernet ? model::LinkKind::kRoceV2 : model::LinkKind::kIb;
  device.wire.mtu_B = path_mtu_bytes;
  return device;
}

// The modeled counters are model::kModeledCounterFields, in that order and by those names.
constexpr bool ModeledCountersFollowTheModel() {
  uint32_t c = kFirstModeledCounter;
  for (const auto& [name, field] : model::kModeledCounterFields) {
    if (c > kLastModeledCounter || !SameName(kCounterNames[c++], name)) return false;
  }
  return c == kLastModeledCounter + 1;
}
static_assert(ModeledCountersFollowTheModel());

// Writes `modeled` into the counter run `values` starts at kFirstModeledCounter of.
inline void ModeledValues(const model::ModeledCounters& modeled, uint64_t* values) {
  for (const auto& [name, field] : model::kModeledCounterFields) *values++ = modeled.*field;
}

// One delivered message, as the model sees it.
struct TransferShape {
  model::WrShape wr;
  uint32_t path_mtu_bytes;
};

// Which counters of a shape a slot holds: the requester's or the responder's side of a
// delivered message, or a post of a single WR (a doorbell, a WR, its WQE by MMIO; the
// payload field is the WQE size).
enum class ShapeRole : uint8_t { kRequester, kResponder, kSingleWqePost };

// Everything a shape's counters depend on, packed: payload or WQE bytes (32 bits) | log2
// MTU (5) | opcode (3) | transport (2) | flags (5) | SGEs (6) | link layer (2) | role (2),
// and bit 63 set so that no key is 0 (a free slot).
namespace shape_key {
constexpr int kMtuShift = 32, kOpShift = 37, kTransportShift = 40, kFlagsShift = 42, kSgeShift = 47,
              kLinkShift = 53, kRoleShift = 55;
constexpr uint64_t kInline = uint64_t{1} << kFlagsShift;
constexpr uint64_t kSignaled = uint64_t{2} << kFlagsShift;
constexpr uint64_t kValid = uint64_t{1} << 63;
constexpr uint64_t kRoleMask = uint64_t{3} << kRoleShift;
}  // namespace shape_key

// The key of a message without its payload size, inline and signaled flags (which a
// post adds): what a QP can compute once for its RDMA WRITEs.
inline uint64_t MessageKeyBase(model::Opcode op, model::Transport transport, uint32_t sge, uint32_t path_mtu_bytes,
                               LinkLayer link_layer) {
  using namespace shape_key;
  return uint64_t(__builtin_ctz(path_mtu_bytes)) << kMtuShift | uint64_t{static_cast<uint8_t>(op)} << kOpShift |
         uint64_t{static_cast<uint8_t>(transport)} << kTransportShift | uint64_t{sge & 0x3f} << kSgeShift |
         uint64_t{static_cast<uint8_t>(link_layer) & 3u} << kLinkShift | kValid;
}

// The requester-side key of one message (role kRequester is 0).
inline uint64_t MessageKey(const TransferShape& s, LinkLayer link_layer) {
  const model::WrShape& w = s.wr;
  uint64_t flags = uint64_t{w.inline_data} | uint64_t{w.signaled} << 1 | uint64_t{w.header_only} << 2 |
                   uint64_t{w.with_imm} << 3 | uint64_t{w.inline_recv} << 4;
  return MessageKeyBase(w.op, w.transport, w.sge, s.path_mtu_bytes, link_layer) | w.payload_B |
         flags << shape_key::kFlagsShift;
}

// The responder's counters do not depend on whether the requester asked for a CQE.
inline uint64_t ResponderKey(uint64_t requester_key) {
  return (requester_key & ~shape_key::kSignaled) |
         uint64_t{static_cast<uint8_t>(ShapeRole::kResponder)} << shape_key::kRoleShift;
}

inline uint64_t SingleWqePostKey(uint32_t wqe_bytes) {
  return wqe_bytes | uint64_t{static_cast<uint8_t>(ShapeRole::kSingleWqePost)} << shape_key::kRoleShift |
         shape_key::kValid;
}

// The counters one message (or post) of `key` adds, in Counter order from
// kFirstMessageCounter through kLastShapeCounter.
struct MessageCounts {
  uint64_t value[kLastShapeCounter - kFirstMessageCounter + 1];
};
MessageCounts CountsOfShape(uint64_t key);

// Adds `amounts` to the counters from `first` on, with one check of the lane's kind.
template <size_t N>
inline void CountRun(CounterBlock& block, Counter first, const uint64_t (&amounts)[N], uint64_t times = 1) {
  uint64_t* value = &block.value[first];
  if (__builtin_expect(block.shared != 0, 0)) {
    for (size_t i = 0; i < N; ++i) __atomic_fetch_add(&value[i], amounts[i] * times, __ATOMIC_RELAXED);
    return;
  }
  for (size_t i = 0; i < N; ++i) {
    __atomic_store_n(&value[i], __atomic_load_n(&value[i], __ATOMIC_RELAXED) + amounts[i] * times,
                     __ATOMIC_RELAXED);
  }
}

[[gnu::always_inline]] inline void Bump(ShapeCount* slot) {
  __atomic_store_n(&slot->count, __atomic_load_n(&slot->count, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

// Where a QP last counted a key: a few compares find the slot again.
struct ShapeCursor {
  uint64_t key = 0;
  const CounterBlock* block = nullptr;
  ShapeCount* slot = nullptr;
};

// The slot of `key` in `block`: found, claimed, or made by folding another slot into
// value[] (cold path; accounting.cc). The block must not be the shared lane.
ShapeCount* FindShapeSlot(CounterBlock& block, uint64_t key);

inline void CountShape(CounterBlock& block, uint64_t key, ShapeCursor& cursor) {
  if (__builtin_expect(block.shared != 0, 0)) {  // many writers: no slots, every counter
    CountRun(block, kFirstMessageCounter, CountsOfShape(key).value);
    return;
  }
  ShapeCount* slot = cursor.slot;
  // The lane differs when another thread posts on the QP; the slot may have been given to
  // another key by another QP of this lane.
  if (__builtin_expect(cursor.key != key || cursor.block != &block || slot->key != key, 0)) {
    slot = FindShapeSlot(block, key);
    cursor = ShapeCursor{key, &block, slot};
  }
  Bump(slot);
}

// The calling thread's lane epoch: unique to the thread, and changed by every fold in the
// blocks of its lane (FindShapeSlot; only a lane's own thread writes its blocks), so that
// one compare tells that slots cached by this thread still hold their keys. 0 until the
// thread caches slots. initial-exec TLS, as Runtime::CounterLane.
inline uint64_t& LaneEpoch() {
  static thread_local uint64_t epoch __attribute__((tls_model("initial-exec"))) = 0;
  return epoch;
}
// Gives the calling thread a fresh lane epoch, none that another thread of this process has
// had (a forked child calls it too: its copies of the parent's caches name the parent's blocks).
void RenewLaneEpoch();

// The slots a QP's last fast-path message shape (an RDMA WRITE, or a SEND) counted in: its
// requester side, its responder side, and its post as a single WR, all in the lane of the
// thread whose epoch it holds. Valid while that thread's epoch is unchanged (no fold
// since) and the responder is the same device.
struct FastMessageSlots {
  uint64_t key = 0;  // requester key; 0 = nothing cached
  uint64_t lane_epoch = 0;
  uint32_t responder_device = 0;
  ShapeCount* requester = nullptr;
  ShapeCount* responder = nullptr;
  ShapeCount* post = nullptr;
  uint32_t wqe_bytes = 0;  // the modeled WQE of this shape (a function of the key)

  // Whether these slots count `requester_key` towards `responder_device` for this thread.
  [[gnu::always_inline]] bool Hold(uint64_t requester_key, uint32_t to_device) const {
    return key == requester_key && lane_epoch == LaneEpoch() && responder_device == to_device;
  }
  // Counts one message of the shape they hold, and its post when it is the whole post.
  [[gnu::always_inline]] void Bump(bool whole_post) const {
    softnic::Bump(requester);
    softnic::Bump(responder);
    if (whole_post) softnic::Bump(post);
  }
};

// The slots of a QP's last two fast-path shapes: a key-value server answers GETs and PUTs
// with SENDs of two sizes, its clients WRITE requests of two sizes, and one cached shape
// was refilled twice per change (HERD's worker: ~26 instructions a response at 5% PUTs).
struct FastMessageWays {
  FastMessageSlots way[2];
  // Way 0, made to hold the shape of `requester_key` if way 1 did (the two swap, so that
  // the common shape stays in way 0 and is found by one compare), else emptied, its shape
  // kept as way 1 (the slow count then fills it). An empty way 0 stays where it is: a
  // cached post that missed emptied it, and the general path that takes the post asks again.
  [[gnu::always_inline]] FastMessageSlots& For(uint64_t requester_key, uint32_t to_device) {
    if (__builtin_expect(!way[0].Hold(requester_key, to_device), 0)) ForCold(requester_key, to_device);
    return way[0];
  }
  [[gnu::noinline]] void ForCold(uint64_t requester_key, uint32_t to_device) {
    FastMessageSlots other = way[1];
    if (way[0].key != 0) way[1] = way[0];
    way[0] = other.Hold(requester_key, to_device) ? other : FastMessageSlots{};
  }
};

// The cursors of one QP: the requester side per `signaled` (streams alternate between the
// two), the responder side, single-WR posts, and the fast path's WRITEs and SENDs per
// `signaled`.
struct QpShapeCursors {
  ShapeCursor requester[2];
  ShapeCursor responder;
  ShapeCursor single_wqe_post;
  FastMessageWays fast_write[2];
  FastMessageWays fast_send[2];
};

// Cold (accounting.cc): counts through FindShapeSlot and refreshes the cache. `lane` is the
// calling thread's lane, indexed by device.
void CountFastMessageSlow(uint64_t requester_key, uint32_t wqe_bytes, bool whole_post, FastMessageSlots& slots,
                          CounterBlock* lane, uint32_t requester_device, uint32_t responder_device);

// Counts one fast-path message of `requester_key` from `requester_device` to
// `responder_device`, and, when it is the whole post, that post (a doorbell and one WQE by
// MMIO), in the slots `ways` caches: three stores in the common case (one check of way 0),
// in the calling thread's lane, which lane_of() finds only when neither way holds. Returns
// the message's WQE bytes, which wqe_bytes_of() computes only then too.
template <typename WqeBytesOf, typename LaneOf>
[[gnu::always_inline]] inline uint32_t CountFastMessage(uint64_t requester_key, uint32_t requester_device,
                                                        uint32_t responder_device, WqeBytesOf&& wqe_bytes_of,
                                                        bool whole_post, FastMessageWays& ways, LaneOf&& lane_of) {
  FastMessageSlots& slots = ways.way[0];
  if (__builtin_expect(!slots.Hold(requester_key, responder_device), 0)) {
    ways.ForCold(requester_key, responder_device);
    if (!slots.Hold(requester_key, responder_device)) {
      uint32_t wqe_bytes = wqe_bytes_of();
      CountFastMessageSlow(requester_key, wqe_bytes, whole_post, slots, lane_of(), requester_device,
                           responder_device);
      return wqe_bytes;
    }
  }
  slots.Bump(whole_post);
  return slots.wqe_bytes;
}

// Counts one delivered message, given its requester key, on both devices: what softnic
// moved, and what the modeled NIC does for it (payload gather, CQE, responder DMA, wire
// packets and ACKs).
inline void AccountTransfer(uint64_t requester_key, QpShapeCursors& cursors, CounterBlock& requester,
                            CounterBlock& responder) {
  CountShape(requester, requester_key, cursors.requester[(requester_key & shape_key::kSignaled) != 0]);
  CountShape(responder, ResponderKey(requester_key), cursors.responder);
}

// One post (a linked WR list or an ibv_wr_* batch): a doorbell, its WRs, and their WQEs
// reaching the modeled NIC: WQE-by-MMIO for a single WR, else a doorbell write and the
// NIC's DMA reads of the WQEs.
class PostCost {
 public:
  void Add(uint32_t wqe_bytes) {
    if (wqes_++ == 0) first_wqe_bytes_ = wqe_bytes;
    padded_bytes_ += model::PadToLine(wqe_bytes);
  }
  void CountInto(CounterBlock& requester, ShapeCursor& single_wqe_post) {
    if (wqes_ == 1) {
      CountShape(requester, SingleWqePostKey(first_wqe_bytes_), single_wqe_post);
    } else {
      CountList(requester);
    }
  }

 private:
  // A linked list or a batch: a doorbell, then the NIC's DMA of the WQEs.
  [[gnu::noinline]] void CountList(CounterBlock& requester) {
    model::ModeledCounters post;
    model::AccountPost(model::DeviceModel{}, wqes_, padded_bytes_, first_wqe_bytes_, post);
    uint64_t counts[kLastShapeCounter - kFirstModeledCounter + 1];
    ModeledValues(post, counts);
    counts[kDoorbells - kFirstModeledCounter] = 1;
    counts[kWorkRequests - kFirstModeledCounter] = wqes_;
    CountRun(requester, kFirstModeledCounter, counts);
  }

  uint32_t wqes_ = 0;
  uint32_t first_wqe_bytes_ = 0;
  uint64_t padded_bytes_ = 0;
};

// Adds a block's counters (value[] and its shapes' counts times their counters) to `out`.
void SumCounterBlock(const CounterBlock& block, uint64_t out[kCounterCount]);

}  // namespace softnic
