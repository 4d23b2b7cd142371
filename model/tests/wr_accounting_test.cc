// The softnic-facing per-WR accounting adds up to the model's per-op accounting times the
// op counts (acceptance 4, model side).
#include <gtest/gtest.h>

#include "model/analytic.h"
#include "model/wr_accounting.h"

namespace rdmalab::model {
namespace {

TEST(WrAccounting, BatchedPostsSumToTheModelsPerOpCostTimesOps) {
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  DeviceModel m{cib.pcie, cib.wqe, cib.link};
  WrShape wr{Opcode::kSend, Transport::kUd, 32, true, true};
  const uint32_t kBatch = 16, kPosts = 10;
  ModeledCounters req, resp;
  uint32_t wqe = SendWqeBytes(wr, m.wqe);
  for (uint32_t p = 0; p < kPosts; ++p) {
    AccountPost(m, kBatch, kBatch * PadToLine(wqe), wqe, req);
    for (uint32_t i = 0; i < kBatch; ++i) {
      AccountRequesterWr(m, wr, req);
      AccountResponderWr(m, wr, resp);
      AccountWire(m, wr, req, resp);
    }
  }
  const double ops = kBatch * kPosts;
  Demand out = Outbound(wr, kBatch, 1, cib, cib.link);
  Demand in = Inbound(wr, cib, cib.link);
  EXPECT_DOUBLE_EQ(req.pcie_mmio_bytes, out.h2d_mmio_B * ops);
  EXPECT_DOUBLE_EQ(req.pcie_dma_cpl_bytes, out.h2d_dma_B * ops);
  EXPECT_DOUBLE_EQ(req.pcie_d2h_bytes, out.d2h_B * ops);
  EXPECT_DOUBLE_EQ(req.wire_tx_bytes, out.link_tx_B * ops);
  // the receiver's RECV re-posting doorbells are the application's posts, not this WR's
  Demand in_wr;
  in_wr.AddPcie(Responder(wr, m.wqe, m.pcie));
  EXPECT_DOUBLE_EQ(resp.pcie_d2h_bytes, in_wr.d2h_B * ops);
  EXPECT_DOUBLE_EQ(resp.pcie_dma_cpl_bytes, in_wr.h2d_dma_B * ops);
  EXPECT_DOUBLE_EQ(resp.wire_rx_bytes, in.link_rx_B * ops);
}

TEST(WrAccounting, SinglePostsAreWqeByMmio) {
  DeviceModel m;
  WrShape wr{Opcode::kWrite, Transport::kRc, 100, true, false};
  ModeledCounters req;
  uint32_t wqe = SendWqeBytes(wr, m.wqe);
  AccountPost(m, 1, PadToLine(wqe), wqe, req);
  EXPECT_EQ(req.pcie_mmio_bytes, CeilDiv(wqe, 64) * (64 + m.pcie.req_hdr_B));
  EXPECT_EQ(req.pcie_dma_cpl_bytes, 0u);
}

TEST(WrAccounting, PostAccumulatorMatchesAccountPost) {
  DeviceModel m;
  WrShape a{Opcode::kWrite, Transport::kRc, 40, true, false};  // 76 B WQE -> 128
  WrShape b{Opcode::kSend, Transport::kRc, 8, true, true};     // 44 B WQE -> 64
  ModeledCounters via_acc, direct;
  PostAccumulator acc;
  acc.Add(a, m.wqe);
  acc.Add(b, m.wqe);
  acc.Flush(m, via_acc);
  AccountPost(m, 2, 128 + 64, SendWqeBytes(a, m.wqe), direct);
  EXPECT_EQ(via_acc.pcie_mmio_bytes, direct.pcie_mmio_bytes);
  EXPECT_EQ(via_acc.pcie_dma_cpl_bytes, direct.pcie_dma_cpl_bytes);
  EXPECT_EQ(via_acc.pcie_dma_cpl_bytes, 192u + 2 * 22);
  EXPECT_EQ(acc.wqes, 0u);  // reset for the next post
}

TEST(WrAccounting, AppendixAThroughTheHook) {
  DeviceModel m;  // PCIe 3.0 defaults
  ModeledCounters mmio, doorbell;
  for (int i = 0; i < 10; ++i) AccountPost(m, 1, 128, 65, mmio);
  AccountPost(m, 10, 10 * 128, 65, doorbell);
  EXPECT_EQ(mmio.pcie_mmio_bytes + mmio.pcie_dma_cpl_bytes, 1800u);
  EXPECT_EQ(doorbell.pcie_mmio_bytes + doorbell.pcie_dma_cpl_bytes, 1534u);
}

}  // namespace
}  // namespace rdmalab::model
