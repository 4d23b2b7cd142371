// The extended work-request API (struct ibv_qp_ex): ibv_wr_start opens a batch under the
// QP lock, each ibv_wr_<opcode> starts a WR and the setters fill it, ibv_wr_complete
// submits the batch as one doorbell (or none of it, if any WR was bad), ibv_wr_abort drops it.
#include <cerrno>
#include <cstring>

#include "softnic/verbs/send_fast.h"

namespace softnic {
namespace {

WrBatch& BatchOf(ibv_qp_ex* ex) { return ToSoft(ex)->batch; }

// Starts the next WR of the batch; null (and the batch marked failed) when it is full.
WorkRequest* Begin(ibv_qp_ex* ex, ibv_wr_opcode opcode) {
  WrBatch& batch = BatchOf(ex);
  if (batch.count == batch.capacity) {
    batch.error = ENOMEM;
    return nullptr;
  }
  uint32_t index = batch.count++;
  WorkRequest* wr = &batch.wrs[index];
  wr->wr_id = ex->wr_id;
  wr->opcode = opcode;
  wr->send_flags = ex->wr_flags;
  wr->imm_data = 0;
  wr->num_sge = 0;
  wr->sg_list = &batch.sges[size_t{index} * batch.sges_per_wr];
  wr->ah = nullptr;
  return wr;
}

WorkRequest* Current(ibv_qp_ex* ex) {
  WrBatch& batch = BatchOf(ex);
  return batch.count == 0 || batch.error != 0 ? nullptr : &batch.wrs[batch.count - 1];
}

void WrStart(ibv_qp_ex* ex) {
  SoftQp* qp = ToSoft(ex);
  LockQpInline(qp);
  WrBatch& batch = qp->batch;
  if (batch.capacity == 0) {
    batch.capacity = std::max<uint32_t>(qp->cap.max_send_wr, 1);
    batch.sges_per_wr = std::max<uint32_t>(qp->cap.max_send_sge, 1);
    batch.inline_per_wr = qp->cap.max_inline_data;
    batch.wrs.reset(new WorkRequest[batch.capacity]);
    batch.sges.reset(new ibv_sge[size_t{batch.capacity} * batch.sges_per_wr]);
    batch.inline_bytes.reset(new uint8_t[size_t{batch.capacity} * batch.inline_per_wr + 1]);
  }
  batch.count = 0;
  batch.error = 0;
}

int WrComplete(ibv_qp_ex* ex) {
  SoftQp* qp = ToSoft(ex);
  WrBatch& batch = qp->batch;
  int rc = batch.error;
  uint32_t outstanding = qp->sq_posted - qp->sq_retired.load(std::memory_order_acquire);
  if (rc == 0 && outstanding + batch.count > qp->cap.max_send_wr) rc = ENOMEM;
  for (uint32_t i = 0; rc == 0 && i < batch.count; ++i) rc = ValidateWorkRequest(qp, batch.wrs[i]);
  PostContext at = PostContext::OfThisThread();
  if (rc == 0 && qp->stall != StallReason::kNone && !ProgressQpLocked(qp)) at.runtime->RemoveStalled(qp);
  bool connected = qp->ex.qp_base.qp_type != IBV_QPT_UD;
  PostCost post_cost;
  for (uint32_t i = 0; rc == 0 && i < batch.count; ++i) {
    const WorkRequest& wr = batch.wrs[i];
    if (connected && wr.opcode == IBV_WR_RDMA_WRITE && wr.num_sge == 1 &&
        TryFastWrite(qp, at, wr.wr_id, wr.send_flags, wr.sg_list[0], wr.remote_addr, wr.rkey, &post_cost) ==
            FastResult::kDone) {
      continue;
    }
    if ((wr.opcode == IBV_WR_SEND || wr.opcode == IBV_WR_SEND_WITH_IMM) && wr.num_sge == 1 &&
        TryFastSend(qp, at, wr.wr_id, wr.opcode, wr.send_flags, wr.imm_data, wr.sg_list[0],
                    UdAddress{wr.ah, wr.remote_qpn, wr.remote_qkey}, &post_cost) == FastResult::kDone) {
      continue;
    }
    rc = SubmitValidatedLocked(qp, wr);
    if (rc == 0) post_cost.Add(WqeBytes(ModeledShape(qp, wr)));
  }
  if (rc == 0 && batch.count != 0) CountPost(qp, at.lane(), post_cost);
  batch.count = 0;
  UnlockQp(qp);
  return rc;
}

void WrAbort(ibv_qp_ex* ex) {
  BatchOf(ex).count = 0;
  UnlockQp(ToSoft(ex));
}

// A WR on the peer's memory: Begin, then the rkey and remote address every such verb takes.
WorkRequest* BeginRemote(ibv_qp_ex* ex, ibv_wr_opcode opcode, uint32_t rkey, uint64_t remote_addr) {
  WorkRequest* wr = Begin(ex, opcode);
  if (wr != nullptr) {
    wr->rkey = rkey;
    wr->remote_addr = remote_addr;
  }
  return wr;
}

void WrRdmaWrite(ibv_qp_ex* ex, uint32_t rkey, uint64_t remote_addr) {
  BeginRemote(ex, IBV_WR_RDMA_WRITE, rkey, remote_addr);
}

void WrRdmaWriteImm(ibv_qp_ex* ex, uint32_t rkey, uint64_t remote_addr, __be32 imm) {
  if (WorkRequest* wr = BeginRemote(ex, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr)) wr->imm_data = imm;
}

void WrRdmaRead(ibv_qp_ex* ex, uint32_t rkey, uint64_t remote_addr) {
  BeginRemote(ex, IBV_WR_RDMA_READ, rkey, remote_addr);
}

void WrSend(ibv_qp_ex* ex) { Begin(ex, IBV_WR_SEND); }

void WrSendImm(ibv_qp_ex* ex, __be32 imm) {
  if (WorkRequest* wr = Begin(ex, IBV_WR_SEND_WITH_IMM)) wr->imm_data = imm;
}

void WrAtomicCmpSwp(ibv_qp_ex* ex, uint32_t rkey, uint64_t remote_addr, uint64_t compare, uint64_t swap) {
  if (WorkRequest* wr = BeginRemote(ex, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr)) {
    wr->compare_add = compare;
    wr->swap = swap;
  }
}

void WrAtomicFetchAdd(ibv_qp_ex* ex, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  if (WorkRequest* wr = BeginRemote(ex, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr)) wr->compare_add = add;
}

// Opcodes softnic does not offer: the batch fails at ibv_wr_complete.
void WrUnsupported(ibv_qp_ex* ex) { BatchOf(ex).error = EOPNOTSUPP; }
void WrBindMw(ibv_qp_ex* ex, ibv_mw*, uint32_t, const ibv_mw_bind_info*) { WrUnsupported(ex); }
void WrLocalInv(ibv_qp_ex* ex, uint32_t) { WrUnsupported(ex); }
void WrSendInv(ibv_qp_ex* ex, uint32_t) { WrUnsupported(ex); }
void WrSendTso(ibv_qp_ex* ex, void*, uint16_t, uint16_t) { WrUnsupported(ex); }
void WrAtomicWrite(ibv_qp_ex* ex, uint32_t, uint64_t, const void*) { WrUnsupported(ex); }

void WrSetUdAddr(ibv_qp_ex* ex, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  if (WorkRequest* wr = Current(ex)) {
    wr->ah = ah ? ToSoft(ah) : nullptr;
    wr->remote_qpn = remote_qpn;
    wr->remote_qkey = remote_qkey;
  }
}

void WrSetXrcSrqn(ibv_qp_ex* ex, uint32_t remote_srqn) {
  if (WorkRequest* wr = Current(ex)) wr->remote_srqn = remote_srqn;
}

void WrSetSge(ibv_qp_ex* ex, uint32_t lkey, uint64_t addr, uint32_t length) {
  if (WorkRequest* wr = Current(ex)) {
    const_cast<ibv_sge*>(wr->sg_list)[0] = ibv_sge{addr, length, lkey};
    wr->num_sge = 1;
  }
}

// The WR being built, when `bytes` fit under `limit`; null otherwise, the batch then failed
// (EINVAL) unless it had failed already.
WorkRequest* CurrentHolding(ibv_qp_ex* ex, size_t bytes, uint32_t limit) {
  WorkRequest* wr = Current(ex);
  if (wr != nullptr && bytes > limit) {
    BatchOf(ex).error = EINVAL;
    return nullptr;
  }
  return wr;
}

// The current WR's inline storage, now its one SGE of `bytes`.
uint8_t* InlineStorage(ibv_qp_ex* ex, WorkRequest* wr, size_t bytes) {
  WrBatch& batch = BatchOf(ex);
  uint8_t* storage = &batch.inline_bytes[size_t{batch.count - 1} * batch.inline_per_wr];
  const_cast<ibv_sge*>(wr->sg_list)[0] = ibv_sge{reinterpret_cast<uintptr_t>(storage), uint32_t(bytes), 0};
  wr->num_sge = 1;
  wr->send_flags |= IBV_SEND_INLINE;
  return storage;
}

void WrSetSgeList(ibv_qp_ex* ex, size_t count, const ibv_sge* list) {
  WorkRequest* wr = CurrentHolding(ex, count, BatchOf(ex).sges_per_wr);
  if (wr == nullptr) return;
  std::memcpy(const_cast<ibv_sge*>(wr->sg_list), list, sizeof(ibv_sge) * count);
  wr->num_sge = uint32_t(count);
}

// Inline data is copied now: the caller may reuse its buffer as soon as this returns.
void WrSetInlineDataList(ibv_qp_ex* ex, size_t count, const ibv_data_buf* buffers) {
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += buffers[i].length;
  WorkRequest* wr = CurrentHolding(ex, total, BatchOf(ex).inline_per_wr);
  if (wr == nullptr) return;
  uint8_t* storage = InlineStorage(ex, wr, total);
  size_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(storage + offset, buffers[i].addr, buffers[i].length);
    offset += buffers[i].length;
  }
}

void WrSetInlineData(ibv_qp_ex* ex, void* addr, size_t length) {
  WorkRequest* wr = CurrentHolding(ex, length, BatchOf(ex).inline_per_wr);
  if (wr == nullptr) return;
  std::memcpy(InlineStorage(ex, wr, length), addr, length);
}

}  // namespace

