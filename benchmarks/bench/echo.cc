// echo: request/response round trips between N clients and one server (herd14 Fig. 5 and 7).
// A client keeps --tx-depth requests outstanding, one per window slot. Requests arrive as
// WRITEs into per-client slots of the server's request region (the server polls each
// slot's last byte, as HERD does) or as SENDs (the server polls its RECV CQ); the server
// copies the request into a staging slot, optionally makes --accesses random reads into a
// table (prefetching those of the next requests with --prefetch), and echoes the bytes
// back by WRITE into the client's response slot or by SEND, over RC, UC or UD.
// Clients time every round trip; the server aggregates the clients' rates per peer.
#include <infiniband/verbs.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/echo_client.h"
#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/hot_loop.h"
#include "benchmarks/bench/tput_plan.h"
#include "rdma/affinity.h"
#include "rdma/connect.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

constexpr int kMaxAccesses = 64;               // --accesses' bound in the flag table
constexpr std::uint32_t kPrefetchDepth = 2;    // requests whose lines are in flight while one is served
constexpr std::uint32_t kImmClientShift = 16;  // a SEND request's immediate: client << 16 | window slot
constexpr std::uint32_t kMaxWindow = 1u << kImmClientShift;
constexpr int kMaxClients = 1 << (32 - kImmClientShift);
constexpr std::uint64_t kStopCheckMask = 0x3FF;  // spins between looks at the stop flag and the deadline
// The QP pairs between the server and a client (Session::ConnectQps); echo has no READ or atomic.
constexpr std::uint32_t kRequestLink = 0;
constexpr std::uint32_t kResponseLink = 1;
constexpr std::uint8_t kEchoRdAtomic = 1;
static_assert(kPrefetchDepth >= 1, "the pipeline holds at least the request being prefetched");

std::uint8_t Marker(std::uint64_t seq) { return static_cast<std::uint8_t>(seq % 255 + 1); }

// Derived identically on both sides from the symmetric options.
struct EchoShape {
  ibv_qp_type request_type = IBV_QPT_RC;
  ibv_qp_type response_type = IBV_QPT_UD;
  bool request_write = true;
  bool response_write = false;
  bool shared_qp = false;  // requests and responses share one connected QP per client
  bool uses_ud = false;
  std::uint32_t window = 1;
  std::uint32_t slot_bytes = 64;  // request, staging and response slots
  std::uint32_t recv_bytes = 64;  // a RECV buffer: a slot, plus the GRH on UD
  std::uint32_t inline_bytes = 0;
};

EchoShape MakeShape(const Options& o) {
  EchoShape shape;
  shape.request_type = ParseQpType(o.connection);
  shape.response_type = ParseQpType(o.response_connection);
  shape.request_write = o.request == "write";
  shape.response_write = o.response == "write";
  shape.shared_qp = shape.request_type == shape.response_type && shape.request_type != IBV_QPT_UD;
  shape.uses_ud = shape.request_type == IBV_QPT_UD || shape.response_type == IBV_QPT_UD;
  shape.window = static_cast<std::uint32_t>(o.tx_depth);
  const std::uint32_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  shape.slot_bytes = SlotBytes(max_size);
  shape.recv_bytes = shape.slot_bytes + kUdGrhBytes;
  shape.inline_bytes = std::min<std::uint32_t>(static_cast<std::uint32_t>(o.inline_size), max_size);
  return shape;
}

// A request detected by the server: whose, which window slot, and its random table lines.
struct Pending {
  std::uint32_t client = 0;
  std::uint32_t slot = 0;
  std::uint64_t lines[kMaxAccesses] = {};
};

struct ServerClient {
  int thread = 0;
  // Requests: connected (and responses when shared), or a UD QP of this client's own, so
  // that no receive queue has two senders.
  QpPtr request_qp;
  QpPtr response_qp;  // connected responses on a QP of their own
  std::uint32_t ring = 0;
  AhPtr ah;
  std::uint32_t remote_ud_qpn = 0;
  RemoteRegion responses;  // where WRITE responses land
};

struct ServerThread {
  CqPtr send_cq, recv_cq;
  QpPtr ud_qp;  // the thread's UD QP for UD responses
  std::vector<std::uint32_t> clients;
  std::vector<SendRing> rings;  // one per connected response QP, or the UD QP's
  Pending pipeline[kPrefetchDepth + 1];
  std::uint32_t head = 0, queued = 0;
  std::uint64_t rng = 1;
  std::uint64_t served = 0;
  std::uint64_t sink = 0;
};

