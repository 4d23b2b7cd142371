// HERD's client transport: a request is one UC WRITE into the client's slot of the
// worker that owns the key (Partition of the keyhash), inline up to 256 bytes, signaled
// one in --cq-mod; answers arrive as UD SENDs on the client's QP for that worker, whose
// RECVs are re-posted in batches of kRecvRefill. The clients of one client thread share
// one response CQ per worker: a client's poll takes every answer there, keeps its own and
// hands the others' to their clients' pending queues, so a thread of N clients polls one
// CQ per worker where it polled N per worker (most of them empty while the server was
// busy). A CQ per worker, not one for all: a CQ's producers claim its entries by a CAS on
// one line, which a single worker keeps in its cache and several pass around (16 cores, 8
// client threads, interleaved: 4 workers 9.7-11.0 -> 10.3-12.5 Mops, 8 workers 17.3-18.3 ->
// 17.8-20.0).
#include <infiniband/verbs.h>

#include <bit>
#include <memory>
#include <vector>

#include "kv/core/client_process.h"
#include "kv/core/systems.h"
#include "kv/herd/herd.h"
#include "kv/herd/protocol.h"
#include "rdma/connect.h"
#include "rdma/error.h"
#include "rdma/send_ring.h"

namespace rdmalab::kv {
namespace herd {
namespace {

using nlohmann::json;

class HerdTransport;

// RECVs per worker QP of a client. Enough that the receive queue never runs dry: buffers
// consumed wait for the next Poll (up to kRecvRefill - 1, plus that Poll's kPollBatch) and
// are re-posted only then (the values they hold are read until then); the window's answers,
// and a refill's worth of duplicates from retries, may arrive meanwhile. A multiple of
// kRecvRefill, so that every refill re-posts kRecvRefill neighbouring buffers.
std::uint32_t RecvDepth(const Options& o) {
  const std::uint32_t needed = static_cast<std::uint32_t>(o.window) + kPollBatch + 2 * kRecvRefill;
  return (needed + kRecvRefill - 1) / kRecvRefill * kRecvRefill;
}

// The response CQs of one client thread's clients, one per worker, and the clients (a
// RECV's wr_id names its client by its place here, the worker QP and the buffer).
struct SharedResponses {
  std::vector<CqPtr> cqs;  // [worker]
  std::uint32_t cq_count = 0;  // cqs.size(), read on every poll
  std::uint32_t next_cq = 0;   // the CQ the next poll takes: one CQ a poll, in turn
  std::vector<HerdTransport*> members;
  std::uint32_t member_count = 0;  // members.size(), read on every poll
  // Whether the polls of the last turn over the CQs each found their CQ drained, and the
  // polls skipped since: the client core polls its clients in turn, so after a turn over
  // the CQs that drained them the next members - CQs polls skip (an answer waits at most
  // one turn of the clients), whichever clients are still polled (a client that finished
  // is not).
  bool drained = false;
  std::uint32_t skipped = 0;
};
constexpr int kMemberShift = 48, kQpShift = 32;
// A client's request staging starts (member % kStaggeredClients) * kStaggerLines lines in.
constexpr std::uint32_t kStaggeredClients = 4, kStaggerLines = 4;
constexpr std::uint32_t kStagingStaggerBytes = kStaggeredClients * kStaggerLines * kCacheLineBytes;

class HerdTransport {
 public:
  HerdTransport(Session& session, std::uint32_t client, std::shared_ptr<SharedResponses> shared);
  json Describe() const;
  void Connect(const json& server_uc, const RemoteRegion& region);

  static constexpr bool kLosesMessages = true;  // UC requests and UD responses
  [[gnu::always_inline]] void Issue(const Request& request) { Send(request); }
  void Resend(const Request& request) { Send(request); }
  int Poll(Response* out, int max);

