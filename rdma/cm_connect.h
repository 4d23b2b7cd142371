// Connecting RC/UC QPs through rdma_cm (rdmalab-bench -R), on any provider with a
// librdmacm: the QPs stay the program's own (rdma_cm's "external QP"), the endpoint (QPN,
// PSN, LID, GID) and the QP pair it belongs to travel in the private data of the REQ and
// the REP, each side moves its QP with ConnectQp, and REQ/REP/RTU establish the
// connection. One listener accepts the requests of every QP pair on one port. Every wait
// has a deadline.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rdma/connect.h"

namespace rdmalab {

// Which QP pair a connection request is for, as both ends name it: the requesting
// participant ("role/index") and a number the two ends agree on.
struct CmLink {
  std::string requester;
  std::uint32_t link = 0;
};

// An event channel whose waits end at a deadline.
class CmChannel {
 public:
  CmChannel();
  ~CmChannel();
  CmChannel(const CmChannel&) = delete;
  CmChannel& operator=(const CmChannel&) = delete;

 protected:
  rdma_cm_event* NextEvent(std::uint64_t deadline_ns, const char* step, const char* waiting_for);
  rdma_cm_event* WaitEvent(rdma_cm_event_type expected, std::uint64_t deadline_ns, const char* step);
  rdma_event_channel* channel_ = nullptr;
};

// Passive side: listens on every address at one port and accepts one request per QP pair.
class CmListener : public CmChannel {
 public:
  explicit CmListener(std::uint16_t port);
  ~CmListener();
  // Accepts `count` requests: `connect` moves our QP of the request's link towards the
  // requester's endpoint and returns our endpoint, which the REP carries back. Returns once
  // every connection is established.
  void AcceptAll(std::size_t count, const std::function<Endpoint(const CmLink&, const Endpoint&)>& connect,
                 std::uint64_t deadline_ns);

 private:
  rdma_cm_id* listen_id_ = nullptr;
  std::vector<rdma_cm_id*> accepted_;
};

// Active side: one connection.
class CmConnection : public CmChannel {
 public:
  ~CmConnection();
  // Resolves `host`, sends our endpoint for `link`, returns the peer's; then Establish.
  Endpoint Connect(const std::string& host, std::uint16_t port, const CmLink& link, const Endpoint& local,
                   std::uint64_t deadline_ns);
  void Establish();

 private:
  rdma_cm_id* id_ = nullptr;
};

}  // namespace rdmalab
