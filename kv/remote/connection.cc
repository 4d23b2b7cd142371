#include "kv/remote/connection.h"

#include <algorithm>
#include <string>

#include "kv/core/client_core.h"
#include "rdma/connect.h"
#include "rdma/error.h"

namespace rdmalab::kv::remote {

using nlohmann::json;

namespace {

// A signaled RC WR of `opcode`, its completion reported under `wr_id`.
ibv_send_wr SignaledWr(std::uint64_t wr_id, ibv_wr_opcode opcode) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.send_flags = IBV_SEND_SIGNALED;
  return wr;
}

}  // namespace

Connection::Connection(Session& session, std::uint32_t client, const Layout& layout)
    : session_(session), o_(session.options()), client_(client), layout_(layout) {
  const Device& device = session.device();
  const std::uint32_t window = static_cast<std::uint32_t>(o_.window);
  const std::uint32_t cq_mod = static_cast<std::uint32_t>(o_.cq_mod);
  const bool pilaf = layout.design == Design::kPilaf;
  const bool uc_messages = pilaf || layout.design == Design::kFarm || layout.design == Design::kFarmVar;
  messages_on_rc_ = layout.design == Design::kHydraDb;
  message_bytes_ = std::max<std::uint32_t>(SlotBytes(layout.value_bytes), sizeof(MessageHeader) + layout.value_bytes);
  recv_count_ = pilaf ? 2 * window : 0;
  const auto align = [](std::uint64_t at) { return (at + 63) / 64 * 64; };
  messages_ = align(std::uint64_t{window} * kMaxReadBytes);
  answers_ = align(messages_ + std::uint64_t{window} * message_bytes_);
  atomics_ = align(answers_ + std::uint64_t{window} * sizeof(Answer));
  recvs_ = align(atomics_ + std::uint64_t{window} * 8);
  region_ = MakeRegion(session, recvs_ + std::uint64_t{recv_count_} * sizeof(Answer) + 64, o_.use_hugepages);

  // Message WRs in flight are bounded by the ring (cq_mod + window), READs and atomics by
  // 2 per window slot (DrTM's WRITE and unlock), so the RC send queue never overflows.
  ring_.depth = cq_mod + window;
  ring_.signal_every = cq_mod;
  const std::uint32_t rc_depth = 2 * window + (messages_on_rc_ ? ring_.depth : 0) + 1;
  rc_cq_ = CreateCq(device, static_cast<int>(rc_depth));
  recv_cq_ = CreateCq(device, static_cast<int>(std::max<std::uint32_t>(recv_count_, 1)));
  QpCaps rc;
  rc.type = IBV_QPT_RC;
  rc.send_depth = rc_depth;
  rc.recv_depth = 1;
  rc.inline_bytes = messages_on_rc_ ? kMaxInlineMessageBytes : 0;
  rc_qp_ = CreateQp(device, session.pd(), rc_cq_.get(), recv_cq_.get(), rc);
  if (messages_on_rc_) max_inline_ = rc.inline_bytes;
  if (uc_messages) {
    uc_cq_ = CreateCq(device, static_cast<int>(ring_.depth));
    QpCaps uc;
    uc.type = IBV_QPT_UC;
    uc.send_depth = ring_.depth;
    uc.recv_depth = std::max<std::uint32_t>(recv_count_, 1);
    uc.inline_bytes = kMaxInlineMessageBytes;
    uc_qp_ = CreateQp(device, session.pd(), uc_cq_.get(), recv_cq_.get(), uc);
    max_inline_ = uc.inline_bytes;
    ring_.qp = uc_qp_.get();
  } else {
    ring_.qp = rc_qp_.get();
  }
}

json Connection::Describe() const {
  json out = {{"rc", ToJson(Endpoint{rc_qp_->qp_num, client_, session_.address()})},
              {"answers", {{"address", reinterpret_cast<std::uintptr_t>(region_.data()) + answers_},
                           {"rkey", region_.mr->rkey},
                           {"bytes", std::uint64_t{static_cast<std::uint32_t>(o_.window)} * sizeof(Answer)}}}};
  if (uc_qp_) out["uc"] = ToJson(Endpoint{uc_qp_->qp_num, client_, session_.address()});
  return out;
}

void Connection::Connect(const json& server, const RemoteRegion& store) {
  store_ = store;
  if (store.bytes < layout_.bytes) {
    Fail("the server's store region has ", store.bytes, " bytes, this client expects ", layout_.bytes,
         ": --keys, --value-size, --window and --farm-buffer-slots must match on both sides");
  }
  ConnectQp(rc_qp_.get(), session_.device(), session_.address(), EndpointFromJson(server.at("rc")), client_,
            kMaxReadWindow);
  if (uc_qp_) {
    ConnectQp(uc_qp_.get(), session_.device(), session_.address(), EndpointFromJson(server.at("uc")), client_, 1);
    for (std::uint32_t b = 0; b < recv_count_; ++b) PostRecv(b);
  }
}