 private:
  // An answer that arrived in buffer `buffer` of worker QP `qp`, not yet handed out.
  struct Arrived {
    std::uint32_t qp, buffer, byte_len;
  };
  // A worker QP's receive queue. A QP's RECVs complete in the order they were posted, so
  // the buffers handed out are the ones after the last re-posted, in ring order: counters
  // say which to re-post, where a list of them cost a push per answer.
  struct ResponseQueue {
    QpPtr qp;
    std::uint8_t* buffers = nullptr;  // recv_depth_ buffers, buffer_bytes_ apart
    std::uint64_t handed_out = 0;     // answers delivered from it
    std::uint64_t reposted = 0;       // of those, buffers posted again
  };
  // Inline into the client loop: a call's frame cost ~17 instructions a request.
  [[gnu::always_inline]] void Send(const Request& request);
  // Re-posts every queue's handed-out buffers, kRecvRefill at a time (once per kRecvRefill
  // answers: out of line, so that the poll inlined in the client loop stays small).
  [[gnu::noinline]] void RepostHandedOut();
  // Posts `count` (a multiple of kRecvRefill, at most recv_depth_) buffers of `queue` from
  // buffer `first` (a multiple of kRecvRefill) on, wrapping around the ring.
  void PostRecvs(ResponseQueue& queue, std::uint32_t qp, std::uint32_t first, std::uint32_t count);
  // `arrived` into `r`, its buffer consumed (re-posted once the value was read).
  void Deliver(const Arrived& arrived, Response& r) {
    ResponseQueue& queue = queues_[arrived.qp];
    ++queue.handed_out;
    ++handed_out_since_refill_;
    const std::uint8_t* message = queue.buffers + std::size_t{arrived.buffer} * buffer_bytes_ + kUdGrhBytes;
    std::memcpy(&r.id, message, 4);
    std::uint16_t len = 0;
    std::memcpy(&len, message + 6, 2);
    const std::uint32_t received =
        arrived.byte_len >= kUdGrhBytes + kResponseHeaderBytes ? arrived.byte_len - kUdGrhBytes - kResponseHeaderBytes : 0;
    r.found = message[4] == kHit || message[4] == kStored;
    r.value = message + kResponseHeaderBytes;
    r.value_bytes = std::min<std::uint32_t>(len, received);
  }