class EchoRun {
 public:
  explicit EchoRun(Session& session) : session_(session), o_(session.options()), shape_(MakeShape(o_)) {}
  Report Run();

 private:
  void CheckPathMtu() const;
  QpCaps Caps(ibv_qp_type type, std::uint32_t send_depth, std::uint32_t recv_depth) const;
  void SetupServer();
  void ConnectClients();
  void SetupClient();
  void ServerThreadLoop(ServerThread& thread, std::uint32_t size);
  void Accept(ServerThread& thread, std::uint32_t client, std::uint32_t slot, const std::uint8_t* request,
              std::uint32_t size, volatile std::uint8_t* polled, std::uint64_t recv_buffer);
  void ServeOldest(ServerThread& thread, std::uint32_t size);
  void Respond(ServerThread& thread, std::uint32_t client, std::uint32_t slot, std::uint32_t size);
  void PostServerRecv(std::uint64_t buffer);
  void PostClientRecv(std::uint64_t buffer);
  void PostRequest(std::uint32_t slot, std::uint64_t seq, std::uint32_t size, std::uint64_t now);
  int CollectResponses(std::uint32_t size, std::uint32_t* slots);
  void CheckResponse(std::uint32_t slot, const std::uint8_t* data, std::uint32_t size);
  ResultRow MeasureClient(std::uint32_t size);
  ResultRow ServeSize(std::size_t index, std::uint32_t size);

  Session& session_;
  const Options& o_;
  EchoShape shape_;
  // Server.
  // Threads before clients: members go in reverse, so the clients' QPs are destroyed before
  // the threads' CQs they complete into (a CQ still in use cannot be destroyed).
  std::vector<ServerThread> threads_;
  std::vector<ServerClient> clients_;
  Region requests_;  // write requests: per client, window slots; send requests: RECV buffers
  Region staging_;   // per client, window slots: what the responses carry
  Buffer table_;     // --accesses reads land here
  std::uint64_t table_words_ = 0;
  std::atomic<bool> stop_{false};
  // Client.
  CqPtr client_send_cq_, client_recv_cq_;  // before the QPs, which are destroyed first
  QpPtr request_qp_, response_qp_, ud_qp_;
  ibv_qp* response_recv_qp_ = nullptr;  // where response RECVs are posted
  SendRing request_ring_;
  Region local_;  // [window request slots][window response slots of recv_bytes]
  RemoteRegion server_requests_;
  AhPtr server_ah_;
  std::uint32_t server_ud_qpn_ = 0;
  EchoClientWindow client_;  // the window and latency samples of the size being measured
  std::uint64_t checked_ = 0, bad_bytes_ = 0, bad_messages_ = 0;
};

void EchoRun::CheckPathMtu() const {
  const std::uint32_t mtu = MtuBytes(session_.address().mtu);
  const std::uint32_t max_size = *std::max_element(o_.sizes.begin(), o_.sizes.end());
  if (shape_.uses_ud && max_size > mtu) {
    Fail("--size ", max_size, " over UD exceeds the path MTU of ", mtu, " B: a UD message is one packet");
  }
}

QpCaps EchoRun::Caps(ibv_qp_type type, std::uint32_t send_depth, std::uint32_t recv_depth) const {
  QpCaps caps;
  caps.type = type;
  caps.send_depth = send_depth;
  caps.recv_depth = std::max<std::uint32_t>(recv_depth, 1);
  caps.inline_bytes = shape_.inline_bytes;
  return caps;
}

