// HERD's server: an initializer (this process's main thread) registers the request region
// and connects one UC QP per client; NS workers each own a MICA partition, a UD QP (or
// --qp of them, used in turn: guide16's multi-queue) and their chunk of the region, which
// they poll slot by slot, round robin, by the slot's last byte. A detected request enters
// the 2-stage pipeline (prefetch the index bucket; read it and prefetch the log entry, or
// do all of a PUT; read the log entry and post the response), its stages one push apart as
// HERD's, or more where the keys outgrow the caches; after a sweep of empty polls (HERD:
// 100) a no-op pushes the pipeline so no request waits for the next one. With --batching a
// worker takes up to one request per client in a sweep and answers them with one doorbell.
#include <infiniband/verbs.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "kv/cache/mica.h"
#include "kv/core/client_core.h"
#include "kv/core/client_process.h"
#include "kv/core/systems.h"
#include "kv/herd/herd.h"
#include "kv/herd/protocol.h"
#include "kv/workload/workload.h"
#include "rdma/affinity.h"
#include "rdma/clock.h"
#include "rdma/connect.h"
#include "rdma/error.h"
#include "rdma/send_ring.h"
#include "rdma/session.h"

namespace rdmalab::kv {
namespace herd {
namespace {

using nlohmann::json;

// The one-by-one pipeline: a request's bucket is prefetched when it is detected, read (and
// its log entry prefetched) `gap` pushes later, and its entry read and the request answered
// `gap` pushes after that. HERD's gap is 1. Where the keys' buckets and entries outgrow the
// core's own cache, a miss outlasts the time between two pushes (a no-op follows a
// detection after one empty sweep), so the stages run at least 2 pushes apart, and 3 from
// 16 slots, where enough requests are in flight: more misses overlap (1 Mi keys on this VM,
// interleaved pairs: 1 x W=4 gap 1 -> 2 2.1-2.8 -> 3.1-3.6 Mops, 2 x W=4 1.34-2.02x; 4 x W=4
// gap 1 -> 2 2.3-2.7 -> 3.8-3.9, gap 2 -> 3 1.15-2.04x in 6 of 6 pairs, 7.3-8.7 Mops; gap 3
// at 1 x W=4 0.93-1.61x, not taken). With keys that stay cached a deeper pipeline only
// holds requests longer (1 Ki keys, 4 x W=4: 0.46-0.98x with gap 2 in four interleaved
// pairs, placement noise among them).
constexpr std::uint32_t kPipelineItems = 8;  // a power of two above 2 x the largest gap
constexpr std::uint32_t kMinDeepPipelineGap = 2, kMaxPipelineGap = 3;
static_assert(2 * kMaxPipelineGap < kPipelineItems, "the pipeline's ring holds every request in flight and a free item");
// Slots per worker (clients x window) from which the deepest gap pays: the pipeline holds
// 2 x gap requests, and the clients need as many again in flight to keep it fed.
constexpr std::uint32_t kSlotsForMaxPipelineGap = 16;
// Where the core's L2 size is not reported: the smallest of the hosts measured.
constexpr std::uint64_t kFallbackPrivateCacheBytes = 1ull << 20;
constexpr std::uint64_t kStopCheckMask = 0x3FF;
constexpr std::uint32_t kMaxBatch = 64;
// Polls (sweeps) without any request before a worker yields its CPU: with more busy pollers
// than cores (clients and workers on one 2-core host) a spinning worker would otherwise hold
// the CPU its clients need for a whole time slice.
constexpr std::uint32_t kIdlePollsBeforeYield = 1u << 7;
constexpr std::uint32_t kIdleSweepsBeforeYield = 1u << 6;

struct ClientAddress {
  std::uint32_t process = 0;
  std::vector<std::uint32_t> ud_qpns;  // one per worker
};

// Where a worker's responses to one client go: its process's AH and its QP for this worker.
struct Destination {
  ibv_ah* ah = nullptr;
  std::uint32_t qpn = 0;
};

// What a worker did. The hot loop counts only what nothing else counts: its cache counts the
// GETs, hits and PUTs, its send rings the responses (Worker::Stats fills them in).
struct WorkerStats {
  std::uint64_t requests = 0, gets = 0, get_hits = 0, puts = 0, puts_refused = 0, malformed = 0, torn = 0, noops = 0;
  std::uint64_t responses = 0, doorbells = 0;
  std::uint32_t pipeline_gap = 0;  // one by one: pushes between a request's stages (0: batched)
  json Json(std::uint32_t worker) const {
    return {{"worker", worker},      {"requests", requests},   {"gets", gets},
            {"get_hits", get_hits},  {"puts", puts},           {"puts_refused", puts_refused},
            {"malformed", malformed}, {"torn", torn},      {"noops", noops},        {"responses", responses},
            {"doorbells", doorbells}, {"responses_per_doorbell", doorbells ? double(responses) / doorbells : 0.0},
            {"pipeline_gap", pipeline_gap}};
  }
};

// A value into a response: up to 64 bytes by fixed-size moves that overlap (no read or
// write outside [0, bytes)), longer ones by memcpy. A libc memcpy of a length it must
// dispatch on cost a response ~21 instructions; HERD's values are tens of bytes.
inline void CopyValue(std::uint8_t* out, const std::uint8_t* in, std::uint32_t bytes) {
  auto move = [&](std::uint32_t at, auto word) {
    std::memcpy(&word, in + at, sizeof word);
    std::memcpy(out + at, &word, sizeof word);
  };
  struct Bytes16 {
    std::uint64_t lo, hi;
  };
  if (bytes >= 16 && bytes <= 32) {
    move(0, Bytes16{});
    move(bytes - 16, Bytes16{});
  } else if (bytes > 32 && bytes <= 64) {
    move(0, Bytes16{});
    move(16, Bytes16{});
    move(bytes - 32, Bytes16{});
    move(bytes - 16, Bytes16{});
  } else if (bytes >= 8 && bytes < 16) {
    move(0, std::uint64_t{});
    move(bytes - 8, std::uint64_t{});
  } else if (bytes != 0) {
    std::memcpy(out, in, bytes);
  }
}

// One request in the pipeline.
struct Item {
  RequestKind kind = RequestKind::kEmpty;  // kEmpty: a no-op
  std::uint32_t client = 0;
  ParsedRequest request;  // request.value points at value_copy
  // A PUT's value is copied out of the slot on detection, with the key: a retried request
  // may be detected again after its first answer reached the client, whose next request
  // then overwrites the slot before this item's stage 1 stores the value.
  std::uint8_t value_copy[kMaxValueBytes];
  LogRef ref;
  // The answer, set by the stages (a detected item's previous answer is never read): its
  // status, and the value a hit returns (value_bytes 0 otherwise).
  std::uint8_t status = kMiss;
  const std::uint8_t* value = nullptr;
  std::uint32_t value_bytes = 0;
};

class Server;

// Aligned to a cache line, so that no line holds two workers' fields.
class alignas(64) Worker {
 public:
  Worker(Server& server, std::uint32_t id);
  void Setup();
  void Serve(const std::atomic<bool>& stop);
  WorkerStats Stats() const;

