// A client's connection to a READ-based system's server: an RC QP for READs, atomics and
// (HydraDB) RC WRITEs, a UC QP for Pilaf's SENDs and FaRM's WRITEs, one registered region
// (READ targets, outgoing messages, the answer slots the server WRITEs into, RECV buffers),
// and the posts each design composes. Every post is one WR (WQE-by-MMIO). READs and atomics
// are signaled (the next step waits for them); messages are signaled one in --cq-mod, their
// WRs retired in order by the signaled ones (rdma/send_ring.h).
#pragma once

#include <infiniband/verbs.h>
#include <nlohmann/json.hpp>

#include <cstdint>

#include "kv/core/session.h"
#include "kv/remote/remote.h"
#include "rdma/send_ring.h"
#include "rdma/session.h"

namespace rdmalab::kv::remote {

// Message WRs carry this bit in wr_id, so that one CQ tells them from a request's READ.
constexpr std::uint64_t kMessageWrTag = std::uint64_t{1} << 63;
constexpr std::uint32_t kMaxReadBytes = kNeighbourhood * HopscotchBucketBytes(1000);  // FaRM full at SV 1000
constexpr std::uint32_t kMaxInlineMessageBytes = 256;

class Connection {
 public:
  Connection(Session& session, std::uint32_t client, const Layout& layout);
  nlohmann::json Describe() const;
  // `server` is the server's entry for this client: {"rc", "uc"?}; `store` its store region.
  void Connect(const nlohmann::json& server, const RemoteRegion& store);

  std::uint8_t* ReadBuffer(std::uint32_t slot) const { return region_.data() + std::uint64_t{slot} * kMaxReadBytes; }
  std::uint8_t* MessageBuffer(std::uint32_t slot) const { return region_.data() + messages_ + std::uint64_t{slot} * message_bytes_; }
  const volatile Answer* AnswerSlot(std::uint32_t slot) const {
    return reinterpret_cast<const volatile Answer*>(region_.data() + answers_ + std::uint64_t{slot} * sizeof(Answer));
  }
  void ClearAnswer(std::uint32_t slot) { std::memset(region_.data() + answers_ + std::uint64_t{slot} * sizeof(Answer), 0, sizeof(Answer)); }
  std::uint64_t* AtomicResult(std::uint32_t slot) const {
    return reinterpret_cast<std::uint64_t*>(region_.data() + atomics_ + std::uint64_t{slot} * 8);
  }

  // Hot-path posts (one WR each; fail only on a provider error).
  void Read(std::uint64_t wr_id, std::uint64_t store_offset, std::uint8_t* local, std::uint32_t bytes);
  void Cas(std::uint64_t wr_id, std::uint64_t store_offset, std::uint64_t compare, std::uint64_t swap,
           std::uint32_t slot);
  // An unsignaled RC WRITE from `local`, ordered before the next RC WR (DrTM's value WRITE).
  void WriteUnsignaled(std::uint64_t store_offset, const std::uint8_t* local, std::uint32_t bytes);
  // A message: UC SEND (Pilaf), or a WRITE (UC: FaRM; RC: HydraDB) of `bytes` to `store_offset`.
  void SendMessage(const std::uint8_t* local, std::uint32_t bytes);
  void WriteMessage(std::uint64_t store_offset, const std::uint8_t* local, std::uint32_t bytes);
  bool MessageRoom() const { return ring_.HasRoom(1); }
  // Completions of signaled RC WRs (READs, atomics) into `out` as the request id and step their
  // wr_id carries (client.h's ReadWrId); message WRs are retired here.
  struct Done {
    std::uint32_t id, slot, step;
  };
  int PollRc(Done* out, int max);
  // Polls once as PollRc and hands each completion's id, slot and step to `handle`, in
  // order; returns how many there were. Inline with `handle`: a transport's Poll is its hot loop.
  template <typename Handle>
  int ForEachDone(int max, Handle&& handle) {
    Done completions[kPollBatch];
    const int done = PollRc(completions, max);
    for (int i = 0; i < done; ++i) handle(completions[i].id, completions[i].slot, completions[i].step);
    return done;
  }
  // Pilaf: answers received (SENDs); each RECV is re-posted at once.
  int PollAnswers(Answer* out, int max);
  void ReapMessages();

 private:
  void PostMessageWr(ibv_send_wr& wr);
  // One RC WR with one SGE over this client's region; `what` names it in an error.
  void PostRc(ibv_send_wr& wr, const std::uint8_t* local, std::uint32_t bytes, const char* what);
  void PostRecv(std::uint32_t buffer);

  Session& session_;
  const Options& o_;
  std::uint32_t client_;
  Layout layout_;
  RemoteRegion store_;
  Region region_;
  std::uint64_t messages_ = 0, answers_ = 0, atomics_ = 0, recvs_ = 0;
  std::uint32_t message_bytes_ = 0, recv_count_ = 0;
  CqPtr rc_cq_, uc_cq_, recv_cq_;
  QpPtr rc_qp_, uc_qp_;
  SendRing ring_;  // message WRs, on the UC QP or (HydraDB) the RC QP
  bool messages_on_rc_ = false;
  std::uint32_t max_inline_ = 0;
};

}  // namespace rdmalab::kv::remote