  Session& session_;
  const Options& o_;
  std::uint32_t client_;
  RegionLayout layout_;
  RemoteRegion region_;
  // Declared before the QPs that use its CQ, so that it outlives them.
  std::shared_ptr<SharedResponses> shared_;
  std::uint32_t member_ = 0;  // this client's place in shared_->members
  // Answers another client's poll took for this one: a ring holding as many as there are
  // RECVs (a power of two).
  std::vector<Arrived> pending_;
  std::uint64_t pending_head_ = 0, pending_tail_ = 0;
  CqPtr send_cq_;
  QpPtr uc_qp_;
  std::vector<ResponseQueue> queues_;  // one per worker
  SendRing ring_;
  std::uint32_t max_inline_ = 0;
  Region staging_;    // per window slot: the request as it is written
  std::uint8_t* staging_first_end_ = nullptr;  // where window slot 0's request ends in it
  Region responses_;  // per worker QP: recv_depth_ buffers, buffer_bytes_ apart
  std::uint32_t recv_depth_ = 0;
  std::uint32_t buffer_bytes_ = 0;
  std::uint32_t handed_out_since_refill_ = 0;  // over every QP: whether to look at them
  // The request WRITE's fixed fields, set once: a post fills in what changes.
  ibv_send_wr write_{};
  ibv_sge write_sge_{};
  // Where a request for (worker, window slot) ends in the server's region, at
  // [worker * window + slot]: Send subtracts the request's length.
  std::vector<std::uint64_t> remote_slot_ends_;
  // A refill's RECVs, linked and sized once: a post fills in addresses and ids.
  ibv_recv_wr recv_wrs_[kRecvRefill]{};
  ibv_sge recv_sges_[kRecvRefill]{};
};

HerdTransport::HerdTransport(Session& session, std::uint32_t client, std::shared_ptr<SharedResponses> shared)
    : session_(session), o_(session.options()), client_(client), shared_(std::move(shared)) {
  const Device& device = session.device();
  layout_.workers = static_cast<std::uint32_t>(o_.workers);
  layout_.window = static_cast<std::uint32_t>(o_.window);
  const std::uint32_t depth = static_cast<std::uint32_t>(o_.cq_mod + o_.window);
  recv_depth_ = RecvDepth(o_);
  send_cq_ = CreateCq(device, static_cast<int>(depth));
  member_ = static_cast<std::uint32_t>(shared_->members.size());
  shared_->members.push_back(this);
  shared_->member_count = static_cast<std::uint32_t>(shared_->members.size());
  pending_.resize(std::bit_ceil(recv_depth_ * layout_.workers));
  QpCaps uc;
  uc.type = IBV_QPT_UC;
  uc.send_depth = depth;
  uc.recv_depth = 1;
  uc.inline_bytes = kMaxInlineRequestBytes;
  uc_qp_ = CreateQp(device, session.pd(), send_cq_.get(), shared_->cqs[0].get(), uc);
  max_inline_ = uc.inline_bytes;
  ring_.qp = uc_qp_.get();
  ring_.depth = depth;
  ring_.signal_every = static_cast<std::uint32_t>(o_.cq_mod);
  QpCaps ud;
  ud.type = IBV_QPT_UD;
  ud.send_depth = 1;
  ud.recv_depth = recv_depth_;
  // Each client of a thread a few lines further in, so that the requests' last lines
  // (written on every request) fall into different L1 sets: in page-aligned regions, every
  // client's slots shared the same 4 sets.
  staging_ = MakeRegion(session, std::size_t{layout_.window} * kSlotBytes + kStagingStaggerBytes, o_.use_hugepages);
  staging_first_end_ = staging_.data() + kSlotBytes + member_ % kStaggeredClients * kStaggerLines * kCacheLineBytes;
  buffer_bytes_ = ResponseStrideBytes(static_cast<std::uint32_t>(o_.value_size));
  responses_ = MakeRegion(session, std::size_t{layout_.workers} * recv_depth_ * buffer_bytes_, o_.use_hugepages);
  for (std::uint32_t i = 0; i < kRecvRefill; ++i) {
    recv_sges_[i].length = buffer_bytes_ - kResponseBufferOffset;
    recv_sges_[i].lkey = responses_.mr->lkey;
    recv_wrs_[i].sg_list = &recv_sges_[i];
    recv_wrs_[i].num_sge = 1;
    recv_wrs_[i].next = i + 1 < kRecvRefill ? &recv_wrs_[i + 1] : nullptr;
  }
  queues_.resize(layout_.workers);
  for (std::uint32_t s = 0; s < layout_.workers; ++s) {
    ResponseQueue& queue = queues_[s];
    queue.qp = CreateQp(device, session.pd(), send_cq_.get(), shared_->cqs[s].get(), ud);
    queue.buffers = responses_.data() + std::size_t{s} * recv_depth_ * buffer_bytes_ + kResponseBufferOffset;
    ActivateUdQp(queue.qp.get(), device, 0);
    PostRecvs(queue, s, 0, recv_depth_);
  }
}

json HerdTransport::Describe() const {
  json qpns = json::array();
  for (const auto& queue : queues_) qpns.push_back(queue.qp->qp_num);
  return {{"uc", ToJson(Endpoint{uc_qp_->qp_num, client_, session_.address()})}, {"ud_qpns", qpns}};
}

void HerdTransport::Connect(const json& server_uc, const RemoteRegion& region) {
  const Endpoint remote = EndpointFromJson(server_uc);
  ConnectQp(uc_qp_.get(), session_.device(), session_.address(), remote, client_, 1);
  region_ = region;
  write_.sg_list = &write_sge_;
  write_.num_sge = 1;
  write_.opcode = IBV_WR_RDMA_WRITE;
  write_.wr.rdma.rkey = region.rkey;
  write_sge_.lkey = staging_.mr->lkey;
  layout_.clients = static_cast<std::uint32_t>(region.bytes / (std::uint64_t{layout_.workers} * layout_.window * kSlotStrideBytes));
  if (client_ >= layout_.clients) {
    Fail("client ", client_, " has no slots in the server's request region (", layout_.clients, " clients)");
  }
  remote_slot_ends_.resize(std::size_t{layout_.workers} * layout_.window);
  for (std::uint32_t worker = 0; worker < layout_.workers; ++worker) {
    for (std::uint32_t w = 0; w < layout_.window; ++w) {
      remote_slot_ends_[std::size_t{worker} * layout_.window + w] =
          region_.address + layout_.Slot(worker, client_, w) * kSlotStrideBytes + kSlotBytes;
    }
  }
}

void HerdTransport::PostRecvs(ResponseQueue& queue, std::uint32_t qp, std::uint32_t first, std::uint32_t count) {
  // Built from one chain of kRecvRefill WRs kept here: WRs kept per buffer cost the
  // client more L1 misses (writing their links, softnic reading them) than filling in
  // addresses and ids costs.
  const std::uint64_t id_base = std::uint64_t{member_} << kMemberShift | std::uint64_t{qp} << kQpShift;
  const std::uint32_t buffer_bytes = buffer_bytes_;  // a local: the stores below would reload a member
  for (std::uint32_t done = 0; done < count; done += kRecvRefill) {
    // Refills start at multiples of kRecvRefill, which divides recv_depth_: a chunk never wraps.
    const std::uint32_t b = first + done < recv_depth_ ? first + done : first + done - recv_depth_;
    std::uintptr_t address = reinterpret_cast<std::uintptr_t>(queue.buffers) + std::size_t{b} * buffer_bytes;
    for (std::uint32_t i = 0; i < kRecvRefill; ++i, address += buffer_bytes) {
      recv_sges_[i].addr = address;
      recv_wrs_[i].wr_id = id_base | (b + i);
    }
    PostRecvOrFail(queue.qp.get(), recv_wrs_, "HERD response buffers");
  }
}

inline void HerdTransport::Send(const Request& request) {
  // Retire request WRITEs once a signaled one may have completed (done here, once a
  // request, rather than on every poll of the response CQ, most of which find nothing).
  if (ring_.Outstanding() > ring_.signal_every) ReapSends(send_cq_.get(), &ring_, "HERD requests");
  while (!ring_.HasRoom(1)) ReapSends(send_cq_.get(), &ring_, "HERD requests");
  const std::uint32_t w = SlotOf(request.id);
  const std::uint32_t worker = Partition(request.key, layout_.workers);
  const std::uint32_t bytes = RequestBytes(request.value_bytes);
  std::uint8_t* slot_end = staging_first_end_ + std::size_t{w} * kSlotBytes;
  EncodeRequest(slot_end, request.key, request.id, request.value, static_cast<std::uint16_t>(request.value_bytes));
  write_sge_.addr = reinterpret_cast<std::uintptr_t>(slot_end - bytes);
  write_sge_.length = bytes;
  const std::uint64_t seq = ring_.posted;
  write_.wr_id = ring_.WrId(seq);
  write_.send_flags = (bytes <= max_inline_ ? IBV_SEND_INLINE : 0) | (ring_.SignalInOrder(seq) ? IBV_SEND_SIGNALED : 0);
  write_.wr.rdma.remote_addr = remote_slot_ends_[std::size_t{worker} * layout_.window + w] - bytes;
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(uc_qp_.get(), &write_, &bad);
  if (error_number != 0) FailErrno("ibv_post_send (HERD request WRITE)", error_number);
  ++ring_.posted;
}

void HerdTransport::RepostHandedOut() {
  handed_out_since_refill_ = 0;
  for (std::uint32_t s = 0; s < layout_.workers; ++s) {
    ResponseQueue& queue = queues_[s];
    const std::uint64_t free = (queue.handed_out - queue.reposted) / kRecvRefill * kRecvRefill;
    if (free != 0) {
      PostRecvs(queue, s, static_cast<std::uint32_t>(queue.reposted % recv_depth_), static_cast<std::uint32_t>(free));
      queue.reposted += free;
    }
    handed_out_since_refill_ += static_cast<std::uint32_t>(queue.handed_out - queue.reposted);
  }
}

int HerdTransport::Poll(Response* out, int max) {
  // Buffers handed out by the previous Poll are free again now (their values were read).
  if (handed_out_since_refill_ >= kRecvRefill) RepostHandedOut();
  int n = 0;
  if (pending_head_ != pending_tail_) {
    for (; n < max && pending_head_ != pending_tail_; ++n) {
      Deliver(pending_[pending_head_++ & (pending_.size() - 1)], out[n]);
    }
    if (n == max) return n;
  }
  SharedResponses& shared = *shared_;
  if (shared.drained && shared.skipped + shared.cq_count < shared.member_count) {
    ++shared.skipped;
    return n;
  }
  ibv_wc completions[kPollBatch];
  const int wanted = std::min(max - n, kPollBatch);
  const int polled = ibv_poll_cq(shared.cqs[shared.next_cq].get(), wanted, completions);
  if (polled < 0) Fail("ibv_poll_cq failed on HERD's response CQ");
  // A CQ that gave a whole batch is polled again; a drained one hands over to the next.
  shared.drained = false;
  if (polled < wanted && ++shared.next_cq == shared.cq_count) {
    shared.next_cq = 0;
    shared.drained = true;
  }
  shared.skipped = 0;
  for (int i = 0; i < polled; ++i) {
    const ibv_wc& wc = completions[i];
    if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving HERD responses");
    const auto member = static_cast<std::uint32_t>(wc.wr_id >> kMemberShift);
    const Arrived arrived{static_cast<std::uint32_t>(wc.wr_id >> kQpShift) & 0xFFFF, static_cast<std::uint32_t>(wc.wr_id),
                          wc.byte_len};
    if (member == member_) {
      Deliver(arrived, out[n++]);
      continue;
    }
    HerdTransport& owner = *shared.members[member];
    if (owner.pending_tail_ - owner.pending_head_ == owner.pending_.size()) {
      Fail("HERD client ", owner.client_, ": more answers pending than RECVs posted");
    }
    owner.pending_[owner.pending_tail_++ & (owner.pending_.size() - 1)] = arrived;
  }
  return n;
}

}  // namespace
}  // namespace herd

Report RunHerdClient(Session& session) {
  using nlohmann::json;
  const Options& o = session.options();
  std::vector<std::unique_ptr<herd::HerdTransport>> transports;
  json clients = json::array();
  // Response CQs per client thread, for the clients RunClientProcess gives it (j % threads).
  std::vector<std::shared_ptr<herd::SharedResponses>> shared(o.threads);
  for (int t = 0; t < o.threads; ++t) {
    const int members = (o.clients - t + o.threads - 1) / o.threads;
    shared[t] = std::make_shared<herd::SharedResponses>();
    for (int s = 0; s < o.workers; ++s) {
      shared[t]->cqs.push_back(CreateCq(session.device(), members * static_cast<int>(herd::RecvDepth(o))));
    }
    shared[t]->cq_count = static_cast<std::uint32_t>(o.workers);
  }
  for (int j = 0; j < o.clients; ++j) {
    transports.push_back(
        std::make_unique<herd::HerdTransport>(session, GlobalClientId(session, j), shared[j % o.threads]));
    clients.push_back(transports.back()->Describe());
  }
  session.Put("herd", {{"address", ToJson(Endpoint{0, 0, session.address()})}, {"clients", clients}});
  const json server = session.Get("server/0", "herd");
  const RemoteRegion region = RemoteRegion::FromJson(server.at("region"));
  const json& mine = server.at("uc").at(session.index());
  for (int j = 0; j < o.clients; ++j) transports[j]->Connect(mine.at(j), region);
  return RunClientProcess(session, transports);
}

}  // namespace rdmalab::kv
