// The server of every READ-based system: it registers the store region (preloaded), connects
// an RC QP per client (and a UC QP for Pilaf's and FaRM's PUTs), and runs --workers threads,
// client c served by worker c mod NS. A worker takes PUTs (Pilaf: RECVs of UC SENDs; FaRM,
// HydraDB: its clients' circular buffers, polled by the next slot's stamp), stores the value
// in the key's entry (FaRM full: inserts or updates it in the hopscotch table, or answers that
// the table is full) and answers (Pilaf: a UC SEND; FaRM: a UC WRITE; HydraDB: an RC WRITE,
// all inline, signaled one in --cq-mod). GETs and DrTM's atomics never reach its CPU.
#include <infiniband/verbs.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "kv/core/client_process.h"
#include "kv/core/systems.h"
#include "kv/remote/client.h"
#include "kv/remote/connection.h"
#include "kv/remote/remote.h"
#include "rdma/connect.h"
#include "rdma/error.h"
#include "rdma/send_ring.h"
#include "rdma/session.h"

namespace rdmalab::kv {
namespace remote {
namespace {

using nlohmann::json;

constexpr std::uint64_t kStopCheckMask = 0x3FF;
// Sweeps without a message before a worker yields its CPU (clients may share it: 2 cores).
constexpr std::uint32_t kIdleSweepsBeforeYield = 1u << 8;

struct ServedClient {
  QpPtr rc, uc;
  std::uint32_t ring = 0;  // its answer ring among its worker's (on uc: Pilaf, FaRM; rc: HydraDB)
  RemoteRegion answer_slots;
  std::uint64_t taken = 0;  // messages taken from its circular buffer
};

struct WorkerStats {
  std::uint64_t messages = 0, puts = 0, lookups = 0, answers = 0, malformed = 0, table_full = 0;
  json Json(std::uint32_t worker) const {
    return {{"worker", worker}, {"messages", messages}, {"puts", puts}, {"lookups", lookups},
            {"answers", answers}, {"malformed", malformed}, {"table_full", table_full}};
  }
};

class Server;

class Worker {
 public:
  Worker(Server& server, std::uint32_t id);
  void Serve(const std::atomic<bool>& stop);
  const WorkerStats& stats() const { return stats_; }
  ibv_cq* send_cq() const { return send_cq_.get(); }
  ibv_cq* recv_cq() const { return recv_cq_.get(); }
  std::vector<std::uint32_t> clients;  // global ids
  std::vector<SendRing> rings;         // answer rings, by local client index (ReapSends' array)

 private:
  // Takes one message; returns its answer's id, status and entry offset in `answer`.
  bool Take(const std::uint8_t* message, std::uint32_t bytes, Answer& answer);
  void PostAnswer(std::uint32_t local, const Answer& answer);
  void ServeSends(const std::atomic<bool>& stop);
  void ServeRings(const std::atomic<bool>& stop);

  Server& server_;
  std::uint32_t id_;
  CqPtr send_cq_, recv_cq_;
  WorkerStats stats_;
};

class Server {
 public:
  explicit Server(Session& session);
  Report Run();

  Session& session_;
  const Options& o_;
  Layout layout_;
  Region store_;
  Region recvs_;  // Pilaf: per client 2W message buffers
  std::uint32_t message_bytes_ = 0;
  // Workers before clients: members go in reverse, so the clients' QPs are destroyed before
  // the workers' CQs they complete into (a CQ still in use cannot be destroyed).
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<ServedClient> clients_;
  std::optional<HopscotchTable> table_;  // FaRM full (one worker: its only writer)