void InstallQpExOps(SoftQp* qp) {
  ibv_qp_ex& ex = qp->ex;
  ex.wr_atomic_cmp_swp = WrAtomicCmpSwp;
  ex.wr_atomic_fetch_add = WrAtomicFetchAdd;
  ex.wr_bind_mw = WrBindMw;
  ex.wr_local_inv = WrLocalInv;
  ex.wr_rdma_read = WrRdmaRead;
  ex.wr_rdma_write = WrRdmaWrite;
  ex.wr_rdma_write_imm = WrRdmaWriteImm;
  ex.wr_send = WrSend;
  ex.wr_send_imm = WrSendImm;
  ex.wr_send_inv = WrSendInv;
  ex.wr_send_tso = WrSendTso;
  ex.wr_set_ud_addr = WrSetUdAddr;
  ex.wr_set_xrc_srqn = WrSetXrcSrqn;
  ex.wr_set_inline_data = WrSetInlineData;
  ex.wr_set_inline_data_list = WrSetInlineDataList;
  ex.wr_set_sge = WrSetSge;
  ex.wr_set_sge_list = WrSetSgeList;
  ex.wr_start = WrStart;
  ex.wr_complete = WrComplete;
  ex.wr_abort = WrAbort;
  ex.wr_atomic_write = WrAtomicWrite;
}

}  // namespace softnic
