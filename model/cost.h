// Exact per-work-request PCIe and wire accounting (README "Accounting rules").
// Header-only, allocation-free and branch-light so that softnic's accounting hook can call
// it per WR. Every function returns whole bytes/TLPs for one WR or one doorbell batch; the
// analytic model divides batch costs by the batch size.
#pragma once

#include <cstdint>

namespace rdmalab::model {

inline constexpr uint32_t kCacheLineBytes = 64;
// Mellanox layout (not from the papers): one scatter/gather data segment is 16 B, a CQE is
// 64 B, the inline-data segment starts with a 4 B byte count, and a UD/RC control+address
// part without any data segment is 64/32 B, so guide16 Table 1's 68/36 B = that + 4 B.
inline constexpr uint32_t kSgeSegmentBytes = 16;
inline constexpr uint32_t kCqeBytes = 64;
inline constexpr uint32_t kInlineSegmentHeaderBytes = 4;
inline constexpr uint32_t kDoorbellBytes = 8;  // guide16 Appendix A: d = 8 B

enum class Opcode : uint8_t { kSend, kRecv, kWrite, kRead, kCas, kFaa };
enum class Transport : uint8_t { kRc, kUc, kUd, kDc };
enum class LinkKind : uint8_t { kIb, kRoceV1, kRoceV2 };

constexpr bool IsAtomic(Opcode op) { return op == Opcode::kCas || op == Opcode::kFaa; }
constexpr bool IsConnected(Transport t) { return t != Transport::kUd; }
constexpr bool IsReliable(Transport t) { return t == Transport::kRc || t == Transport::kDc; }

// PCIe link-layer parameters of one NIC slot (guide16 Fig. 2a; pcie-bench, SIGCOMM'18).
struct PcieParams {
  double lane_MBps = 984.6;       // useful bytes per lane per direction, after line coding
  uint32_t lanes = 16;
  uint32_t req_hdr_B = 26;        // Pr: TLP header + framing of a request (MWr or MRd)
  uint32_t cpl_hdr_B = 22;        // Pc: same for a completion with data
  uint32_t rcb_B = 128;           // Crc: read-completion combining size
  uint32_t mps_B = 0;             // max payload per write TLP; 0 = unlimited (guide16 convention)
  uint32_t mrrs_B = 0;            // max read request size; 0 = unlimited (guide16 convention)
  double dllp_B_per_tlp = 0;      // link-layer ACK/FC DLLPs per TLP, sent in the opposite direction
  // Doorbell batches: Connect-IB and newer read the whole batch in one DMA; CX/CX3 read
  // `wqes_per_dma` WQEs per DMA (guide16 footnote 3). 0 = whole batch.
  uint32_t wqes_per_dma = 0;