void EchoRun::SetupServer() {
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
  const auto clients = static_cast<std::uint32_t>(peers.size());
  const std::uint32_t window = shape_.window;
  const auto cq_mod = static_cast<std::uint32_t>(o_.cq_mod);
  threads_.resize(static_cast<std::size_t>(o_.threads));
  clients_.resize(clients);
  requests_ = MakeRegion(session_, std::uint64_t{clients} * window * shape_.recv_bytes);
  staging_ = MakeRegion(session_, std::uint64_t{clients} * window * shape_.slot_bytes);
  if (o_.accesses > 0) {
    table_ = Buffer::Allocate(std::size_t(o_.table_mb) << 20, o_.use_hugepages, DeviceNumaNode(device.name()));
    table_words_ = table_.size() / sizeof(std::uint64_t);
  }
  session_.Put("region", requests_.Describe());
  // One QP per client for connected legs (created by this thread, HERD's initializer), one
  // UD QP per server thread for datagram legs.
  const std::uint32_t connected_send_depth = window + cq_mod;
  json endpoints = json::object();
  for (std::size_t t = 0; t < threads_.size(); ++t) {
    ServerThread& thread = threads_[t];
    thread.rng = o_.seed * 0x9E3779B97F4A7C15ull + t + 1;
    for (std::uint32_t c = static_cast<std::uint32_t>(t); c < clients; c += static_cast<std::uint32_t>(o_.threads)) {
      thread.clients.push_back(c);
    }
    const auto mine = static_cast<std::uint32_t>(std::max<std::size_t>(1, thread.clients.size()));
    const std::uint32_t ud_send_depth =
        std::min<std::uint32_t>(static_cast<std::uint32_t>(device.attr().max_qp_wr), mine * window + cq_mod);
    if (shape_.response_type == IBV_QPT_UD && ud_send_depth < cq_mod + 1) {
      Fail("--cq-mod ", cq_mod, " needs a UD send queue of ", cq_mod + 1, " WRs; ", device.name(), " allows ",
           device.attr().max_qp_wr);
    }
    thread.send_cq = CreateCq(device, static_cast<int>(mine * (connected_send_depth + ud_send_depth)));
    thread.recv_cq = CreateCq(device, static_cast<int>(mine * window + 1));
    if (shape_.response_type == IBV_QPT_UD) {
      thread.ud_qp = CreateQp(device, session_.pd(), thread.send_cq.get(), thread.recv_cq.get(),
                              Caps(IBV_QPT_UD, ud_send_depth, 1));
      ActivateUdQp(thread.ud_qp.get(), device, 0);
      thread.rings.push_back({thread.ud_qp.get(), 0, ud_send_depth, cq_mod});
    }
    for (std::uint32_t c : thread.clients) {
      ServerClient& client = clients_[c];
      client.thread = static_cast<int>(t);
      const std::string& peer = peers[c];
      client.request_qp = CreateQp(device, session_.pd(), thread.send_cq.get(), thread.recv_cq.get(),
                                   Caps(shape_.request_type, connected_send_depth, shape_.request_write ? 1 : window));
      if (shape_.request_type == IBV_QPT_UD) {
        ActivateUdQp(client.request_qp.get(), device, 0);
        endpoints["request"][peer] = ToJson(Endpoint{client.request_qp->qp_num, 0, session_.address()});
      }
      if (shape_.response_type != IBV_QPT_UD && !shape_.shared_qp) {
        client.response_qp = CreateQp(device, session_.pd(), thread.send_cq.get(), thread.recv_cq.get(),
                                      Caps(shape_.response_type, connected_send_depth, 1));
      }
      if (shape_.response_type != IBV_QPT_UD) {
        ibv_qp* qp = shape_.shared_qp ? client.request_qp.get() : client.response_qp.get();
        client.ring = static_cast<std::uint32_t>(thread.rings.size());
        thread.rings.push_back({qp, client.ring, connected_send_depth, cq_mod});
      }
    }
  }
  session_.Put("endpoints", endpoints);
  ConnectClients();
}

// Connects every client's QPs, learns where its responses go, and posts the RECVs of SEND requests.
void EchoRun::ConnectClients() {
  const Device& device = session_.device();
  const auto peers = session_.PeerNames();
  const std::uint32_t window = shape_.window;
  std::vector<QpLink> links;
  for (std::uint32_t c = 0; c < clients_.size(); ++c) {
    if (shape_.request_type != IBV_QPT_UD) links.push_back({peers[c], kRequestLink, clients_[c].request_qp.get()});
    if (clients_[c].response_qp) links.push_back({peers[c], kResponseLink, clients_[c].response_qp.get()});
  }
  session_.ConnectQps(links, kEchoRdAtomic);
  for (std::uint32_t c = 0; c < clients_.size(); ++c) {
    ServerClient& client = clients_[c];
    const json theirs = session_.Get(peers[c], "endpoints");
    if (shape_.response_type == IBV_QPT_UD) {
      const Endpoint remote = EndpointFromJson(theirs.at("ud"));
      client.ah = CreateAh(session_.pd(), device, session_.address(), remote.address);
      client.remote_ud_qpn = remote.qpn;
    }
    if (shape_.response_write) client.responses = RemoteRegion::FromJson(session_.Get(peers[c], "region"));
    if (!shape_.request_write) {
      for (std::uint32_t b = 0; b < window; ++b) {
        PostServerRecv(c * window + b);
      }
    }
  }
}