 private:
  void Stage0(Item& item) { if (item.kind != RequestKind::kEmpty) cache_->PrefetchBucket(item.request.key); }
  void Stage1(Item& item);
  void Stage2(Item& item);
  // Fills the send WR wrs_[count], the answer to a detected request (kGet or kPut), all but its link.
  [[gnu::always_inline]] void BuildResponse(const Item& item, std::uint32_t count);
  [[gnu::always_inline]] void PostResponses(std::uint32_t count);
  // The request in `slot` (kSlotBytes, its polled byte set) of `client` into `item`.
  // Returns false, `item` kEmpty, for a request to drop (malformed, torn).
  bool Detect(const std::uint8_t* slot, std::uint32_t client, Item& item);
  std::uint8_t* SlotOf(std::uint32_t client, std::uint32_t w) const;
  void ServeOneByOne(const std::atomic<bool>& stop);
  void ServeBatched(const std::atomic<bool>& stop);

  Server& server_;
  std::uint32_t id_;
  std::unique_ptr<MicaCache> cache_;
  CqPtr send_cq_, recv_cq_;
  std::vector<QpPtr> qps_;
  std::vector<SendRing> rings_;
  std::uint32_t queues_ = 1;  // rings_.size()
  std::uint32_t pipeline_gap_ = 1;  // ServeOneByOne's pushes between a request's stages
  std::uint32_t next_qp_ = 0;
  // A response that goes inline is copied by the post itself, so one buffer serves them all
  // and stays in L1; one beyond --inline_size is read by DMA after the post, so it gets a
  // staging entry per send-queue entry that stays untouched until its WR has retired.
  alignas(64) std::uint8_t inline_response_[kResponseHeaderBytes + kMaxValueBytes];
  Region staging_;
  std::uint32_t staging_mask_ = 0;  // staging entries per ring, a power of two, less one
  std::uint32_t inline_bytes_ = 0;  // --inline_size: values up to this go inline
  std::uint8_t* region_ = nullptr;
  std::vector<Destination> destinations_;  // per client
  WorkerStats stats_;
  MicaCache::Stats preloaded_;  // the cache's counts when serving began
  ibv_send_wr wrs_[kMaxBatch] = {};
  ibv_sge sges_[kMaxBatch] = {};
};

class Server {
 public:
  explicit Server(Session& session);
  Report Run();

