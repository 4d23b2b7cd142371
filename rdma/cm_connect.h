// Connecting one RC/UC QP through rdma_cm (rdmalab-bench -R), on any provider with a
// librdmacm: the QP stays the program's own (rdma_cm's "external QP"), the endpoint (QPN,
// PSN, LID, GID) travels in the private data of the REQ and the REP, each side moves its QP
// with ConnectQp, and REQ/REP/RTU establish the connection. Every wait has a deadline.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstdint>
#include <string>

#include "rdma/connect.h"

namespace rdmalab {

class CmConnection {
 public:
  CmConnection();
  ~CmConnection();
  CmConnection(const CmConnection&) = delete;
  CmConnection& operator=(const CmConnection&) = delete;

  // Passive side: listen on every address at `port` (setup; returns once listening).
  void Listen(std::uint16_t port);
  // Passive side: the next connection request's endpoint; then Accept with ours.
  Endpoint WaitRequest(std::uint64_t deadline_ns);
  void Accept(const Endpoint& local, std::uint64_t deadline_ns);
  // Active side: resolve `host`, send our endpoint, return the peer's; then Establish.
  Endpoint Connect(const std::string& host, std::uint16_t port, const Endpoint& local, std::uint64_t deadline_ns);
  void Establish();

 private:
  rdma_cm_event* WaitEvent(rdma_cm_event_type expected, std::uint64_t deadline_ns, const char* step);

  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;
  rdma_cm_id* id_ = nullptr;  // the connection
};

}  // namespace rdmalab