void EchoRun::SetupClient() {
  const Device& device = session_.device();
  const std::uint32_t window = shape_.window;
  const auto cq_mod = static_cast<std::uint32_t>(o_.cq_mod);
  const std::uint32_t send_depth = window + cq_mod;
  local_ = MakeRegion(session_, std::uint64_t{window} * (shape_.slot_bytes + shape_.recv_bytes));
  json region = local_.Describe();
  region["address"] = region["address"].get<std::uint64_t>() + std::uint64_t{window} * shape_.slot_bytes;
  session_.Put("region", region);
  client_send_cq_ = CreateCq(device, static_cast<int>(2 * send_depth));
  client_recv_cq_ = CreateCq(device, static_cast<int>(window + 1));
  json endpoints = json::object();
  if (shape_.uses_ud) {
    const bool receives = shape_.response_type == IBV_QPT_UD;
    ud_qp_ = CreateQp(device, session_.pd(), client_send_cq_.get(), client_recv_cq_.get(),
                      Caps(IBV_QPT_UD, send_depth, receives ? window : 1));
    ActivateUdQp(ud_qp_.get(), device, 0);
    endpoints["ud"] = ToJson(Endpoint{ud_qp_->qp_num, 0, session_.address()});
  }
  if (shape_.request_type != IBV_QPT_UD) {
    request_qp_ = CreateQp(device, session_.pd(), client_send_cq_.get(), client_recv_cq_.get(),
                           Caps(shape_.request_type, send_depth, shape_.shared_qp && !shape_.response_write ? window : 1));
  }
  if (shape_.response_type != IBV_QPT_UD && !shape_.shared_qp) {
    response_qp_ = CreateQp(device, session_.pd(), client_send_cq_.get(), client_recv_cq_.get(),
                            Caps(shape_.response_type, 1, window));
  }
  session_.Put("endpoints", endpoints);
  const json theirs = session_.Get("server/0", "endpoints");
  const std::string self = SelfName(session_);
  std::vector<QpLink> links;
  if (request_qp_) links.push_back({"server/0", kRequestLink, request_qp_.get()});
  if (response_qp_) links.push_back({"server/0", kResponseLink, response_qp_.get()});
  session_.ConnectQps(links, kEchoRdAtomic);
  if (shape_.request_type == IBV_QPT_UD) {
    const Endpoint remote = EndpointFromJson(theirs.at("request").at(self));
    server_ah_ = CreateAh(session_.pd(), device, session_.address(), remote.address);
    server_ud_qpn_ = remote.qpn;
  }
  if (shape_.request_write) server_requests_ = RemoteRegion::FromJson(session_.Get("server/0", "region"));
  ibv_qp* request_qp = request_qp_ ? request_qp_.get() : ud_qp_.get();
  request_ring_ = {request_qp, 0, send_depth, cq_mod};
  response_recv_qp_ = shape_.response_type == IBV_QPT_UD ? ud_qp_.get()
                      : shape_.shared_qp                 ? request_qp_.get()
                                                         : response_qp_.get();
  if (!shape_.response_write) {
    for (std::uint32_t b = 0; b < window; ++b) {
      PostClientRecv(b);
    }
  }
}

void EchoRun::PostServerRecv(std::uint64_t buffer) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(requests_.data() + buffer * shape_.recv_bytes),
              shape_.recv_bytes, requests_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = buffer;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const std::uint64_t client = buffer / shape_.window;
  ibv_qp* qp = clients_[client].request_qp.get();
  PostRecvOrFail(qp, &wr, "echo server");
}

