// rdmalab-bench's participant (rdma/session.h) with the options it was started with, and
// the one way every mode connects its RC/UC QPs (through the rendezvous, or with -R
// through rdma_cm).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/bench/options.h"
#include "rdma/cm_connect.h"
#include "rdma/program.h"

namespace rdmalab::bench {

// One RC/UC QP to connect: the participant at the other end ("role/index") and which of
// the pair's QPs it is, a number both ends give the same QP pair (also the QP's PSN).
struct QpLink {
  std::string peer;
  std::uint32_t link = 0;
  ibv_qp* qp = nullptr;
};

class Session : public ProgramSession<Options> {
 public:
  using ProgramSession::ProgramSession;

  // Moves every QP of `links` to RTS, connected to its peer's QP of the same link. Every
  // participant calls it once, with its links to all its peers. The endpoints travel
  // through the rendezvous, or with -R/--rdma_cm in rdma_cm's REQ/REP: between a server
  // and a client the server listens (one port, one request per QP), between two nodes the
  // lower index does; the rdma_cm connections stay open until the session ends.
  void ConnectQps(const std::vector<QpLink>& links, std::uint8_t max_rd_atomic);

 private:
  bool ListensTo(const std::string& peer) const;
  void ConnectThroughRendezvous(const std::vector<QpLink>& links, std::uint8_t max_rd_atomic);
  void ConnectThroughRdmaCm(const std::vector<QpLink>& links, std::uint8_t max_rd_atomic);

  std::unique_ptr<CmListener> cm_listener_;
  std::vector<std::unique_ptr<CmConnection>> cm_connections_;
};

}  // namespace rdmalab::bench
