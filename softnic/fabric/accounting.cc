#include "softnic/fabric/accounting.h"

#include <atomic>

namespace softnic {
namespace {

// How often a reader re-reads a block whose writer is folding a slot (it takes
// nanoseconds) before it takes what it read: a writer that died mid-fold must not hang it.
constexpr int kReadAttempts = 1000;

TransferShape DecodeMessage(uint64_t key, LinkLayer* link_layer) {
  using namespace shape_key;
  TransferShape s{};
  model::WrShape& w = s.wr;
  w.payload_B = static_cast<uint32_t>(key);
  s.path_mtu_bytes = 1u << ((key >> kMtuShift) & 0x1f);
  w.op = static_cast<model::Opcode>((key >> kOpShift) & 7);
  w.transport = static_cast<model::Transport>((key >> kTransportShift) & 3);
  uint64_t flags = key >> kFlagsShift;
  w.inline_data = flags & 1;
  w.signaled = flags & 2;
  w.header_only = flags & 4;
  w.with_imm = flags & 8;
  w.inline_recv = flags & 16;
  w.sge = static_cast<uint32_t>((key >> kSgeShift) & 0x3f);
  *link_layer = static_cast<LinkLayer>((key >> kLinkShift) & 3);
  return s;
}

}  // namespace

MessageCounts CountsOfShape(uint64_t key) {
  MessageCounts counts{};
  uint64_t* v = counts.value;
  auto at = [v](Counter c) -> uint64_t& { return v[c - kFirstMessageCounter]; };
  auto role = static_cast<ShapeRole>((key & shape_key::kRoleMask) >> shape_key::kRoleShift);
  model::ModeledCounters modeled;
  if (role == ShapeRole::kSingleWqePost) {
    model::AccountPost(model::DeviceModel{}, 1, 0, static_cast<uint32_t>(key), modeled);
    at(kDoorbells) = 1;
    at(kWorkRequests) = 1;
  } else {
    LinkLayer link_layer;
    TransferShape shape = DecodeMessage(key, &link_layer);
    model::DeviceModel device = ModeledDevice(link_layer, shape.path_mtu_bytes);
    uint64_t bytes = shape.wr.payload_B;
    uint64_t packets = bytes <= shape.path_mtu_bytes ? 1 : (bytes + shape.path_mtu_bytes - 1) / shape.path_mtu_bytes;
    model::ModeledCounters other_side;
    bool requester = role == ShapeRole::kRequester;
    if (requester) {
      model::AccountRequesterWr(device, shape.wr, modeled);
      model::AccountWire(device, shape.wr, modeled, other_side);
    } else {
      model::AccountResponderWr(device, shape.wr, modeled);
      model::AccountWire(device, shape.wr, other_side, modeled);
    }
    at(requester ? kTxPackets : kRxPackets) = packets;
    at(requester ? kTxBytes : kRxBytes) = bytes;
  }
  ModeledValues(modeled, &at(kFirstModeledCounter));
  return counts;
}

ShapeCount* FindShapeSlot(CounterBlock& block, uint64_t key) {
  ShapeCount* free_slot = nullptr;
  for (ShapeCount& slot : block.shapes) {
    uint64_t held = __atomic_load_n(&slot.key, __ATOMIC_RELAXED);
    if (held == key) return &slot;
    if (held == 0 && free_slot == nullptr) free_slot = &slot;
  }
  if (free_slot != nullptr) {  // count is 0 in a free slot; readers may take the key from now on
    __atomic_store_n(&free_slot->key, key, __ATOMIC_RELEASE);
    return free_slot;
  }
  // Every slot is taken: fold one into value[] (round robin) and give it to `key`. Readers
  // see `evictions` odd meanwhile and read again; this thread's cached slots go stale.
  if (LaneEpoch() != 0) ++LaneEpoch();
  ShapeCount& victim = block.shapes[block.next_victim++ % kShapeSlots];
  __atomic_store_n(&block.evictions, block.evictions + 1, __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  CountRun(block, kFirstMessageCounter, CountsOfShape(victim.key).value, victim.count);
  __atomic_store_n(&victim.count, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&victim.key, key, __ATOMIC_RELAXED);
  __atomic_store_n(&block.evictions, block.evictions + 1, __ATOMIC_RELEASE);
  return &victim;
}

namespace {
// Each thread's epochs are a range of their own: the high half numbers the thread, folds
// count in the low half.
std::atomic<uint64_t> g_lane_epoch_ranges{1};
}  // namespace

void RenewLaneEpoch() { LaneEpoch() = g_lane_epoch_ranges.fetch_add(1, std::memory_order_relaxed) << 32; }

void CountFastMessageSlow(uint64_t requester_key, uint32_t wqe_bytes, bool whole_post, FastMessageSlots& slots,
                          CounterBlock* lane, uint32_t requester_device, uint32_t responder_device) {
  slots = FastMessageSlots{};
  CounterBlock& requester = lane[requester_device];
  CounterBlock& responder = lane[responder_device];
  uint64_t post_key = SingleWqePostKey(wqe_bytes);
  uint64_t responder_key = ResponderKey(requester_key);
  if (requester.shared != 0) {  // the shared lane has no slots
    CountRun(requester, kFirstMessageCounter, CountsOfShape(requester_key).value);
    CountRun(responder, kFirstMessageCounter, CountsOfShape(responder_key).value);
    if (whole_post) CountRun(requester, kFirstMessageCounter, CountsOfShape(post_key).value);
    return;
  }
  // Each count lands before the next lookup, which may fold the slot it just used.
  if (LaneEpoch() == 0) RenewLaneEpoch();
  const uint64_t epoch = LaneEpoch();
  ShapeCount* requester_slot = FindShapeSlot(requester, requester_key);
  Bump(requester_slot);
  ShapeCount* responder_slot = FindShapeSlot(responder, responder_key);
  Bump(responder_slot);
  ShapeCount* post_slot = FindShapeSlot(requester, post_key);
  if (whole_post) Bump(post_slot);
  if (LaneEpoch() == epoch) {
    slots = FastMessageSlots{requester_key, epoch, responder_device, requester_slot, responder_slot, post_slot,
                             wqe_bytes};
  }
}

void SumCounterBlock(const CounterBlock& block, uint64_t out[kCounterCount]) {
  uint64_t sum[kCounterCount];
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    uint32_t before = __atomic_load_n(&block.evictions, __ATOMIC_ACQUIRE);
    if ((before & 1) != 0 && attempt + 1 < kReadAttempts) continue;
    for (uint32_t c = 0; c < kCounterCount; ++c) sum[c] = __atomic_load_n(&block.value[c], __ATOMIC_RELAXED);
    for (const ShapeCount& slot : block.shapes) {
      uint64_t key = __atomic_load_n(&slot.key, __ATOMIC_ACQUIRE);
      uint64_t count = __atomic_load_n(&slot.count, __ATOMIC_RELAXED);
      if (key == 0 || count == 0) continue;
      MessageCounts counts = CountsOfShape(key);
      for (uint32_t c = kFirstMessageCounter; c <= kLastShapeCounter; ++c) {
        sum[c] += counts.value[c - kFirstMessageCounter] * count;
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (__atomic_load_n(&block.evictions, __ATOMIC_RELAXED) == before) break;
  }
  for (uint32_t c = 0; c < kCounterCount; ++c) out[c] += sum[c];
}

}  // namespace softnic