void EchoRun::PostClientRecv(std::uint64_t buffer) {
  const std::uint64_t offset = std::uint64_t{shape_.window} * shape_.slot_bytes + buffer * shape_.recv_bytes;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(local_.data() + offset), shape_.recv_bytes, local_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = buffer;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  PostRecvOrFail(response_recv_qp_, &wr, "echo client");
}


// ---- server ----

void EchoRun::Respond(ServerThread& thread, std::uint32_t client_index, std::uint32_t slot, std::uint32_t size) {
  ServerClient& client = clients_[client_index];
  SendRing& ring = thread.rings[client.ring];
  while (!ring.HasRoom(1)) ReapSends(thread.send_cq.get(), thread.rings.data(), "sending echo responses");
  const std::uint32_t index = client_index * shape_.window + slot;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(staging_.data() + std::uint64_t{index} * shape_.slot_bytes), size,
              staging_.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = ring.WrId(ring.posted);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = (ring.Signaled(ring.posted) ? unsigned{IBV_SEND_SIGNALED} : 0u) |
                  (size <= shape_.inline_bytes ? unsigned{IBV_SEND_INLINE} : 0u);
  if (shape_.response_write) {
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma = {client.responses.address + std::uint64_t{slot} * shape_.recv_bytes, client.responses.rkey};
  } else {
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = slot;
    if (shape_.response_type == IBV_QPT_UD) wr.wr.ud = {client.ah.get(), client.remote_ud_qpn, kUdQkey};
  }
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(ring.qp, &wr, &bad);
  if (error_number != 0) Fail("ibv_post_send (echo response): ", std::strerror(error_number));
  ++ring.posted;
  ++thread.served;
}

void EchoRun::ServeOldest(ServerThread& thread, std::uint32_t size) {
  const Pending& item = thread.pipeline[thread.head];
  const auto* table = reinterpret_cast<const std::uint64_t*>(table_.data());
  for (int a = 0; a < o_.accesses; ++a) thread.sink += table[item.lines[a]];
  Respond(thread, item.client, item.slot, size);
  thread.head = (thread.head + 1) % (kPrefetchDepth + 1);
  --thread.queued;
}

// A request is in: stage its bytes (it is echoed from there), then serve it now or, with
// --prefetch, after the requests behind it have had their table lines prefetched.
void EchoRun::Accept(ServerThread& thread, std::uint32_t client, std::uint32_t slot, const std::uint8_t* request,
                     std::uint32_t size, volatile std::uint8_t* polled, std::uint64_t recv_buffer) {
  std::memcpy(staging_.data() + std::uint64_t{client * shape_.window + slot} * shape_.slot_bytes, request, size);
  // The request's slot or RECV is given back as soon as it is copied, before the response:
  // once the client has the response its next request may come, and must find the slot
  // clear (a late clear would erase it) or a RECV posted (on UC/UD it would be lost).
  if (polled != nullptr) {
    *polled = 0;
  } else {
    PostServerRecv(recv_buffer);
  }
  if (o_.accesses == 0) {
    Respond(thread, client, slot, size);
    return;
  }
  Pending& item = thread.pipeline[(thread.head + thread.queued) % (kPrefetchDepth + 1)];
  ++thread.queued;
  item.client = client;
  item.slot = slot;
  for (int a = 0; a < o_.accesses; ++a) {
    item.lines[a] = static_cast<std::uint64_t>((static_cast<unsigned __int128>(XorShift(thread.rng)) * table_words_) >> 64);
    if (o_.prefetch) __builtin_prefetch(table_.data() + item.lines[a] * sizeof(std::uint64_t));
  }
  if (!o_.prefetch || thread.queued > kPrefetchDepth) ServeOldest(thread, size);
}