  constexpr double DirectionBytesPerSec() const { return lane_MBps * 1e6 * lanes; }
};

// WQE header sizes (guide16 Table 1), each including the 4 B inline-segment header.
struct WqeLayout {
  uint32_t rc_uc_header_B = 36;
  uint32_t ud_header_B = 68;
  uint32_t recv_B = 16;
  uint32_t max_inline_B = 256;
};

// What one work request is, as far as the NIC and PCIe are concerned.
struct WrShape {
  Opcode op = Opcode::kSend;
  Transport transport = Transport::kRc;
  uint32_t payload_B = 0;
  bool inline_data = false;
  bool signaled = true;
  bool header_only = false;  // zero-byte SEND/WRITE carrying 4 B immediate data
  bool with_imm = false;     // SEND/WRITE_WITH_IMM: 4 B ImmDt; a WRITE then consumes a RECV
  bool inline_recv = false;  // responder folds payload <= 64 B into the CQE
  uint32_t sge = 1;
};

constexpr uint64_t CeilDiv(uint64_t a, uint64_t b) { return b == 0 ? (a ? 1 : 0) : (a + b - 1) / b; }
constexpr uint64_t PadToLine(uint64_t bytes) { return CeilDiv(bytes, kCacheLineBytes) * kCacheLineBytes; }

// Unpadded WQE bytes of a send-queue WR: header, then inline payload or 16 B per SGE.
constexpr uint32_t SendWqeBytes(const WrShape& wr, const WqeLayout& layout) {
  uint32_t header = wr.transport == Transport::kUd ? layout.ud_header_B : layout.rc_uc_header_B;
  uint32_t control = header - kInlineSegmentHeaderBytes;
  if (wr.header_only) return control;  // no data segment at all
  if (IsAtomic(wr.op)) return control + 16 /* atomic segment */ + kSgeSegmentBytes;
  if (wr.inline_data) return header + wr.payload_B;
  return control + kSgeSegmentBytes * wr.sge;
}

constexpr uint32_t RecvWqeBytes(const WrShape& wr, const WqeLayout& layout) {
  return wr.sge <= 1 ? layout.recv_B : layout.recv_B * wr.sge;
}

// PCIe traffic split by direction and by origin. "h2d" = host to device (downstream):
// MMIO writes and completions of the NIC's DMA reads. "d2h" = device to host: the NIC's
// read requests and DMA writes. Bytes are TLP bytes (payload + header); DLLPs separate.
struct PcieBytes {
  uint64_t mmio_B = 0;        // h2d, CPU MMIO writes (WQE-by-MMIO lines, doorbells)
  uint64_t dma_cpl_B = 0;     // h2d, completions of NIC DMA reads (WQEs, payload, RECV WQEs)
  uint64_t d2h_B = 0;         // d2h, read requests + DMA writes (payload, CQEs)
  uint64_t h2d_tlps = 0;
  uint64_t d2h_tlps = 0;
  uint64_t mmio_lines = 0;    // write-combined 64 B lines (the MMIO resource's unit)
  uint64_t dma_reads = 0;     // read requests issued (round trips on the PCIe RTT)
  uint64_t dma_read_lines = 0;  // 64 B host-memory lines the reads touch (what uncore counters such as PCM count)

