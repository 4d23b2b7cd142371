// Completion queues, the extended poll API, and completion channels.
//
// A CQ is a shared ring (ring.h) so that a sender in another process can deliver a
// receive completion directly. A completion channel is a FIFO in the fabric directory:
// a producer that finds the CQ armed writes one byte to it, which wakes the owner's
// ibv_get_cq_event (or the owner's own poll() on channel->fd).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "softnic/fabric/object.h"
#include "softnic/verbs/internal.h"

namespace softnic {
namespace {

constexpr uint64_t kSupportedWcFlags =
    IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
    IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
    IBV_WC_EX_WITH_DLID_PATH_BITS;
constexpr uint32_t kCqesPerClaim = 16;

// One event per arming: the count rises before the byte is written, so whoever reads a
// byte finds a counted event to take.
void NotifyArmedCq(RingHeader* header) {
  if (header->armed.exchange(kNotArmed, std::memory_order_acq_rel) == kNotArmed) return;
  header->event_pending.fetch_add(1, std::memory_order_release);
  Runtime::Get()->SignalChannel(header->channel_id);
}

bool TakeCountedEvent(std::atomic<uint32_t>& count) {
  uint32_t value = count.load(std::memory_order_acquire);
  while (value != 0) {
    if (count.compare_exchange_weak(value, value - 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

// What a completion frees once reported, as on a NIC: a send completion retires the send
// queue up to its WR, a receive completion tells post_recv how far the receive ring was consumed.
struct Retirement {
  uint32_t qp_num;
  bool is_send;
  uint64_t up_to;  // sq_retire of a send completion, recv_dequeued of a receive one (0: not known)

  static Retirement Of(const Cqe& cqe) {
    return Retirement{cqe.qp_num, cqe.is_send != 0, cqe.is_send ? uint64_t{cqe.sq_retire} : cqe.recv_dequeued};
  }
};

[[gnu::always_inline]] inline void Retire(Runtime* runtime, const SoftCq* cq, const Retirement& retirement) {
  if (!retirement.is_send && retirement.up_to == 0) return;
  SoftQp* qp = runtime->LocalQp(cq->device_index, retirement.qp_num & (kMaxQpsPerDevice - 1));
  if (qp == nullptr || qp->ex.qp_base.qp_num != retirement.qp_num) return;  // not a later QP in a reused slot
  if (retirement.is_send) {
    qp->sq_retired.store(static_cast<uint32_t>(retirement.up_to), std::memory_order_release);
  } else {
    (qp->srq != nullptr ? qp->srq->ring : qp->recv_ring).NoteDequeued(retirement.up_to);
  }
}
[[gnu::always_inline]] inline void Retire(Runtime* runtime, const SoftCq* cq, const Cqe& cqe) {
  Retire(runtime, cq, Retirement::Of(cqe));
}

// A Cqe holds ibv_wc's fields mostly in ibv_wc's order, so a completion is reported with a
// few wide moves rather than one per field.
[[gnu::always_inline]] inline void ToWc(const Cqe& cqe, ibv_wc* wc) {
  static_assert(offsetof(ibv_wc, status) == 8 && offsetof(ibv_wc, opcode) == 12 && offsetof(Cqe, opcode) == 12 &&
                offsetof(ibv_wc, vendor_err) == 16 && offsetof(ibv_wc, byte_len) == 20 &&
                offsetof(ibv_wc, imm_data) == 24 && offsetof(ibv_wc, qp_num) == 28 && offsetof(ibv_wc, src_qp) == 32 &&
                offsetof(Cqe, byte_len) == 16 && offsetof(Cqe, src_qp) == 28 && offsetof(ibv_wc, wc_flags) == 36 &&
                offsetof(ibv_wc, pkey_index) == 40 && offsetof(ibv_wc, slid) == 42 && offsetof(ibv_wc, sl) == 44 &&
                offsetof(ibv_wc, dlid_path_bits) == 45 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
  auto* out = reinterpret_cast<uint8_t*>(wc);
  const auto* in = reinterpret_cast<const uint8_t*>(&cqe);
  std::memcpy(out, in, 16);                                     // wr_id, status, opcode
  std::memcpy(out + 16, &cqe.vendor_err, 4);
  std::memcpy(out + 20, in + offsetof(Cqe, byte_len), 16);      // byte_len, imm_data, qp_num, src_qp
  std::memcpy(out + 36, &cqe.wc_flags, 4);
  uint32_t pkey_index_slid = uint32_t{cqe.slid} << 16;  // pkey_index 0
  uint16_t sl_dlid_path_bits = cqe.sl;                  // dlid_path_bits 0
  std::memcpy(out + 40, &pkey_index_slid, 4);
  std::memcpy(out + 44, &sl_dlid_path_bits, 2);
}

// Cold: report an overrun once, as an async CQ error, like a NIC does.
[[gnu::cold, gnu::noinline]] void ReportOverrun(SoftCq* cq) {
  if (cq->overrun_reported) return;
  cq->overrun_reported = true;
  ibv_async_event event{};
  event.element.cq = reinterpret_cast<ibv_cq*>(&cq->ex);
  event.event_type = IBV_EVENT_CQ_ERR;
  PostAsyncEvent(ToSoft(cq->ex.context), event);
}

// Cold: whether the entry popped at position `dequeued - 1` belongs to a reset QP. A purge
// ends once the ring has been consumed up to where it was when the QP was reset.
[[gnu::cold, gnu::noinline]] bool Purged(SoftCq* cq, const Cqe& cqe, uint64_t dequeued) {
  std::lock_guard<std::mutex> lock(cq->purge_mutex);
  bool purged = false;
  for (const CqPurge& purge : cq->purges) {
    purged = purged || (purge.qpn == cqe.qp_num && dequeued <= purge.end && (cqe.is_send || purge.receives));
  }
  std::erase_if(cq->purges, [&](const CqPurge& purge) { return dequeued >= purge.end; });
  cq->purge_count.store(uint32_t(cq->purges.size()), std::memory_order_relaxed);
  return purged;
}

// The next entry to report, skipping those of reset QPs. False when the CQ is empty.
[[gnu::always_inline]] inline bool PopCqe(SoftCq* cq, Cqe* cqe) {
  uint64_t dequeued;
  while (cq->ring.TryPop(cqe, sizeof(*cqe), &dequeued, cq->consumers)) {
    if (__builtin_expect(cq->purge_count.load(std::memory_order_relaxed) != 0, 0) && Purged(cq, *cqe, dequeued)) {
      continue;
    }
    return true;
  }
  return false;
}

// An empty CQ polls 0, or -EOVERFLOW once it overran.
int PolledNothing(SoftCq* cq) {
  if (cq->ring.header()->overrun.load(std::memory_order_relaxed) != 0) {
    ReportOverrun(cq);
    return -EOVERFLOW;
  }
  return 0;
}

// Cold: a poll of one entry while a reset QP's entries are being dropped.
[[gnu::cold, gnu::noinline]] int PollOnePurging(Runtime* runtime, SoftCq* cq, ibv_wc* wc) {
  Cqe cqe;
  if (!PopCqe(cq, &cqe)) return PolledNothing(cq);
  ToWc(cqe, wc);
  Retire(runtime, cq, cqe);
  return 1;
}

// The entry goes from its ring slot straight into the caller's ibv_wc, with no copy on the
// stack between. A claim that fails (another consumer took the entry) leaves `wc`
// rewritten by the retry, or unreported when the CQ turns out empty.
[[gnu::always_inline]] inline int PollOneReady(Runtime* runtime, SoftCq* cq, ibv_wc* wc) {
  if (__builtin_expect(cq->purge_count.load(std::memory_order_relaxed) != 0, 0)) {
    return PollOnePurging(runtime, cq, wc);
  }
  Retirement retirement;
  auto report = [&](const void* payload) __attribute__((always_inline)) {
    const Cqe& cqe = *static_cast<const Cqe*>(payload);
    ToWc(cqe, wc);
    retirement = Retirement::Of(cqe);
    return true;
  };
  if (cq->ring.TryPopIf(nullptr, report, cq->consumers) != Ring::PopResult::kTaken) return PolledNothing(cq);
  Retire(runtime, cq, retirement);
  return 1;
}

[[gnu::noinline]] int ProgressThenPollOne(SoftCq* cq, ibv_wc* wc) {
  Runtime* runtime = Runtime::Get();
  runtime->ProgressStalled();
  return PollOneReady(runtime, cq, wc);
}

// The latency case, one entry: without the batch's buffer on its stack, and the retries of
// stalled QPs and the runtime's creation in tail calls, it needs no frame.
[[gnu::noinline]] int PollOne(SoftCq* cq, ibv_wc* wc) {
  Runtime* runtime = Runtime::IfReady();
  if (runtime == nullptr || runtime->stalled_count.load(std::memory_order_relaxed) != 0) {
    return ProgressThenPollOne(cq, wc);
  }
  return PollOneReady(runtime, cq, wc);
}

// Cold: a batch poll while a reset QP's entries are being dropped: each entry is copied out
// whole, for Purged to look at.
[[gnu::cold, gnu::noinline]] int PollManyPurging(Runtime* runtime, SoftCq* cq, int entries, ibv_wc* wc) {
  int polled = 0;
  // Up to kCqesPerClaim entries are taken with one claim of the ring: a consumer that is
  // behind pays one atomic per batch, not one per completion.
  Cqe batch[kCqesPerClaim];
  while (polled < entries) {
    uint32_t wanted = uint32_t(std::min<int>(entries - polled, int(kCqesPerClaim)));
    uint64_t dequeued;
    uint32_t taken = cq->ring.TryPopMany(wanted, &dequeued, [&](uint32_t i, const void* payload) {
      std::memcpy(&batch[i], payload, sizeof(Cqe));
    }, cq->consumers);
    bool purging = cq->purge_count.load(std::memory_order_relaxed) != 0;
    for (uint32_t i = 0; i < taken; ++i) {
      if (__builtin_expect(purging, 0) && Purged(cq, batch[i], dequeued - taken + i + 1)) continue;
      ToWc(batch[i], &wc[polled++]);
      Retire(runtime, cq, batch[i]);
    }
    if (taken < wanted) break;
  }
  return polled == 0 ? PolledNothing(cq) : polled;
}

// A poll of up to `entries` completions, taken kCqesPerClaim at a time. Each entry goes
// from its ring slot straight into the caller's ibv_wc, as PollOneReady's: a claim that
// fails leaves the retry to rewrite them (a 56-byte copy to the stack per entry fewer).
[[gnu::noinline]] int PollMany(Runtime* runtime, SoftCq* cq, int entries, ibv_wc* wc) {
  if (__builtin_expect(cq->purge_count.load(std::memory_order_relaxed) != 0, 0)) {
    return PollManyPurging(runtime, cq, entries, wc);
  }
  int polled = 0;
  Retirement retirements[kCqesPerClaim];
  while (polled < entries) {
    uint32_t wanted = uint32_t(std::min<int>(entries - polled, int(kCqesPerClaim)));
    ibv_wc* out = wc + polled;
    uint32_t taken = cq->ring.TryPopMany(wanted, nullptr, [&](uint32_t i, const void* payload) {
      const Cqe& cqe = *static_cast<const Cqe*>(payload);
      ToWc(cqe, &out[i]);
      retirements[i] = Retirement::Of(cqe);
    }, cq->consumers);
    for (uint32_t i = 0; i < taken; ++i) Retire(runtime, cq, retirements[i]);
    polled += int(taken);
    if (taken < wanted) break;
  }
  return polled == 0 ? PolledNothing(cq) : polled;
}

int PollCqOp(ibv_cq* ibcq, int entries, ibv_wc* wc) {
  SoftCq* cq = ToSoft(ibcq);
  if (entries == 1) return PollOne(cq, wc);
  Runtime* runtime = Runtime::IfReady();
  if (runtime == nullptr || runtime->stalled_count.load(std::memory_order_relaxed) != 0) {
    // as PollOne's ProgressThenPollOne: the runtime made if need be, stalled QPs retried
    runtime = Runtime::Get();
    runtime->ProgressStalled();
  } else if (cq->ring.SeemsEmpty()) {
    // A busy-polled empty CQ (a client with several CQs polls most of them empty) is answered
    // from the head slot's sequence, without PollMany's frame and its batch buffer: an empty
    // poll cost ~70 instructions, HERD's client polled 5 per request on a loaded host.
    return PolledNothing(cq);
  }
  return PollMany(runtime, cq, entries, wc);
}

// Only a completion added after this raises an event (ibv_req_notify_cq(3), rxe): programs
// take an event, re-arm and then poll, and one that polls a single completion per event
// (perftest -e) would meet an extra event, and poll nothing, if entries already in the CQ
// raised one.
int ReqNotifyCqOp(ibv_cq* ibcq, int solicited_only) {
  SoftCq* cq = ToSoft(ibcq);
  cq->ring.header()->armed.store(solicited_only ? kArmedSolicited : kArmedAny,
                                 std::memory_order_relaxed);
  // Pairs with the producer's fence in FinishPushCqe: either it sees the arm, or the poll
  // that follows this sees its entry.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return 0;
}

// The extended poll API reads one entry at a time into cq->current.
int TakeOne(SoftCq* cq) {
  Runtime* runtime = Runtime::Get();
  if (!PopCqe(cq, &cq->current)) {
    if (cq->ring.header()->overrun.load(std::memory_order_relaxed) != 0) {
      ReportOverrun(cq);
      return EOVERFLOW;
    }
    return ENOENT;
  }
  Retire(runtime, cq, cq->current);
  cq->ex.wr_id = cq->current.wr_id;
  cq->ex.status = static_cast<ibv_wc_status>(cq->current.status);
  return 0;
}

int StartPoll(ibv_cq_ex* ex, ibv_poll_cq_attr* attr) {
  if (attr != nullptr && attr->comp_mask != 0) return EINVAL;
  Runtime* runtime = Runtime::Get();
  if (runtime->stalled_count.load(std::memory_order_relaxed) != 0) runtime->ProgressStalled();
  return TakeOne(ToSoft(ex));
}
int NextPoll(ibv_cq_ex* ex) { return TakeOne(ToSoft(ex)); }
void EndPoll(ibv_cq_ex*) {}
ibv_wc_opcode ReadOpcode(ibv_cq_ex* ex) { return ibv_wc_opcode(ToSoft(ex)->current.opcode); }
uint32_t ReadVendorErr(ibv_cq_ex* ex) { return ToSoft(ex)->current.vendor_err; }
uint32_t ReadByteLen(ibv_cq_ex* ex) { return ToSoft(ex)->current.byte_len; }
__be32 ReadImmData(ibv_cq_ex* ex) { return ToSoft(ex)->current.imm_data; }
uint32_t ReadQpNum(ibv_cq_ex* ex) { return ToSoft(ex)->current.qp_num; }
uint32_t ReadSrcQp(ibv_cq_ex* ex) { return ToSoft(ex)->current.src_qp; }
unsigned ReadWcFlags(ibv_cq_ex* ex) { return ToSoft(ex)->current.wc_flags; }
uint32_t ReadSlid(ibv_cq_ex* ex) { return ToSoft(ex)->current.slid; }
uint8_t ReadSl(ibv_cq_ex* ex) { return ToSoft(ex)->current.sl; }
uint8_t ReadDlidPathBits(ibv_cq_ex*) { return 0; }

SoftCq* CreateCq(ibv_context* context, uint32_t entries, ibv_comp_channel* channel, void* cq_context) {
  Runtime* runtime = Runtime::Get();
  uint32_t max_cqe = runtime->fabric()->attributes.max_cqe;
  if (entries == 0 || entries > max_cqe) {
    errno = EINVAL;
    return nullptr;
  }
  uint32_t capacity = RoundUpPowerOfTwo(std::max<uint32_t>(entries + 1, 2));
  auto* cq = new SoftCq{};
  if (!runtime->CreateRing(capacity, sizeof(Cqe), &cq->object, &cq->ring)) {
    int err = errno;
    delete cq;
    errno = err;
    return nullptr;
  }
  SoftContext* soft_context = ToSoft(context);
  cq->device_index = soft_context->device_index;
  cq->consumers = runtime->single_threaded() ? Consumers::kOne : Consumers::kMany;
  cq->channel = channel ? ToSoft(channel) : nullptr;
  cq->ring.header()->channel_id = cq->channel ? cq->channel->fifo_id : 0;
  cq->ring.header()->async_channel_id = soft_context->async_fifo_id;
  cq->ex.context = context;
  cq->ex.channel = channel;
  cq->ex.cq_context = cq_context;
  cq->ex.cqe = int(capacity - 1);
  pthread_mutex_init(&cq->ex.mutex, nullptr);
  pthread_cond_init(&cq->ex.cond, nullptr);
  if (cq->channel) {
    std::lock_guard<std::mutex> lock(cq->channel->mutex);
    cq->channel->cqs.push_back(cq);
  }
  std::lock_guard<std::mutex> lock(soft_context->objects_mutex);
  soft_context->cqs.push_back(cq);
  return cq;
}

ibv_cq_ex* CreateCqExOp(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  if ((attr->wc_flags & ~kSupportedWcFlags) != 0) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((attr->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) != 0 ||
      attr->comp_vector != 0) {
    errno = EINVAL;
    return nullptr;
  }
  SoftCq* cq = CreateCq(context, attr->cqe, attr->channel, attr->cq_context);
  if (cq == nullptr) return nullptr;
  InstallCqExOps(cq);
  return &cq->ex;
}

template <typename T>
void EraseFrom(std::vector<T*>& list, T* item) {
  list.erase(std::remove(list.begin(), list.end(), item), list.end());
}

}  // namespace

bool FinishPushCqe(bool pushed, Ring& ring, bool failed, uint32_t device, bool solicited) {
  RingHeader* header = ring.header();
  if (!pushed) {
    Count(Runtime::Get()->counters(device), kCqOverruns);
    // The first overrun wakes the owner's async_fd, wherever the producer runs.
    if (header->overrun.exchange(1, std::memory_order_relaxed) == 0) {
      Runtime::Get()->SignalChannel(header->async_channel_id);
    }
    return false;
  }
  if (header->channel_id != 0) {
    // Pairs with ReqNotifyCqOp's fence (store-load order: our entry, then their arm).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    uint32_t armed = header->armed.load(std::memory_order_relaxed);
    if (armed == kArmedAny || (armed == kArmedSolicited && (solicited || failed))) {
      NotifyArmedCq(header);
    }
  }
  return true;
}

void PurgeCompletions(SoftQp* qp) {
  for (SoftCq* cq : {qp->send_cq, qp->recv_cq}) {
    if (cq == nullptr) continue;  // XRC QPs lack one or both
    std::lock_guard<std::mutex> lock(cq->purge_mutex);
    uint64_t end = cq->ring.header()->enqueue_pos.load(std::memory_order_acquire);
    std::erase_if(cq->purges, [&](const CqPurge& purge) { return purge.qpn == qp->ex.qp_base.qp_num; });
    cq->purges.push_back(CqPurge{qp->ex.qp_base.qp_num, qp->srq == nullptr, end});
    cq->purge_count.store(uint32_t(cq->purges.size()), std::memory_order_relaxed);
  }
}

void InstallCqExOps(SoftCq* cq) {
  ibv_cq_ex& ex = cq->ex;
  ex.start_poll = StartPoll;
  ex.next_poll = NextPoll;
  ex.end_poll = EndPoll;
  ex.read_opcode = ReadOpcode;
  ex.read_vendor_err = ReadVendorErr;
  ex.read_byte_len = ReadByteLen;
  ex.read_imm_data = ReadImmData;
  ex.read_qp_num = ReadQpNum;
  ex.read_src_qp = ReadSrcQp;
  ex.read_wc_flags = ReadWcFlags;
  ex.read_slid = ReadSlid;
  ex.read_sl = ReadSl;
  ex.read_dlid_path_bits = ReadDlidPathBits;
}

void CheckAsyncConditions(SoftContext* context) {
  std::vector<SoftCq*> overrun;
  std::vector<SoftSrq*> limited;
  {
    std::lock_guard<std::mutex> lock(context->objects_mutex);
    for (SoftCq* cq : context->cqs) {
      if (!cq->overrun_reported && cq->ring.header()->overrun.load(std::memory_order_relaxed)) {
        overrun.push_back(cq);
      }
    }
    for (SoftSrq* srq : context->srqs) {
      if (srq->ring.header()->event_pending.exchange(0, std::memory_order_acq_rel)) {
        limited.push_back(srq);
      }
    }
  }
  for (SoftCq* cq : overrun) ReportOverrun(cq);
  for (SoftSrq* srq : limited) {
    ibv_async_event event{};
    event.element.srq = &srq->srq;
    event.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
    PostAsyncEvent(context, event);
  }
}

void InstallCqOps(ibv_context_ops* ops, verbs_context* vctx) {
  ops->poll_cq = PollCqOp;
  ops->req_notify_cq = ReqNotifyCqOp;
  vctx->create_cq_ex = CreateCqExOp;
}

}  // namespace softnic

using namespace softnic;

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  Runtime* runtime = Runtime::Get();
  auto* channel = new SoftChannel{};
  channel->fifo_id = runtime->NewObjectId();
  int fd = CreateFifoObject(runtime->directory(), channel->fifo_id);
  if (fd < 0) {
    int err = errno;
    delete channel;
    errno = err;
    return nullptr;
  }
  channel->channel.context = context;
  channel->channel.fd = fd;
  channel->channel.refcnt = 0;
  return &channel->channel;
}

int ibv_destroy_comp_channel(ibv_comp_channel* ibchannel) {
  SoftChannel* channel = ToSoft(ibchannel);
  {
    std::lock_guard<std::mutex> lock(channel->mutex);
    if (!channel->cqs.empty()) {
      errno = EBUSY;
      return EBUSY;
    }
  }
  close(ibchannel->fd);
  RemoveObject(Runtime::Get()->directory(), channel->fifo_id);
  delete channel;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int entries, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  if (entries <= 0 || comp_vector != 0) {
    errno = EINVAL;
    return nullptr;
  }
  SoftCq* cq = CreateCq(context, uint32_t(entries), channel, cq_context);
  return cq ? reinterpret_cast<ibv_cq*>(&cq->ex) : nullptr;
}

// Not implemented: growing would move the ring that peers have mapped. Every size is
// refused alike, so that a program takes its "not supported" branch whatever it asks.
int ibv_resize_cq(ibv_cq*, int) { return EOPNOTSUPP; }

int ibv_destroy_cq(ibv_cq* ibcq) {
  SoftCq* cq = ToSoft(ibcq);
  if (cq->users.load(std::memory_order_relaxed) != 0) return EBUSY;
  if (cq->channel) {
    std::lock_guard<std::mutex> lock(cq->channel->mutex);
    EraseFrom(cq->channel->cqs, cq);
  }
  SoftContext* context = ToSoft(ibcq->context);
  {
    std::lock_guard<std::mutex> lock(context->objects_mutex);
    EraseFrom(context->cqs, cq);
  }
  // The ring stays mapped here: a sender that resolved this CQ may still be writing. The
  // name goes, so nobody new can map it.
  RemoveObject(Runtime::Get()->directory(), cq->object.id);
  delete cq;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* ibchannel, ibv_cq** cq_out, void** cq_context) {
  SoftChannel* channel = ToSoft(ibchannel);
  for (;;) {
    // Each event is one byte in the FIFO: take exactly one, so that channel->fd stays
    // readable exactly while events are pending (programs poll() it themselves). A plain
    // read, as libibverbs does on the uverbs fd: a signal whose handler lacks SA_RESTART
    // ends the wait with EINTR (qperf's test timer ends its event loop so), a non-blocking
    // channel answers EAGAIN. Stalled sends need no wake-up here: the progress thread
    // retries them.
    char byte;
    if (read(ibchannel->fd, &byte, 1) != 1) return -1;
    std::lock_guard<std::mutex> lock(channel->mutex);
    for (SoftCq* cq : channel->cqs) {
      if (TakeCountedEvent(cq->ring.header()->event_pending)) {
        *cq_out = reinterpret_cast<ibv_cq*>(&cq->ex);
        *cq_context = cq->ex.cq_context;
        return 0;
      }
    }
    // The event's CQ was destroyed meanwhile: wait for the next.
  }
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int events) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += events;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"