void EchoRun::ServerThreadLoop(ServerThread& thread, std::uint32_t size) {
  const std::uint32_t window = shape_.window;
  const std::uint32_t grh = shape_.request_type == IBV_QPT_UD ? kUdGrhBytes : 0;
  const std::uint64_t deadline = DeadlineTicks(session_);
  const auto clients = static_cast<std::uint32_t>(clients_.size());
  thread.served = 0;
  ibv_wc completions[kPollBatch];
  for (std::uint64_t spins = 1;; ++spins) {
    bool found = false;
    if (shape_.request_write) {
      for (std::uint32_t client : thread.clients) {
        std::uint8_t* slots = requests_.data() + std::uint64_t{client} * window * shape_.recv_bytes;
        for (std::uint32_t slot = 0; slot < window; ++slot) {
          std::uint8_t* request = slots + std::uint64_t{slot} * shape_.recv_bytes;
          volatile std::uint8_t* last = request + size - 1;
          if (*last == 0) continue;
          std::atomic_thread_fence(std::memory_order_acquire);
          Accept(thread, client, slot, request, size, last, 0);
          found = true;
        }
      }
    } else {
      const int n = ibv_poll_cq(thread.recv_cq.get(), kPollBatch, completions);
      if (n < 0) Fail("ibv_poll_cq failed on the echo server's RECV CQ");
      for (int i = 0; i < n; ++i) {
        const ibv_wc& wc = completions[i];
        if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving echo requests");
        const std::uint32_t client = wc.imm_data >> kImmClientShift;
        const std::uint32_t slot = wc.imm_data & (kMaxWindow - 1);
        if (client >= clients || slot >= window || wc.byte_len != size + grh) {
          Fail("malformed echo request: immediate ", wc.imm_data, ", ", wc.byte_len, " bytes (expected client < ",
               clients, ", slot < ", window, ", ", size + grh, " bytes)");
        }
        const auto buffer = static_cast<std::uint32_t>(wc.wr_id);
        Accept(thread, client, slot, requests_.data() + std::uint64_t{buffer} * shape_.recv_bytes + grh, size,
               nullptr, buffer);
        found = true;
      }
    }
    // An idle sweep serves a prefetched request: nothing newer is coming to hide it behind.
    if (!found && thread.queued > 0) ServeOldest(thread, size);
    if ((spins & kStopCheckMask) == 0) {
      if (stop_.load(std::memory_order_relaxed) || g_abort.load(std::memory_order_relaxed)) break;
      if (session_.clock().Now() >= deadline) Fail("--timeout ", o_.timeout_s, " s passed while serving echo requests");
    }
  }
  while (thread.queued > 0) ServeOldest(thread, size);
}

ResultRow EchoRun::ServeSize(std::size_t index, std::uint32_t size) {
  const std::string suffix = "/" + std::to_string(index);
  ServeBetweenBarriers(session_, o_.threads, stop_, suffix,
                       [&](int t) { ServerThreadLoop(threads_[static_cast<std::size_t>(t)], size); });
  ResultRow row;
  row.size_bytes = size;
  row.payload_bytes_per_op = size;
  std::uint64_t served = 0;
  for (std::size_t t = 0; t < threads_.size(); ++t) {
    served += threads_[t].served;
    row.per_thread.push_back({{"thread", t}, {"served_requests", threads_[t].served},
                              {"access_checksum", threads_[t].sink}});
  }
  for (const auto& peer : session_.PeerNames()) {
    const json result = session_.Get(peer, "result" + suffix);
    const auto ops = result.at("ops").get<std::uint64_t>();
    const double duration = result.at("duration_s").get<double>();
    row.ops += ops;
    row.duration_s = std::max(row.duration_s, duration);
    row.per_peer.push_back({{"peer", peer}, {"ops", ops}, {"mops", duration > 0 ? ops / duration / 1e6 : 0.0}});
  }
  row.extra["served_requests"] = served;
  return row;
}

// ---- client ----

void EchoRun::PostRequest(std::uint32_t slot, std::uint64_t seq, std::uint32_t size, std::uint64_t now) {
  std::uint8_t* request = local_.data() + std::uint64_t{slot} * shape_.slot_bytes;
  if (o_.validate) FillPattern(request, size - 1, static_cast<std::uint32_t>(seq));
  request[size - 1] = Marker(seq);
  while (!request_ring_.HasRoom(1)) ReapSends(client_send_cq_.get(), &request_ring_, "sending echo requests");
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(request), size, local_.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = request_ring_.WrId(request_ring_.posted);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = (request_ring_.Signaled(request_ring_.posted) ? unsigned{IBV_SEND_SIGNALED} : 0u) |
                  (size <= shape_.inline_bytes ? unsigned{IBV_SEND_INLINE} : 0u);
  if (shape_.request_write) {
    const std::uint64_t offset = (std::uint64_t{static_cast<std::uint32_t>(session_.index())} * shape_.window + slot) *
                                 shape_.recv_bytes;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma = {server_requests_.address + offset, server_requests_.rkey};
  } else {
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = (static_cast<std::uint32_t>(session_.index()) << kImmClientShift) | slot;
    if (shape_.request_type == IBV_QPT_UD) wr.wr.ud = {server_ah_.get(), server_ud_qpn_, kUdQkey};
  }
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(request_ring_.qp, &wr, &bad);
  if (error_number != 0) Fail("ibv_post_send (echo request): ", std::strerror(error_number));
  ++request_ring_.posted;
  client_.Post(slot, seq, now);
}

