// echo: request/response round trips between N clients and one server (herd14 Fig. 5 and 7).
// A client keeps --tx-depth requests outstanding, one per window slot. Requests arrive as
// WRITEs into per-client slots of the server's request region (the server polls each
// slot's last byte, as HERD does) or as SENDs (the server polls its RECV CQ); the server
// copies the request into a staging slot, optionally makes --accesses random reads into a
// table (prefetching those of the next requests with --prefetch), and echoes the bytes
// back by WRITE into the client's response slot or by SEND, over RC, UC or UD.
// Clients time every round trip; the server aggregates the clients' rates per peer.
// One class split by concern: setup.cc creates and connects the QPs, server_loop.cc and
// client_loop.cc are the measured loops (no allocation, lock or syscall beyond the
// provider's post/poll), aggregate.cc sums the rates, run.cc runs the sizes.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "benchmarks/bench/common.h"
#include "benchmarks/bench/echo_client.h"
#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/tput_plan.h"

namespace rdmalab::bench::echo {

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

EchoShape MakeShape(const Options& o);

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
  // setup.cc
  void CheckPathMtu() const;
  QpCaps Caps(ibv_qp_type type, std::uint32_t send_depth, std::uint32_t recv_depth) const;
  void SetupServer();
  void SetupServerThread(std::size_t index, nlohmann::json& endpoints);
  void ConnectClients();
  void SetupClient();
  void ConnectServer(std::uint32_t send_depth);

  // server_loop.cc
  void ServerThreadLoop(ServerThread& thread, std::uint32_t size);
  void Accept(ServerThread& thread, std::uint32_t client, std::uint32_t slot, const std::uint8_t* request,
              std::uint32_t size, volatile std::uint8_t* polled, std::uint64_t recv_buffer);
  void ServeOldest(ServerThread& thread, std::uint32_t size);
  void Respond(ServerThread& thread, std::uint32_t client, std::uint32_t slot, std::uint32_t size);
  void PostServerRecv(std::uint64_t buffer);

  // client_loop.cc
  ResultRow MeasureClient(std::uint32_t size);
  void PostRequest(std::uint32_t slot, std::uint64_t seq, std::uint32_t size, std::uint64_t now);
  inline int CollectResponses(std::uint32_t size, std::uint32_t* slots);
  void CheckResponse(std::uint32_t slot, const std::uint8_t* data, std::uint32_t size);
  void PostClientRecv(std::uint64_t buffer);

  // run.cc
  ResultRow ServeSize(std::size_t index, std::uint32_t size);
  ResultRow MeasureSize(std::size_t index, std::uint32_t size);

  // aggregate.cc
  ResultRow ServerRow(std::size_t index, std::uint32_t size);
  nlohmann::json Validation() const;

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

}  // namespace rdmalab::bench::echo