  constexpr uint64_t h2d_B() const { return mmio_B + dma_cpl_B; }
  constexpr PcieBytes& operator+=(const PcieBytes& o) {
    mmio_B += o.mmio_B; dma_cpl_B += o.dma_cpl_B; d2h_B += o.d2h_B;
    h2d_tlps += o.h2d_tlps; d2h_tlps += o.d2h_tlps; mmio_lines += o.mmio_lines; dma_reads += o.dma_reads;
    dma_read_lines += o.dma_read_lines;
    return *this;
  }
};

// Primitive PCIe transactions.
constexpr PcieBytes Mmio(uint64_t bytes, const PcieParams& p) {
  PcieBytes b;
  b.mmio_lines = CeilDiv(bytes, kCacheLineBytes);
  b.mmio_B = b.mmio_lines * (kCacheLineBytes + p.req_hdr_B);
  b.h2d_tlps = b.mmio_lines;
  return b;
}

constexpr PcieBytes Doorbell(const PcieParams& p) {
  PcieBytes b;
  b.mmio_B = kDoorbellBytes + p.req_hdr_B;
  b.h2d_tlps = 1;
  return b;
}

// NIC reads `bytes` from host memory: read request(s) upstream, completions of at most
// Crc bytes downstream (guide16 Appendix A: a 128 B WQE comes back as one 128 + Pc TLP).
constexpr PcieBytes DmaRead(uint64_t bytes, const PcieParams& p) {
  PcieBytes b;
  if (bytes == 0) return b;
  uint64_t requests = p.mrrs_B ? CeilDiv(bytes, p.mrrs_B) : 1;
  uint64_t completions = CeilDiv(bytes, p.rcb_B);
  b.d2h_B = requests * p.req_hdr_B;
  b.d2h_tlps = requests;
  b.dma_cpl_B = bytes + completions * p.cpl_hdr_B;
  b.h2d_tlps = completions;
  b.dma_reads = requests;
  b.dma_read_lines = CeilDiv(bytes, kCacheLineBytes);  // line-aligned buffers
  return b;
}

constexpr PcieBytes DmaWrite(uint64_t bytes, const PcieParams& p) {
  PcieBytes b;
  if (bytes == 0) return b;
  uint64_t tlps = p.mps_B ? CeilDiv(bytes, p.mps_B) : 1;
  b.d2h_B = bytes + tlps * p.req_hdr_B;
  b.d2h_tlps = tlps;
  return b;
}

// CPU -> NIC bytes to hand over `count` WQEs of `wqe_B` bytes (guide16 Appendix A): by MMIO
// (each WQE padded to cache lines) or by one doorbell plus the NIC's DMA of the batch.
constexpr uint64_t CpuToNicBytesMmio(uint64_t count, uint64_t wqe_B, const PcieParams& p) {
  return count * Mmio(wqe_B, p).mmio_B;
}
constexpr uint64_t CpuToNicBytesDoorbell(uint64_t count, uint64_t wqe_B, const PcieParams& p) {
  uint64_t padded = PadToLine(wqe_B);
  uint64_t per_dma = p.wqes_per_dma ? p.wqes_per_dma : count;
  uint64_t full = count / per_dma, rest = count % per_dma;
  uint64_t cpl = full * DmaRead(per_dma * padded, p).dma_cpl_B + DmaRead(rest * padded, p).dma_cpl_B;
  return Doorbell(p).mmio_B + cpl;
}

// Handing a batch of `batch` identical WRs to the NIC: WQE-by-MMIO when batch == 1,
// else one doorbell and DMA reads of the WQEs. Cost of the whole batch.
constexpr PcieBytes PostBatch(uint32_t batch, uint32_t wqe_B, const PcieParams& p) {
  if (batch <= 1) return Mmio(wqe_B, p);
  PcieBytes b = Doorbell(p);
  uint64_t padded = PadToLine(wqe_B);
  uint32_t per_dma = p.wqes_per_dma ? p.wqes_per_dma : batch;
  for (uint32_t done = 0; done < batch; done += per_dma) {
    uint32_t n = batch - done < per_dma ? batch - done : per_dma;
    b += DmaRead(n * padded, p);
  }
  return b;
}

// Requester-side PCIe cost of one WR once its WQE is at the NIC: payload fetch for
// non-inline SEND/WRITE, READ response landing in host memory, CQE if signaled.
constexpr PcieBytes RequesterData(const WrShape& wr, const PcieParams& p) {
  PcieBytes b;
  bool carries_payload = (wr.op == Opcode::kSend || wr.op == Opcode::kWrite) && !wr.header_only;
  if (carries_payload && !wr.inline_data) {
    // one DMA read per SGE (each gathered from its own buffer)
    uint32_t sges = wr.sge ? wr.sge : 1;
    uint64_t per = CeilDiv(wr.payload_B, sges);
    for (uint32_t i = 0; i < sges; ++i) b += DmaRead(per, p);
  }
  if (wr.op == Opcode::kRead) b += DmaWrite(wr.payload_B, p);
  if (IsAtomic(wr.op)) b += DmaWrite(8, p);
  if (wr.signaled) b += DmaWrite(kCqeBytes, p);
  return b;
}

// Responder-side PCIe cost of one inbound WR (the RECV WQE fetch of a SEND is counted
// here, one WQE per message: RECVs are posted in batches but consumed one by one).
// `ud_grh`: the packet carries a GRH (always on RoCE), which UD lands in the first 40 B.
constexpr PcieBytes Responder(const WrShape& wr, const WqeLayout& layout, const PcieParams& p, bool ud_grh = false) {
  PcieBytes b;
  switch (wr.op) {
    case Opcode::kSend: {
      b += DmaRead(RecvWqeBytes(wr, layout), p);
      bool folded = wr.header_only || (wr.inline_recv && wr.payload_B <= kCqeBytes);
      uint64_t landed = wr.payload_B + (wr.transport == Transport::kUd && ud_grh ? 40 : 0);
      if (!folded) b += DmaWrite(landed, p);
      b += DmaWrite(kCqeBytes, p);  // every RECV completes
      break;
    }
    case Opcode::kWrite:
      if (!wr.header_only) b += DmaWrite(wr.payload_B, p);
      if (wr.with_imm) {  // the immediate completes a RECV: its WQE is fetched, a CQE written
        b += DmaRead(RecvWqeBytes(wr, layout), p);
        b += DmaWrite(kCqeBytes, p);
      }
      break;
    case Opcode::kRead:
      b += DmaRead(wr.payload_B, p);
      break;
    case Opcode::kCas:
    case Opcode::kFaa:
      b += DmaRead(8, p);  // read-modify-write of the 8 B word
      b += DmaWrite(8, p);
      break;
    case Opcode::kRecv:
      break;
  }
  return b;
}

// ---- wire ----------------------------------------------------------------------------

// Per-packet header bytes of the link (IB: LRH+BTH+ICRC+VCRC; RoCE: Ethernet/IP/UDP+BTH+
// ICRC+FCS) plus physical framing (IB delimiters, Ethernet preamble+IFG).
struct WireParams {
  LinkKind kind = LinkKind::kIb;
  double data_Gbps = 54.55;   // per port, after line coding
  uint32_t ports = 1;
  uint32_t mtu_B = 4096;
  bool grh = false;            // IB global route header on every packet
  uint32_t phy_B_per_packet = 0;
  uint32_t min_frame_B = 0;    // Ethernet: 64 B minimum frame
  uint32_t ack_every = 1;      // RC: one ACK per this many packets (coalescing)