void EchoRun::CheckResponse(std::uint32_t slot, const std::uint8_t* data, std::uint32_t size) {
  const std::uint64_t seq = client_.Sequence(slot);
  ++checked_;
  const std::uint64_t bad = PatternMismatches(data, size - 1, static_cast<std::uint32_t>(seq)) +
                            (data[size - 1] != Marker(seq));
  bad_bytes_ += bad;
  bad_messages_ += bad != 0;
}

// Writes the window slots whose responses arrived into `slots`; returns how many.
int EchoRun::CollectResponses(std::uint32_t size, std::uint32_t* slots) {
  int found = 0;
  std::uint8_t* responses = local_.data() + std::uint64_t{shape_.window} * shape_.slot_bytes;
  if (shape_.response_write) {
    for (std::uint32_t slot = 0; slot < shape_.window; ++slot) {
      if (!client_.Outstanding(slot)) continue;
      std::uint8_t* response = responses + std::uint64_t{slot} * shape_.recv_bytes;
      volatile std::uint8_t* last = response + size - 1;
      if (*last == 0) continue;
      std::atomic_thread_fence(std::memory_order_acquire);
      if (o_.validate) CheckResponse(slot, response, size);
      *last = 0;
      slots[found++] = slot;
    }
    return found;
  }
  ibv_wc completions[kPollBatch];
  const int n = ibv_poll_cq(client_recv_cq_.get(), kPollBatch, completions);
  if (n < 0) Fail("ibv_poll_cq failed on the echo client's RECV CQ");
  const std::uint32_t grh = shape_.response_type == IBV_QPT_UD ? kUdGrhBytes : 0;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = completions[i];
    if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving echo responses");
    const std::uint32_t slot = wc.imm_data;
    if (slot >= shape_.window || !client_.Outstanding(slot)) {
      Fail("echo response for window slot ", slot, ", which has no request outstanding (window ", shape_.window, ")");
    }
    const auto buffer = static_cast<std::uint32_t>(wc.wr_id);
    if (o_.validate) {
      if (wc.byte_len != size + grh) {
        ++bad_messages_;
        ++checked_;
      } else {
        CheckResponse(slot, responses + std::uint64_t{buffer} * shape_.recv_bytes + grh, size);
      }
    }
    PostClientRecv(buffer);
    slots[found++] = slot;
  }
  return found;
}

ResultRow EchoRun::MeasureClient(std::uint32_t size) {
  const TscClock& clock = session_.clock();
  const std::uint64_t warmup_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o_.warmup_s * 1e9));
  const std::uint64_t duration_ticks = clock.NsToTicks(static_cast<std::uint64_t>(o_.duration_s * 1e9));
  const std::uint64_t iterations = o_.duration_s > 0 ? 0 : IterationsOrDefault(o_, 100'000);
  const std::uint64_t deadline = DeadlineTicks(session_);
  ResultRow row;
  row.size_bytes = size;
  row.payload_bytes_per_op = size;
  row.latency_ns = std::make_unique<LatencyHistogram>();
  row.latency_kind = "rtt";
  const std::uint32_t window = shape_.window;
  std::vector<std::uint32_t> arrived(std::max<std::uint32_t>(window, kPollBatch));
  client_ = EchoClientWindow(window, clock, *row.latency_ns);
  std::uint64_t seq = 0;
  const std::uint64_t start = session_.clock().Now();
  for (std::uint32_t slot = 0; slot < window; ++slot) PostRequest(slot, seq++, size, session_.clock().Now());
  MeasuredInterval interval(start, warmup_ticks, duration_ticks, iterations);
  std::uint64_t now = start;
  while (client_.in_flight() > 0) {
    const int n = CollectResponses(size, arrived.data());
    now = session_.clock().Now();
    for (int i = 0; i < n; ++i) {
      const std::uint32_t slot = arrived[i];
      client_.Answer(slot, now, interval.counting());
      if (!interval.stopping()) PostRequest(slot, seq++, size, session_.clock().Now());
    }
    interval.Update(now, client_.measured(), clock, row);
    if (now >= deadline) {
      Fail("--timeout ", o_.timeout_s, " s passed with ", client_.in_flight(), " echo requests unanswered (",
           client_.measured(), " measured); is the server alive?");
    }
    if (g_abort.load(std::memory_order_relaxed)) Fail("aborted");
  }
  return row;
}