void Connection::PostRecv(std::uint32_t buffer) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(region_.data() + recvs_ + std::uint64_t{buffer} * sizeof(Answer)),
              sizeof(Answer), region_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = buffer;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  PostRecvOrFail(uc_qp_.get(), &wr, "answer buffers");
}

void Connection::PostRc(ibv_send_wr& wr, const std::uint8_t* local, std::uint32_t bytes, const char* what) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(local), bytes, region_.mr->lkey};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(rc_qp_.get(), &wr, &bad);
  if (error_number != 0) FailErrno(std::string("ibv_post_send (") + what + ")", error_number);
}

void Connection::Read(std::uint64_t wr_id, std::uint64_t store_offset, std::uint8_t* local, std::uint32_t bytes) {
  ibv_send_wr wr = SignaledWr(wr_id, IBV_WR_RDMA_READ);
  wr.wr.rdma = {store_.address + store_offset, store_.rkey};
  PostRc(wr, local, bytes, "READ");
}

void Connection::Cas(std::uint64_t wr_id, std::uint64_t store_offset, std::uint64_t compare, std::uint64_t swap,
                     std::uint32_t slot) {
  ibv_send_wr wr = SignaledWr(wr_id, IBV_WR_ATOMIC_CMP_AND_SWP);
  wr.wr.atomic = {store_.address + store_offset, compare, swap, store_.rkey};
  PostRc(wr, reinterpret_cast<const std::uint8_t*>(AtomicResult(slot)), 8, "CAS");
}

void Connection::WriteUnsignaled(std::uint64_t store_offset, const std::uint8_t* local, std::uint32_t bytes) {
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma = {store_.address + store_offset, store_.rkey};
  PostRc(wr, local, bytes, "value WRITE");
}

void Connection::PostMessageWr(ibv_send_wr& wr) {
  const std::uint64_t seq = ring_.posted;
  wr.wr_id = (messages_on_rc_ ? kMessageWrTag : 0) | ring_.WrId(seq);
  if (wr.sg_list->length <= max_inline_) wr.send_flags |= IBV_SEND_INLINE;
  if (ring_.Signaled(seq)) wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  const int error_number = ibv_post_send(ring_.qp, &wr, &bad);
  if (error_number != 0) FailErrno("ibv_post_send (PUT message)", error_number);
  ++ring_.posted;
}

void Connection::SendMessage(const std::uint8_t* local, std::uint32_t bytes) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(local), bytes, region_.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  PostMessageWr(wr);
}

void Connection::WriteMessage(std::uint64_t store_offset, const std::uint8_t* local, std::uint32_t bytes) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(local), bytes, region_.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = store_.address + store_offset;
  wr.wr.rdma.rkey = store_.rkey;
  PostMessageWr(wr);
}

int Connection::PollRc(Done* out, int max) {
  ibv_wc completions[kPollBatch];
  const int n = ibv_poll_cq(rc_cq_.get(), std::min(max, kPollBatch), completions);
  if (n < 0) Fail("ibv_poll_cq failed on the client's RC CQ");
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = completions[i];
    if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "reading the server's store");
    if (wc.wr_id & kMessageWrTag) {
      ring_.retired = std::max(ring_.retired, wc.wr_id & ((std::uint64_t{1} << 48) - 1));
    } else {
      const std::uint32_t id = static_cast<std::uint32_t>(wc.wr_id);
      out[kept++] = Done{id, SlotOf(id), static_cast<std::uint32_t>(wc.wr_id >> 32)};
    }
  }
  return kept;
}

void Connection::ReapMessages() {
  if (uc_cq_ && ring_.Outstanding() > ring_.signal_every) ReapSends(uc_cq_.get(), &ring_, "sending PUTs");
}

int Connection::PollAnswers(Answer* out, int max) {
  ibv_wc completions[kPollBatch];
  const int n = ibv_poll_cq(recv_cq_.get(), std::min(max, kPollBatch), completions);
  if (n < 0) Fail("ibv_poll_cq failed on the client's answer CQ");
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = completions[i];
    if (wc.status != IBV_WC_SUCCESS) CompletionFailed(wc, "receiving PUT answers");
    const std::uint32_t buffer = static_cast<std::uint32_t>(wc.wr_id);
    std::memcpy(&out[i], region_.data() + recvs_ + std::uint64_t{buffer} * sizeof(Answer), sizeof(Answer));
    PostRecv(buffer);
  }
  return n;
}

}  // namespace rdmalab::kv::remote