  Session& session_;
  const Options& o_;
  RegionLayout layout_;
  Region requests_;
  CqPtr uc_cq_;
  std::vector<QpPtr> uc_qps_;
  std::vector<ClientAddress> clients_;
  std::vector<AhPtr> process_ahs_;  // one per client process
  std::vector<std::unique_ptr<Worker>> workers_;

 private:
  void ConnectClients();
};

Server::Server(Session& session) : session_(session), o_(session.options()) {
  layout_.workers = static_cast<std::uint32_t>(o_.workers);
  layout_.clients = TotalClients(o_, session.clients());
  layout_.window = static_cast<std::uint32_t>(o_.window);
  requests_ = MakeRegion(session, layout_.Bytes(), o_.use_hugepages);
}

void Server::ConnectClients() {
  const Device& device = session_.device();
  uc_cq_ = CreateCq(device, 16);
  json uc_endpoints = json::array();
  std::uint32_t global = 0;
  for (int p = 0; p < session_.clients(); ++p) {
    const json info = session_.Get("client/" + std::to_string(p), "herd");
    const PortAddress address = EndpointFromJson(info.at("address")).address;
    process_ahs_.push_back(CreateAh(session_.pd(), device, session_.address(), address));
    json mine = json::array();
    for (const auto& client : info.at("clients")) {
      QpCaps caps;
      caps.type = IBV_QPT_UC;
      caps.send_depth = 1;
      caps.recv_depth = 1;
      uc_qps_.push_back(CreateQp(device, session_.pd(), uc_cq_.get(), uc_cq_.get(), caps));
      ibv_qp* qp = uc_qps_.back().get();
      const Endpoint remote = EndpointFromJson(client.at("uc"));
      ConnectQp(qp, device, session_.address(), remote, global, 1);
      mine.push_back(ToJson(Endpoint{qp->qp_num, global, session_.address()}));
      clients_.push_back({static_cast<std::uint32_t>(p), client.at("ud_qpns").get<std::vector<std::uint32_t>>()});
      if (clients_.back().ud_qpns.size() != layout_.workers) {
        Fail("client/", p, " has ", clients_.back().ud_qpns.size(), " response QPs per client, the server ",
             layout_.workers, " workers: --workers must match on both sides");
      }
      ++global;
    }
    uc_endpoints.push_back(mine);
  }
  if (global != layout_.clients) {
    Fail("the client processes bring ", global, " clients, expected ", layout_.clients, " (--clients x --peers)");
  }
  session_.Put("herd", {{"region", requests_.Describe()}, {"uc", uc_endpoints}});
}

Worker::Worker(Server& server, std::uint32_t id) : server_(server), id_(id) {}

// The core's own cache (L2): a partition that outgrows it is looked up through L3 or memory
// and TLB misses, whose latency a push at HERD's gap no longer hides once the worker is
// saturated (16-core host, 8 workers over 1 Mi keys, 14.7 MB a partition: 2.36 Mops a
// worker with gap 1, where 4 workers, 29 MB and gap 3, ran 2.81).
static std::uint64_t PrivateCacheBytes() {
  const long reported = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return reported > 0 ? static_cast<std::uint64_t>(reported) : kFallbackPrivateCacheBytes;
}

void Worker::Setup() {
  const Options& o = server_.o_;
  MicaConfig config;
  config.log_bytes = std::uint64_t(o.log_mb) << 20;
  const std::uint64_t keys_here = o.keys / o.workers + 1;
  config.bucket_count_log2 = o.index_log2 != 0 ? static_cast<std::uint32_t>(o.index_log2)
                                               : static_cast<std::uint32_t>(std::max(4, 64 - std::countl_zero(keys_here / 4)));
  Check(config);
  cache_ = std::make_unique<MicaCache>(config);
  const std::uint64_t entry_bytes = MicaCache::EntryBytes(static_cast<std::uint64_t>(o.value_size));
  const std::uint32_t slots = server_.layout_.clients * server_.layout_.window;
  pipeline_gap_ = keys_here * (MicaCache::kBucketBytes + entry_bytes) <= PrivateCacheBytes()
                      ? 1
                      : (slots >= kSlotsForMaxPipelineGap ? kMaxPipelineGap : kMinDeepPipelineGap);
  if (o.preload) {
    std::vector<std::uint8_t> value(o.value_size);
    for (std::uint64_t k = 0; k < o.keys; ++k) {
      const KeyHash key = KeyHashOf(k);
      if (Partition(key, o.workers) != id_) continue;
      FillValue(k, kPreloadWriter, 0, value.data(), static_cast<std::uint32_t>(value.size()));
      cache_->Put(key, value.data(), static_cast<std::uint32_t>(value.size()));
    }
  }
  const Device& device = server_.session_.device();
  const std::uint32_t depth = static_cast<std::uint32_t>(std::max(o.cq_mod + kMaxBatch, 2u * o.cq_mod));
  send_cq_ = CreateCq(device, static_cast<int>(depth * o.queues));
  recv_cq_ = CreateCq(device, 16);
  QpCaps caps;
  caps.type = IBV_QPT_UD;
  caps.send_depth = depth;
  caps.recv_depth = 1;
  caps.send_sges = 1;
  caps.inline_bytes = std::min<std::uint32_t>(kResponseHeaderBytes + o.inline_size, 1024);
  for (int q = 0; q < o.queues; ++q) {
    qps_.push_back(CreateQp(device, server_.session_.pd(), send_cq_.get(), recv_cq_.get(), caps));
    ActivateUdQp(qps_.back().get(), device, 0);
    SendRing ring;
    ring.qp = qps_.back().get();
    ring.id = static_cast<std::uint32_t>(q);
    ring.depth = depth;
    ring.signal_every = static_cast<std::uint32_t>(o.cq_mod);
    rings_.push_back(ring);
  }
  queues_ = static_cast<std::uint32_t>(rings_.size());
  const std::uint32_t staging_slots = std::bit_ceil(depth);
  staging_mask_ = staging_slots - 1;
  staging_ = MakeRegion(server_.session_,
                        std::size_t{staging_slots} * o.queues * (kResponseHeaderBytes + kMaxValueBytes), o.use_hugepages);
  region_ = server_.requests_.data();
  for (const ClientAddress& client : server_.clients_) {
    destinations_.push_back({server_.process_ahs_[client.process].get(), client.ud_qpns[id_]});
  }
  inline_bytes_ = static_cast<std::uint32_t>(o.inline_size);
  for (std::uint32_t i = 0; i < kMaxBatch; ++i) {
    wrs_[i].opcode = IBV_WR_SEND;
    wrs_[i].num_sge = 1;
    wrs_[i].sg_list = &sges_[i];
    wrs_[i].wr.ud.remote_qkey = kUdQkey;
    sges_[i].lkey = staging_.mr->lkey;
  }
  preloaded_ = cache_->stats();
}

WorkerStats Worker::Stats() const {
  WorkerStats stats = stats_;
  const MicaCache::Stats& cache = cache_->stats();
  stats.gets = cache.gets - preloaded_.gets;
  stats.get_hits = cache.get_hits - preloaded_.get_hits;
  stats.puts = cache.puts - preloaded_.puts;
  stats.puts_refused = cache.put_refused - preloaded_.put_refused;
  stats.requests = stats.gets + stats.puts + stats.malformed + stats.torn;
  for (const SendRing& ring : rings_) stats.responses += ring.posted;
  return stats;
}

void Worker::Stage1(Item& item) {
  if (item.kind == RequestKind::kGet) {
    item.ref = cache_->FindAndPrefetch(item.request.key);
  } else if (item.kind == RequestKind::kPut) {
    item.status = cache_->Put(item.request.key, item.request.value, item.request.value_bytes) ? kStored : kRefused;
    item.value_bytes = 0;
  }
}

void Worker::Stage2(Item& item) {
  if (item.kind != RequestKind::kGet) return;
  item.status = cache_->Read(item.ref, item.request.key, &item.value, &item.value_bytes) ? kHit : kMiss;
  if (item.status == kMiss) item.value_bytes = 0;
}

inline void Worker::BuildResponse(const Item& item, std::uint32_t count) {
  SendRing& ring = rings_[next_qp_];
  ibv_send_wr& wr = wrs_[count];
  ibv_sge& sge = sges_[count];
  const std::uint32_t len = item.value_bytes;
  const std::uint64_t seq = ring.posted + count;
  const bool inline_data = len <= inline_bytes_;
  // A batch's inline responses are copied at the post, after all are built: one buffer each.
  std::uint8_t* staged =
      inline_data && count == 0
          ? inline_response_
          : staging_.data() + (std::size_t{ring.id} * (staging_mask_ + 1) + (seq & staging_mask_)) *
                                  (kResponseHeaderBytes + kMaxValueBytes);
  // The header [id][status][pad][LEN] as one little-endian word.
  static_assert(std::endian::native == std::endian::little, "the response header is built as one word");
  const std::uint64_t header = item.request.id | std::uint64_t{item.status} << 32 | std::uint64_t{len} << 48;
  std::memcpy(staged, &header, kResponseHeaderBytes);
  CopyValue(staged + kResponseHeaderBytes, item.value, len);
  sge.addr = reinterpret_cast<std::uintptr_t>(staged);
  sge.length = kResponseHeaderBytes + len;
  wr.wr_id = ring.WrId(seq);
  wr.send_flags = (inline_data ? IBV_SEND_INLINE : 0) | (ring.SignalInOrder(seq) ? IBV_SEND_SIGNALED : 0);
  const Destination& to = destinations_[item.client];
  wr.wr.ud.ah = to.ah;
  wr.wr.ud.remote_qpn = to.qpn;
}

inline void Worker::PostResponses(std::uint32_t count) {
  if (count == 0) return;
  SendRing& ring = rings_[next_qp_];
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(ring.qp, &wrs_[0], &bad);
  if (error_number != 0) FailErrno("ibv_post_send (HERD responses)", error_number);
  ring.posted += count;
  ++stats_.doorbells;
  if (++next_qp_ == queues_) next_qp_ = 0;
  // Room for the next batch on the next QP before building it.
  while (!rings_[next_qp_].HasRoom(kMaxBatch)) ReapSends(send_cq_.get(), rings_.data(), "HERD responses");
}

std::uint8_t* Worker::SlotOf(std::uint32_t client, std::uint32_t w) const {
  return region_ + server_.layout_.Slot(id_, client, w) * kSlotStrideBytes;
}

bool Worker::Detect(const std::uint8_t* slot, std::uint32_t client, Item& item) {
  item.kind = ParsePresentRequest(slot, id_, server_.layout_.workers, &item.request, item.value_copy);
  item.client = client;
  if (item.kind == RequestKind::kGet || item.kind == RequestKind::kPut) return true;
  ++(item.kind == RequestKind::kMalformed ? stats_.malformed : stats_.torn);
  item.kind = RequestKind::kEmpty;
  return false;
}

void Worker::ServeOneByOne(const std::atomic<bool>& stop) {
  const std::uint32_t window = server_.layout_.window, clients = server_.layout_.clients;
  const std::uint32_t gap = pipeline_gap_;
  stats_.pipeline_gap = gap;
  // A ring of items, `pushes` counting its turns: this turn's item (the fresh request or a
  // no-op) goes to pushes % kPipelineItems; the item `gap` pushes older has its stage 1,
  // the one 2 x gap older is answered. The rest wait between stages, or are answered.
  Item pipeline[kPipelineItems];
  std::uint32_t pushes = 0, held = 0;  // requests in the pipeline, not yet answered
  // The worker's slots are contiguous, client by client: polling walks them in address
  // order, and a poll that finds nothing costs a load, a compare, the walk and the idle
  // count, in locals.
  std::uint8_t* const first = SlotOf(0, 0);
  std::uint8_t* slot = first;
  std::uint32_t client = 0, w = 0;
  // A sweep of every slot that found nothing means that no request will push the ones in
  // the pipeline soon (their clients wait for these answers), so a no-op comes then, not
  // after HERD's 100 empty polls: with few clients (1 x W=4) the last requests of a window
  // otherwise wait out 100 polls, and the client with them.
  const std::uint32_t noop_after = std::min(kEmptyPollsBeforeNoop, clients * window);
  std::uint32_t idle = 0, next_noop = noop_after;  // empty polls in a row; the next no-op's
  for (;;) {
    std::uint8_t* const polled = slot;
    const std::uint32_t polled_client = client;
    slot += kSlotStrideBytes;
    if (++w == window) {
      w = 0;
      if (++client == clients) {
        client = 0;
        slot = first;
        if (stop.load(std::memory_order_relaxed)) break;
      }
    }
    Item& fresh = pipeline[pushes % kPipelineItems];
    const bool found = RequestPresent(polled);
    if (found) {
      idle = 0;
      next_noop = noop_after;
      if (!Detect(polled, polled_client, fresh)) {  // malformed or torn: dropped
        ClearRequest(polled);
        continue;
      }
      ++held;
      // The sweep's next slot, if it holds a request: its bucket starts loading a push
      // before the request's detection (unchecked: only an address to prefetch).
      if (RequestPresent(slot)) cache_->PrefetchBucket(PolledKey(slot));
    } else {
      if ((++idle & (kIdlePollsBeforeYield - 1)) == 0) sched_yield();
      if (idle != next_noop) continue;
      next_noop += noop_after;
      if (held == 0) continue;  // nothing in the pipeline: nothing to push
      ++stats_.noops;
      fresh.kind = RequestKind::kEmpty;
    }
    Item& oldest = pipeline[(pushes - 2 * gap) % kPipelineItems];
    if (oldest.kind != RequestKind::kEmpty) {
      Stage2(oldest);
      BuildResponse(oldest, 0);
      PostResponses(1);
      oldest.kind = RequestKind::kEmpty;  // answered
      --held;
    }
    // The fresh request's slot is cleared after the oldest's answer, not before: the post's
    // locked instructions wait for every earlier store, and the store to the slot waits
    // for the line the client holds (its WRITE put it there), a cross-core round trip on
    // the answer's path. The fresh request is answered 2 x gap pushes from now, so its
    // client writes nothing into the slot until then, and the sweep comes back to it only
    // after this turn.
    if (found) ClearRequest(polled);
    Stage1(pipeline[(pushes - gap) % kPipelineItems]);
    Stage0(fresh);
    ++pushes;
  }
}

void Worker::ServeBatched(const std::atomic<bool>& stop) {
  const RegionLayout& layout = server_.layout_;
  std::vector<std::uint32_t> next_w(layout.clients, 0);
  std::vector<Item> batch(kMaxBatch);
  const std::uint32_t most = std::min<std::uint32_t>(kMaxBatch, layout.clients);
  std::uint32_t idle = 0;
  for (std::uint64_t sweep = 0;; ++sweep) {
    if ((sweep & kStopCheckMask) == 0 && stop.load(std::memory_order_relaxed)) break;
    std::uint32_t n = 0;
    for (std::uint32_t c = 0; c < layout.clients && n < most; ++c) {
      for (std::uint32_t k = 0; k < layout.window; ++k) {
        const std::uint32_t w = (next_w[c] + k) % layout.window;
        std::uint8_t* const slot = SlotOf(c, w);
        if (!RequestPresent(slot)) continue;
        const bool kept = Detect(slot, c, batch[n]);  // false: malformed or torn, dropped
        ClearRequest(slot);  // this sweep answers it
        if (!kept) continue;
        next_w[c] = (w + 1) % layout.window;
        Stage0(batch[n]);
        ++n;
        break;
      }
    }
    if (n == 0) {
      if (++idle % kIdleSweepsBeforeYield == 0) sched_yield();
      continue;
    }
    idle = 0;
    for (std::uint32_t i = 0; i < n; ++i) Stage1(batch[i]);
    std::uint32_t count = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
      Stage2(batch[i]);
      BuildResponse(batch[i], count);
      wrs_[count].next = &wrs_[count + 1];
      ++count;
    }
    wrs_[count - 1].next = nullptr;  // one at a time, wrs_[0].next stays null (Setup)
    PostResponses(count);
  }
}

void Worker::Serve(const std::atomic<bool>& stop) {
  while (!rings_[next_qp_].HasRoom(kMaxBatch)) ReapSends(send_cq_.get(), rings_.data(), "HERD responses");
  if (server_.o_.batching) {
    ServeBatched(stop);
  } else {
    ServeOneByOne(stop);
  }
}

Report Server::Run() {
  ConnectClients();
  for (std::uint32_t s = 0; s < layout_.workers; ++s) workers_.push_back(std::make_unique<Worker>(*this, s));
  // Workers build their partitions in parallel (preloading is most of the setup time).
  RunPinnedThreads(session_, static_cast<int>(layout_.workers), [&](int s) { workers_[s]->Setup(); });
  session_.Barrier("ready");
  std::atomic<bool> stop{false};
  const std::uint64_t serve_start_ns = MonotonicNs();
  ServeBetweenBarriers(session_, static_cast<int>(layout_.workers), stop, "",
                       [&](int s) { workers_[s]->Serve(stop); });
  const double served_s = static_cast<double>(MonotonicNs() - serve_start_ns) / 1e9;

  Report report = CollectClientResults(session_);
  json workers = json::array();
  std::uint64_t malformed = 0;
  for (std::uint32_t s = 0; s < layout_.workers; ++s) {
    const WorkerStats stats = workers_[s]->Stats();
    workers.push_back(stats.Json(s));
    workers.back()["mops"] = static_cast<double>(stats.requests) / served_s / 1e6;
    malformed += stats.malformed;
  }
  if (o_.core >= 0) {
    // herd14 Fig. 14's per-core load: the row is this worker's requests over the serving
    // interval (warm-up included: the server does not know the clients' measured interval).
    if (o_.core >= static_cast<int>(layout_.workers)) {
      Fail("--core ", o_.core, " names no worker: valid 0..", layout_.workers - 1, " (--workers ", layout_.workers, ")");
    }
    ResultRow& row = report.rows.front();
    row.ops = workers_[static_cast<std::size_t>(o_.core)]->Stats().requests;
    row.duration_s = served_s;
    row.per_peer = json::array();
    report.notes.push_back("the row is worker " + std::to_string(o_.core) + "'s load (--core)");
  }
  report.server = {{"workers", workers}, {"malformed_requests", malformed}};
  if (malformed != 0) report.notes.push_back(std::to_string(malformed) + " malformed requests counted and dropped");
  return report;
}

}  // namespace
}  // namespace herd

void CheckHerd(Options& o) {
  if (o.window > static_cast<int>(kMaxWindow)) Fail("--window ", o.window, " exceeds HERD's limit of ", kMaxWindow);
  if (o.key_size != 16) Fail("--key-size ", o.key_size, ": HERD keys are 16-byte keyhashes (16)");
}

Report RunHerdServer(Session& session) { return herd::Server(session).Run(); }

}  // namespace rdmalab::kv