  constexpr double BytesPerSec() const { return data_Gbps * 1e9 / 8 * ports; }
  constexpr uint32_t BaseHeaderBytes() const {
    switch (kind) {
      case LinkKind::kIb: return 8 /*LRH*/ + (grh ? 40u : 0u) + 12 /*BTH*/ + 4 /*ICRC*/ + 2 /*VCRC*/;
      case LinkKind::kRoceV1: return 14 + 40 + 12 + 4 + 4;  // Eth, GRH, BTH, ICRC, FCS
      case LinkKind::kRoceV2: return 14 + 20 + 8 + 12 + 4 + 4;  // Eth, IPv4, UDP, BTH, ICRC, FCS
    }
    return 0;
  }
  constexpr uint64_t Frame(uint64_t bytes) const {
    uint64_t f = bytes < min_frame_B ? min_frame_B : bytes;
    return f + phy_B_per_packet;
  }
};

struct WireBytes {
  uint64_t req_packets = 0, req_B = 0;    // requester -> responder
  uint64_t resp_packets = 0, resp_B = 0;  // responder -> requester (READ data, ACKs, atomic acks)
};

// Packets and bytes of one message (segmented by MTU) and its response/ACKs.
constexpr WireBytes Wire(const WrShape& wr, const WireParams& w) {
  WireBytes out;
  uint32_t base = w.BaseHeaderBytes();
  uint32_t deth = wr.transport == Transport::kUd ? 8 : 0;
  uint32_t imm = wr.header_only || wr.with_imm ? 4 : 0;
  uint32_t aeth = 4;
  if (wr.op == Opcode::kRead) {
    out.req_packets = 1;
    out.req_B = w.Frame(base + 16 /*RETH*/);
    uint64_t pkts = wr.payload_B == 0 ? 1 : CeilDiv(wr.payload_B, w.mtu_B);
    out.resp_packets = pkts;
    // AETH on the first/last/only response packet; middle packets carry none
    uint64_t aeths = pkts == 1 ? 1 : 2;
    uint64_t full = wr.payload_B / w.mtu_B, tail = wr.payload_B % w.mtu_B;
    out.resp_B = full * w.Frame(base + w.mtu_B) + (tail ? w.Frame(base + tail) : 0) +
                 (wr.payload_B == 0 ? w.Frame(base) : 0) + aeths * aeth;
    return out;
  }
  if (IsAtomic(wr.op)) {
    out.req_packets = 1;
    out.req_B = w.Frame(base + 28 /*AtomicETH*/);
    out.resp_packets = 1;
    out.resp_B = w.Frame(base + aeth + 8 /*AtomicAckETH*/);
    return out;
  }
  uint64_t payload = wr.header_only ? 0 : wr.payload_B;
  uint64_t pkts = payload == 0 ? 1 : CeilDiv(payload, w.mtu_B);
  uint64_t full = payload / w.mtu_B, tail = payload % w.mtu_B;
  uint32_t first_extra = deth + imm + (wr.op == Opcode::kWrite ? 16 /*RETH*/ : 0);
  out.req_packets = pkts;
  out.req_B = full * w.Frame(base + deth + w.mtu_B) + (tail ? w.Frame(base + deth + tail) : 0) +
              (payload == 0 ? w.Frame(base + deth) : 0) + (first_extra - deth);
  if (IsReliable(wr.transport)) {
    uint64_t acks = CeilDiv(pkts, w.ack_every);
    out.resp_packets = acks;
    out.resp_B = acks * w.Frame(base + aeth);
  }
  return out;
}

}  // namespace rdmalab::model
