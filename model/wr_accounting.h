// Modeled PCIe and wire counters per device, for softnic's accounting hook
// (softnic/fabric/accounting.h) and the benchmarks' "expected" column. Header-only,
// allocation-free, no locks: each call adds whole bytes/TLPs of one post, one WR or one
// message to a plain counter struct that the caller owns (single writer).
//
// Call order for one ibv_post_send of n WRs on the requester:
//   PostAccumulator::Add(wr) and AccountRequesterWr(model, wr, req)                  per WR
//   PostAccumulator::Flush(model, req)  (= AccountPost: MMIO or doorbell + WQE DMA)  once
// and when a message is delivered:
//   AccountResponderWr(model, wr, resp); AccountWire(model, wr, req, resp)           per WR
// so that a run's counters equal the model's per-op accounting times the op counts.
#pragma once

#include <cstdint>

#include "model/cost.h"

namespace rdmalab::model {

// Device parameters the accounting needs (defaults: Connect-IB on PCIe 3.0 x16, IB).
struct DeviceModel {
  PcieParams pcie;
  WqeLayout wqe;
  WireParams wire;
};

struct ModeledCounters {
  uint64_t pcie_mmio_bytes = 0;      // h2d: WQE-by-MMIO lines and doorbells
  uint64_t pcie_dma_cpl_bytes = 0;   // h2d: completions of the NIC's DMA reads
  uint64_t pcie_d2h_bytes = 0;       // d2h: read requests and DMA writes
  uint64_t pcie_h2d_tlps = 0;
  uint64_t pcie_d2h_tlps = 0;
  uint64_t pcie_dma_reads = 0;       // read requests (each a PCIe round trip)
  uint64_t pcie_dma_read_lines = 0;  // host-memory lines the NIC reads: what PCM's "PCIe Rd" counts, / 64
  uint64_t wire_tx_bytes = 0, wire_tx_packets = 0;
  uint64_t wire_rx_bytes = 0, wire_rx_packets = 0;
};

// Every counter by name, in this order wherever a list of them is kept: rdmalab-bench's
// pcie.modeled keys and softnic's modeled counters (softnic/fabric/layout.h checks its order).
struct ModeledCounterField {
  const char* name;
  uint64_t ModeledCounters::*field;
};
inline constexpr ModeledCounterField kModeledCounterFields[] = {
    {"pcie_mmio_bytes", &ModeledCounters::pcie_mmio_bytes},
    {"pcie_dma_cpl_bytes", &ModeledCounters::pcie_dma_cpl_bytes},
    {"pcie_d2h_bytes", &ModeledCounters::pcie_d2h_bytes},
    {"pcie_h2d_tlps", &ModeledCounters::pcie_h2d_tlps},
    {"pcie_d2h_tlps", &ModeledCounters::pcie_d2h_tlps},
    {"pcie_dma_reads", &ModeledCounters::pcie_dma_reads},
    {"pcie_dma_read_lines", &ModeledCounters::pcie_dma_read_lines},
    {"wire_tx_bytes", &ModeledCounters::wire_tx_bytes},
    {"wire_tx_packets", &ModeledCounters::wire_tx_packets},
    {"wire_rx_bytes", &ModeledCounters::wire_rx_bytes},
    {"wire_rx_packets", &ModeledCounters::wire_rx_packets}};

inline void Add(ModeledCounters& c, const PcieBytes& b) {
  c.pcie_mmio_bytes += b.mmio_B;
  c.pcie_dma_cpl_bytes += b.dma_cpl_B;
  c.pcie_d2h_bytes += b.d2h_B;
  c.pcie_h2d_tlps += b.h2d_tlps;
  c.pcie_d2h_tlps += b.d2h_tlps;
  c.pcie_dma_reads += b.dma_reads;
  c.pcie_dma_read_lines += b.dma_read_lines;
}

// One post_send of `wqes` WRs whose WQEs, each padded to cache lines, total `padded_bytes`:
// WQE-by-MMIO for a single WR, else a doorbell and the NIC's DMA of the WQEs (whole batch,
// or `wqes_per_dma` at a time on older NICs; WQEs assumed of equal size in that case).
inline void AccountPost(const DeviceModel& m, uint32_t wqes, uint64_t padded_bytes, uint32_t single_wqe_B,
                        ModeledCounters& requester) {
  if (wqes == 0) return;
  if (wqes == 1) {
    Add(requester, Mmio(single_wqe_B, m.pcie));
    return;
  }
  Add(requester, Doorbell(m.pcie));
  uint32_t per_dma = m.pcie.wqes_per_dma ? m.pcie.wqes_per_dma : wqes;
  uint64_t per_wqe = padded_bytes / wqes;
  for (uint32_t done = 0; done < wqes; done += per_dma) {
    uint32_t n = wqes - done < per_dma ? wqes - done : per_dma;
    Add(requester, DmaRead(n * per_wqe, m.pcie));
  }
}

// Collects the WQEs of one post_send (a linked list of WRs) for AccountPost.
struct PostAccumulator {
  uint32_t wqes = 0;
  uint64_t padded_bytes = 0;
  uint32_t first_wqe_B = 0;

  void Add(const WrShape& wr, const WqeLayout& layout) {
    uint32_t bytes = SendWqeBytes(wr, layout);
    if (wqes++ == 0) first_wqe_B = bytes;
    padded_bytes += PadToLine(bytes);
  }
  void Flush(const DeviceModel& m, ModeledCounters& requester) {
    AccountPost(m, wqes, padded_bytes, first_wqe_B, requester);
    *this = PostAccumulator{};
  }
};

// The requester's NIC carrying out one WR: payload gather, READ/atomic response landing, CQE.
inline void AccountRequesterWr(const DeviceModel& m, const WrShape& wr, ModeledCounters& requester) {
  Add(requester, RequesterData(wr, m.pcie));
}

// The responder's NIC serving one WR (RECV WQE fetch, payload/CQE writes, READ/atomic DMA).
inline void AccountResponderWr(const DeviceModel& m, const WrShape& wr, ModeledCounters& responder) {
  bool grh = m.wire.grh || m.wire.kind != LinkKind::kIb;
  Add(responder, Responder(wr, m.wqe, m.pcie, grh));
}

// Packets and bytes on the wire for one message and its response or ACKs.
inline void AccountWire(const DeviceModel& m, const WrShape& wr, ModeledCounters& requester,
                        ModeledCounters& responder) {
  WireBytes w = Wire(wr, m.wire);
  requester.wire_tx_bytes += w.req_B;
  requester.wire_tx_packets += w.req_packets;
  responder.wire_rx_bytes += w.req_B;
  responder.wire_rx_packets += w.req_packets;
  responder.wire_tx_bytes += w.resp_B;
  responder.wire_tx_packets += w.resp_packets;
  requester.wire_rx_bytes += w.resp_B;
  requester.wire_rx_packets += w.resp_packets;
}

}  // namespace rdmalab::model