 private:
  void ConnectClients();
};

Server::Server(Session& session) : session_(session), o_(session.options()) {
  const std::uint32_t clients = static_cast<std::uint32_t>(o_.clients * session.clients());
  layout_ = LayoutOf(o_, clients);
  store_ = MakeRegion(session, layout_.bytes, o_.use_hugepages);
  Preload(layout_, store_.data());
  if (layout_.full && (layout_.design == Design::kFarm || layout_.design == Design::kFarmVar)) {
    table_.emplace(store_.data() + layout_.entries, layout_.bucket_count, layout_.HopscotchPayloadBytes());
    PreloadTable(layout_, store_.data(), *table_);
  }
  if (o_.corrupt != 0) Corrupt(layout_, store_.data(), static_cast<std::uint64_t>(o_.corrupt));
  message_bytes_ = sizeof(MessageHeader) + layout_.value_bytes;
  if (layout_.design == Design::kPilaf) {
    recvs_ = MakeRegion(session, std::uint64_t{clients} * 2 * o_.window * message_bytes_, o_.use_hugepages);
  }
  for (std::uint32_t s = 0; s < static_cast<std::uint32_t>(o_.workers); ++s) {
    workers_.push_back(std::make_unique<Worker>(*this, s));
  }
}

void Server::ConnectClients() {
  const Device& device = session_.device();
  const bool pilaf = layout_.design == Design::kPilaf;
  const bool uc = pilaf || layout_.design == Design::kFarm || layout_.design == Design::kFarmVar;
  const std::uint32_t window = static_cast<std::uint32_t>(o_.window);
  const std::uint32_t answer_depth = static_cast<std::uint32_t>(o_.cq_mod) + std::max(window, layout_.ring_slots);
  clients_.resize(layout_.clients);
  json endpoints = json::array();
  std::uint32_t global = 0;
  for (int p = 0; p < session_.clients(); ++p) {
    const json info = session_.Get("client/" + std::to_string(p), "remote");
    json mine = json::array();
    for (const auto& described : info.at("clients")) {
      if (global >= layout_.clients) break;
      ServedClient& c = clients_[global];
      Worker& worker = *workers_[global % workers_.size()];
      worker.clients.push_back(global);
      c.ring = static_cast<std::uint32_t>(worker.rings.size());
      SendRing& answers = worker.rings.emplace_back();
      QpCaps rc;
      rc.type = IBV_QPT_RC;
      rc.send_depth = uc ? 1 : answer_depth;
      rc.recv_depth = 1;
      rc.inline_bytes = sizeof(Answer);
      c.rc = CreateQp(device, session_.pd(), worker.send_cq(), worker.recv_cq(), rc);
      ConnectQp(c.rc.get(), device, session_.address(), EndpointFromJson(described.at("rc")), global, kMaxReadWindow);
      json endpoint = {{"rc", ToJson(Endpoint{c.rc->qp_num, global, session_.address()})}};
      if (uc) {
        QpCaps caps;
        caps.type = IBV_QPT_UC;
        caps.send_depth = answer_depth;
        caps.recv_depth = pilaf ? 2 * window : 1;
        caps.inline_bytes = sizeof(Answer);
        c.uc = CreateQp(device, session_.pd(), worker.send_cq(), worker.recv_cq(), caps);
        ConnectQp(c.uc.get(), device, session_.address(), EndpointFromJson(described.at("uc")), global, 1);
        endpoint["uc"] = ToJson(Endpoint{c.uc->qp_num, global, session_.address()});
      }
      answers.id = c.ring;
      answers.qp = uc ? c.uc.get() : c.rc.get();
      answers.depth = answer_depth;
      answers.signal_every = static_cast<std::uint32_t>(o_.cq_mod);
      c.answer_slots = RemoteRegion::FromJson(described.at("answers"));
      if (pilaf) {
        for (std::uint32_t b = 0; b < 2 * window; ++b) {
          const std::uint64_t buffer = std::uint64_t{global} * 2 * window + b;
          ibv_sge sge{reinterpret_cast<std::uintptr_t>(recvs_.data() + buffer * message_bytes_), message_bytes_,
                      recvs_.mr->lkey};
          ibv_recv_wr wr{};
          wr.wr_id = buffer;
          wr.sg_list = &sge;
          wr.num_sge = 1;
          PostRecvOrFail(c.uc.get(), &wr, "PUT buffers");
        }
      }
      mine.push_back(endpoint);
      ++global;
    }
    endpoints.push_back(mine);
  }
  if (global != layout_.clients) {
    Fail("the client processes bring ", global, " clients, expected ", layout_.clients, " (--clients x --peers)");
  }
  session_.Put("remote", {{"store", store_.Describe()}, {"clients", endpoints}});
}

Worker::Worker(Server& server, std::uint32_t id) : server_(server), id_(id) {
  const Device& device = server.session_.device();
  // Every client of this worker may have a full answer ring and 2W RECVs.
  const int depth = static_cast<int>(server.layout_.clients) * (server.o_.cq_mod + 2 * server.o_.window + 16);
  send_cq_ = CreateCq(device, std::min(depth, 1 << 16));
  recv_cq_ = CreateCq(device, std::min(depth, 1 << 16));
}

bool Worker::Take(const std::uint8_t* message, std::uint32_t bytes, Answer& answer) {
  MessageHeader header;
  if (bytes < sizeof(header)) return false;
  std::memcpy(&header, message, sizeof(header));
  const Layout& layout = server_.layout_;
  answer = Answer{0, kStatusStored, 0, 0, header.id};
  if (header.key_index >= layout.keys || !(header.key == KeyHashOf(header.key_index))) return false;
  if (header.kind == MessageKind::kPut) {
    if (header.value_bytes != layout.value_bytes || bytes < sizeof(header) + layout.value_bytes) return false;
    ++stats_.puts;
    if (!server_.table_) {
      StoreValue(layout, server_.store_.data(), header.key_index, message + sizeof(header));
      return true;
    }
    if (StoreInTable(layout, server_.store_.data(), *server_.table_, header.key_index, message + sizeof(header)) ==
        HopscotchTable::Put::kFull) {
      answer.status = kStatusTableFull;
      ++stats_.table_full;
    }
    return true;
  }
  if (header.kind == MessageKind::kLookup && layout.design == Design::kHydraDb) {
    answer.entry_offset = layout.entries + std::uint64_t{header.key_index} * layout.entry_bytes;
    ++stats_.lookups;
    return true;
  }
  return false;
}

void Worker::PostAnswer(std::uint32_t global, const Answer& answer) {
  SendRing& ring = rings[server_.clients_[global].ring];
  while (!ring.HasRoom(1)) ReapSends(send_cq_.get(), rings.data(), "answering PUTs");
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(&answer), sizeof(Answer), 0};
  ibv_send_wr wr{};
  const std::uint64_t seq = ring.posted;
  wr.wr_id = ring.WrId(seq);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE | (ring.Signaled(seq) ? IBV_SEND_SIGNALED : 0);
  if (server_.layout_.design == Design::kPilaf) {
    wr.opcode = IBV_WR_SEND;
  } else {
    wr.opcode = IBV_WR_RDMA_WRITE;
    const ServedClient& c = server_.clients_[global];
    wr.wr.rdma.remote_addr = c.answer_slots.address + std::uint64_t{SlotOf(answer.id)} * sizeof(Answer);
    wr.wr.rdma.rkey = c.answer_slots.rkey;
  }
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(ring.qp, &wr, &bad);
  if (error_number != 0) FailErrno("ibv_post_send (PUT answer)", error_number);
  ++ring.posted;
  ++stats_.answers;
}

void Worker::ServeSends(const std::atomic<bool>& stop) {
  const std::uint32_t window = static_cast<std::uint32_t>(server_.o_.window);
  std::uint32_t idle = 0;
  for (std::uint64_t turn = 0;; ++turn) {
    if ((turn & kStopCheckMask) == 0 && stop.load(std::memory_order_relaxed)) break;
    ibv_wc completions[kPollBatch];
    const int n = ibv_poll_cq(recv_cq_.get(), kPollBatch, completions);
    if (n < 0) Fail("ibv_poll_cq failed on the server's PUT CQ");
    if (n == 0) {
      if (++idle % kIdleSweepsBeforeYield == 0) sched_yield();
      continue;
    }
    idle = 0;
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = completions[i];
      if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving PUTs");
      const std::uint64_t buffer = wc.wr_id;
      const std::uint32_t global = static_cast<std::uint32_t>(buffer / (2 * window));
      std::uint8_t* message = server_.recvs_.data() + buffer * server_.message_bytes_;
      ++stats_.messages;
      Answer answer;
      const bool ok = Take(message, wc.byte_len, answer);
      ibv_sge sge{reinterpret_cast<std::uintptr_t>(message), server_.message_bytes_, server_.recvs_.mr->lkey};
      ibv_recv_wr wr{};
      wr.wr_id = buffer;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      PostRecvOrFail(server_.clients_[global].uc.get(), &wr, "PUT buffers");
      if (!ok) {
        ++stats_.malformed;
        continue;
      }
      PostAnswer(global, answer);
    }
  }
}

void Worker::ServeRings(const std::atomic<bool>& stop) {
  const Layout& layout = server_.layout_;
  std::uint8_t* store = server_.store_.data();
  std::uint32_t idle = 0;
  for (std::uint64_t sweep = 0;; ++sweep) {
    if ((sweep & kStopCheckMask) == 0 && stop.load(std::memory_order_relaxed)) break;
    bool any = false;
    for (const std::uint32_t global : clients) {
      ServedClient& c = server_.clients_[global];
      std::uint8_t* slot = store + layout.SlotOffset(global, c.taken);
      volatile std::uint32_t* stamp = reinterpret_cast<volatile std::uint32_t*>(slot + layout.slot_bytes - 4);
      if (*stamp != StampOf(c.taken)) continue;
      std::atomic_signal_fence(std::memory_order_acquire);
      any = true;
      ++stats_.messages;
      Answer answer;
      const bool ok = Take(slot, layout.slot_bytes - 4, answer);
      *stamp = 0;
      ++c.taken;
      if (!ok) {
        ++stats_.malformed;
        continue;
      }
      answer.consumed = static_cast<std::uint32_t>(c.taken);
      PostAnswer(global, answer);
    }
    if (!any && ++idle % kIdleSweepsBeforeYield == 0) sched_yield();
    if (any) idle = 0;
  }
}

void Worker::Serve(const std::atomic<bool>& stop) {
  if (clients.empty()) return;
  switch (server_.layout_.design) {
    case Design::kPilaf:
      ServeSends(stop);
      break;
    case Design::kFarm:
    case Design::kFarmVar:
    case Design::kHydraDb:
      ServeRings(stop);
      break;
    case Design::kDrtm:
    case Design::kDrtmWrite:
      break;  // GETs are READs, PUTs atomics (and a WRITE): the server's CPU takes no part
  }
}

Report Server::Run() {
  ConnectClients();
  session_.Barrier("ready");
  std::atomic<bool> stop{false};
  ServeBetweenBarriers(session_, static_cast<int>(workers_.size()), stop, "", [&](int s) { workers_[s]->Serve(stop); });
  Report report = CollectClientResults(session_);
  ClientTotals totals;
  for (int p = 0; p < session_.clients(); ++p) {
    totals.Add(ClientTotals::FromJson(session_.Get("client/" + std::to_string(p), "totals")));
  }
  totals.Report(o_, report.rows.front(), report.notes);
  json workers = json::array();
  std::uint64_t malformed = 0;
  for (std::uint32_t s = 0; s < workers_.size(); ++s) {
    workers.push_back(workers_[s]->stats().Json(s));
    malformed += workers_[s]->stats().malformed;
  }
  report.server = {{"workers", workers}, {"malformed_messages", malformed}, {"store_bytes", layout_.bytes}};
  if (malformed != 0) report.notes.push_back(std::to_string(malformed) + " malformed messages counted and dropped");
  if (table_) {
    report.server["hopscotch"] = {{"neighbourhood", kHopscotchNeighbourhood}, {"home_buckets", table_->homes()},
                                  {"bucket_bytes", layout_.entry_bytes}, {"keys", table_->keys()},
                                  {"load_factor", static_cast<double>(table_->keys()) / table_->homes()},
                                  {"away_from_home", table_->AwayFromHome()},
                                  {"displacements", table_->displacements()}, {"puts_refused_full", table_->refused()}};
  }
  return report;
}

}  // namespace
}  // namespace remote

void CheckRemoteSystem(Options& options) { remote::CheckRemote(options); }
Report RunRemoteServer(Session& session) { return remote::Server(session).Run(); }

}  // namespace rdmalab::kv