Report EchoRun::Run() {
  CheckPathMtu();
  if (session_.is_server()) {
    SetupServer();
  } else {
    SetupClient();
  }
  session_.Barrier("connected");
  Report report;
  for (std::size_t i = 0; i < o_.sizes.size(); ++i) {
    const std::uint32_t size = o_.sizes[i];
    const std::string suffix = "/" + std::to_string(i);
    if (session_.is_server()) {
      report.rows.push_back(ServeSize(i, size));
      std::memset(requests_.data(), 0, requests_.buffer.size());
    } else {
      session_.Barrier("start" + suffix);
      report.rows.push_back(MeasureClient(size));
      const ResultRow& row = report.rows.back();
      session_.Put("result" + suffix, {{"ops", row.ops}, {"duration_s", row.duration_s}});
      session_.Barrier("done" + suffix);
      std::memset(local_.data() + std::uint64_t{shape_.window} * shape_.slot_bytes, 0,
                  std::uint64_t{shape_.window} * shape_.recv_bytes);
    }
    // Slots are cleared on both sides before the next size polls a different last byte.
    session_.Barrier("reset" + suffix);
  }
  session_.Barrier("finished");
  if (session_.is_server()) {
    report.validation = {{"enabled", o_.validate}, {"checked_by", "clients"}};
  } else {
    report.validation = {{"enabled", o_.validate}, {"checked_messages", checked_}, {"bad_bytes", bad_bytes_},
                         {"bad_messages", bad_messages_}, {"ok", bad_bytes_ == 0 && bad_messages_ == 0}};
  }
  return report;
}

}  // namespace

void CheckEcho(Options& options) {
  if (!options.verb.empty()) {
    Fail("--verb ", options.verb, " does not apply to echo: choose --request write|send and --response write|send");
  }
  if (options.request == "write" && options.connection == "UD") {
    Fail("--request write over -c UD is impossible: UD carries only SEND (use -c RC or UC, or --request send)");
  }
  if (options.response == "write" && options.response_connection == "UD") {
    Fail("--response write over --response-connection UD is impossible: UD carries only SEND "
         "(use --response-connection RC or UC, or --response send)");
  }
  if (options.header_only) Fail("--header-only does not apply to echo: an echo carries its request's bytes back");
  if (options.direction != "inbound") {
    Fail("--direction ", options.direction, " does not apply to echo: clients send requests, the server answers");
  }
  if (options.post_list != 1) Fail("--post_list ", options.post_list, " with echo: each request is posted on its own (1)");
  if (options.qp != 1) Fail("--qp ", options.qp, " with echo: one request QP per client (1)");
  if (options.sge != 1) Fail("--sge ", options.sge, " with echo: requests and responses are one SGE (1)");
  if (static_cast<std::uint32_t>(options.tx_depth) >= kMaxWindow) {
    Fail("--tx-depth ", options.tx_depth, " with echo: the window must be below ", kMaxWindow);
  }
  if (options.peers > kMaxClients) Fail("--peers ", options.peers, " with echo: at most ", kMaxClients, " clients");
  if (options.prefetch && options.accesses == 0) {
    Fail("--prefetch with --accesses 0: there is nothing to prefetch; give --accesses N > 0");
  }
  if (options.accesses > kMaxAccesses) Fail("--accesses ", options.accesses, " exceeds ", kMaxAccesses);
  DefaultSizes(options, 32);
  for (auto size : options.sizes) {
    if (size == 0) Fail("--size 0 with echo: a request is detected by its last byte, so at least 1 byte");
  }
}

Report RunEcho(Session& session) { return EchoRun(session).Run(); }

}  // namespace rdmalab::bench
