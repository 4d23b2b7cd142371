// One test per accounting rule of the README's "Accounting rules" (acceptance 1).
#include <gtest/gtest.h>

#include "model/cost.h"

namespace rdmalab::model {
namespace {

PcieParams Gen3x16() { return PcieParams{}; }  // defaults: 984.6 MB/s x16, Pr 26, Pc 22, Crc 128
PcieParams Gen2x8() {
  PcieParams p;
  p.lane_MBps = 500;
  p.lanes = 8;
  p.req_hdr_B = 24;
  p.cpl_hdr_B = 20;
  return p;
}

TEST(Cost, AppendixATenWqesOf65BytesByMmioCost1800Bytes) {
  EXPECT_EQ(CpuToNicBytesMmio(10, 65, Gen3x16()), 1800u);
}

TEST(Cost, AppendixATenWqesOf65BytesByDoorbellCost1534Bytes) {
  EXPECT_EQ(CpuToNicBytesDoorbell(10, 65, Gen3x16()), 1534u);  // (8 + 26) + 10 x (128 + 22)
}

TEST(Cost, ConnectIbMmioLimitIs175MillionLinesPerSecond) {
  PcieParams p = Gen3x16();
  double lines = p.DirectionBytesPerSec() / (kCacheLineBytes + p.req_hdr_B);
  EXPECT_NEAR(lines / 1e6, 175.0, 0.1);
}

TEST(Cost, BatchedUdSendDmaLimitIsAbout105Million) {
  PcieParams p = Gen3x16();
  double useful = p.DirectionBytesPerSec() * p.rcb_B / (p.rcb_B + p.cpl_hdr_B);
  EXPECT_NEAR(useful / 1e6, 13443, 1);  // guide16 Sec. 5.2.1
  WrShape send{Opcode::kSend, Transport::kUd, 32, true};
  uint32_t wqe = SendWqeBytes(send, WqeLayout{});
  EXPECT_EQ(PadToLine(wqe), 128u);  // 2 cache lines
  EXPECT_NEAR(useful / PadToLine(wqe) / 1e6, 105.0, 0.1);
}

TEST(Cost, WqeHeaderSizesFollowGuide16Table1PlusInlinePayload) {
  WqeLayout l;
  EXPECT_EQ(SendWqeBytes({Opcode::kWrite, Transport::kRc, 28, true}, l), 64u);  // 36 + 28: one line
  EXPECT_EQ(SendWqeBytes({Opcode::kWrite, Transport::kUc, 29, true}, l), 65u);  // spills to 2 lines
  EXPECT_EQ(SendWqeBytes({Opcode::kSend, Transport::kUd, 60, true}, l), 128u);  // guide16 Fig. 11b
  EXPECT_EQ(RecvWqeBytes({Opcode::kRecv, Transport::kUd, 0}, l), 16u);
}

TEST(Cost, NonInlineWqeCarriesOneSixteenByteSegmentPerSge) {
  WqeLayout l;
  WrShape one{Opcode::kSend, Transport::kRc, 1000, false};
  WrShape three = one;
  three.sge = 3;
  EXPECT_EQ(SendWqeBytes(one, l), 36u - 4 + 16);
  EXPECT_EQ(SendWqeBytes(three, l), 36u - 4 + 48);
}

TEST(Cost, HeaderOnlyUdSendFitsOneCacheLine) {
  WrShape h{Opcode::kSend, Transport::kUd, 0, false};
  h.header_only = true;
  EXPECT_EQ(SendWqeBytes(h, WqeLayout{}), 64u);
  EXPECT_EQ(Mmio(SendWqeBytes(h, WqeLayout{}), Gen3x16()).mmio_lines, 1u);
}

TEST(Cost, WqeByMmioWritesWholeCacheLinesWithRequestHeaders) {
  PcieBytes b = PostBatch(1, 100, Gen3x16());
  EXPECT_EQ(b.mmio_lines, 2u);
  EXPECT_EQ(b.mmio_B, 2u * (64 + 26));
  EXPECT_EQ(b.d2h_B, 0u);
}

TEST(Cost, DoorbellBatchIsOneDoorbellPlusOneDmaOfTheBatch) {
  PcieBytes b = PostBatch(16, 100, Gen3x16());
  EXPECT_EQ(b.mmio_B, 8u + 26);
  EXPECT_EQ(b.dma_cpl_B, 16u * (128 + 22));
  EXPECT_EQ(b.d2h_tlps, 1u);  // one read request for the whole batch (Connect-IB)
}

TEST(Cost, OlderNicsReadOneWqePerDma) {
  PcieParams p = Gen3x16();
  p.wqes_per_dma = 1;
  PcieBytes b = PostBatch(16, 100, p);
  EXPECT_EQ(b.d2h_tlps, 16u);
  EXPECT_EQ(b.d2h_B, 16u * 26);
  EXPECT_EQ(b.dma_cpl_B, 16u * (128 + 22));
}

TEST(Cost, NonInlinePayloadIsFetchedByDmaInlineIsNot) {
  WrShape inl{Opcode::kWrite, Transport::kRc, 200, true, false};
  WrShape dma = inl;
  dma.inline_data = false;
  EXPECT_EQ(RequesterData(inl, Gen3x16()).dma_cpl_B, 0u);
  EXPECT_EQ(RequesterData(dma, Gen3x16()).dma_cpl_B, 200u + 2 * 22);  // ceil(200/128) completions
  EXPECT_EQ(RequesterData(dma, Gen3x16()).d2h_B, 26u);                 // one read request
}

TEST(Cost, SignaledWrWritesA64ByteCqe) {
  WrShape s{Opcode::kWrite, Transport::kRc, 8, true, true};
  WrShape u = s;
  u.signaled = false;
  EXPECT_EQ(RequesterData(s, Gen3x16()).d2h_B, 64u + 26);
  EXPECT_EQ(RequesterData(u, Gen3x16()).d2h_B, 0u);
}

TEST(Cost, InboundWriteLandsByDmaWriteHeaderOnlyDoesNot) {
  WrShape w{Opcode::kWrite, Transport::kUc, 32};
  EXPECT_EQ(Responder(w, WqeLayout{}, Gen3x16()).d2h_B, 32u + 26);
  w.header_only = true;
  w.payload_B = 0;
  EXPECT_EQ(Responder(w, WqeLayout{}, Gen3x16()).d2h_B, 0u);
}

TEST(Cost, WriteWithImmediateCompletesARecvAndCarriesImmDt) {
  WrShape w{Opcode::kWrite, Transport::kRc, 32};
  PcieBytes plain = Responder(w, WqeLayout{}, Gen3x16());
  uint64_t plain_wire = Wire(w, WireParams{}).req_B;
  w.with_imm = true;
  PcieBytes imm = Responder(w, WqeLayout{}, Gen3x16());
  EXPECT_EQ(imm.dma_cpl_B - plain.dma_cpl_B, 16u + 22);     // the RECV WQE comes back
  EXPECT_EQ(imm.d2h_B - plain.d2h_B, 26u + (64 + 26));      // its read request and the CQE
  EXPECT_EQ(Wire(w, WireParams{}).req_B - plain_wire, 4u);  // ImmDt
}

TEST(Cost, DmaReadsTouchWholeHostMemoryLines) {  // what uncore counters (PCM) see
  EXPECT_EQ(DmaRead(100, Gen3x16()).dma_read_lines, 2u);
  EXPECT_EQ(DmaRead(16, Gen3x16()).dma_read_lines, 1u);  // a RECV WQE costs a whole line
  EXPECT_EQ(DmaWrite(100, Gen3x16()).dma_read_lines, 0u);
}

TEST(Cost, RecvFetchesItsWqeWritesPayloadAndCqe) {
  WrShape s{Opcode::kSend, Transport::kUd, 32};
  PcieBytes b = Responder(s, WqeLayout{}, Gen3x16());
  EXPECT_EQ(b.dma_cpl_B, 16u + 22);                 // RECV WQE
  EXPECT_EQ(b.d2h_B, 26u + (32 + 26) + (64 + 26));  // read request, payload, CQE
}

TEST(Cost, InlineRecvAndHeaderOnlyRecvRemoveThePayloadWrite) {
  WrShape s{Opcode::kSend, Transport::kRc, 32};
  uint64_t regular = Responder(s, WqeLayout{}, Gen3x16()).d2h_B;
  s.inline_recv = true;
  EXPECT_EQ(Responder(s, WqeLayout{}, Gen3x16()).d2h_B, regular - (32 + 26));
  WrShape big = s;
  big.payload_B = 65;  // > 64 B does not fold into the CQE
  EXPECT_EQ(Responder(big, WqeLayout{}, Gen3x16()).d2h_tlps, 3u);  // request, payload, CQE
  WrShape hdr{Opcode::kSend, Transport::kUd, 0};
  hdr.header_only = true;
  EXPECT_EQ(Responder(hdr, WqeLayout{}, Gen3x16()).d2h_B, 26u + (64 + 26));
}

TEST(Cost, UdRecvLandsTheGrhOnlyWhenThePacketHasOne) {
  WrShape s{Opcode::kSend, Transport::kUd, 32};
  EXPECT_EQ(Responder(s, WqeLayout{}, Gen3x16(), true).d2h_B - Responder(s, WqeLayout{}, Gen3x16(), false).d2h_B, 40u);
}

TEST(Cost, InboundReadIsADmaReadOutboundReadADmaWrite) {
  WrShape r{Opcode::kRead, Transport::kRc, 256, false, false};
  EXPECT_EQ(Responder(r, WqeLayout{}, Gen3x16()).dma_cpl_B, 256u + 2 * 22);
  EXPECT_EQ(RequesterData(r, Gen3x16()).d2h_B, 256u + 26);
}

TEST(Cost, AtomicIsAReadModifyWriteAtTheResponder) {
  WrShape a{Opcode::kFaa, Transport::kRc, 8};
  PcieBytes b = Responder(a, WqeLayout{}, Gen3x16());
  EXPECT_EQ(b.dma_reads, 1u);
  EXPECT_EQ(b.dma_cpl_B, 8u + 22);
  EXPECT_EQ(b.d2h_B, 26u + 8 + 26);
}

TEST(Cost, EachSgeIsGatheredByItsOwnDmaRead) {
  WrShape s{Opcode::kSend, Transport::kRc, 4 * 64, false, false};
  s.sge = 4;
  PcieBytes b = RequesterData(s, Gen3x16());
  EXPECT_EQ(b.dma_reads, 4u);
  EXPECT_EQ(b.dma_cpl_B, 4u * (64 + 22));
}

TEST(Cost, PcieBenchConventionSplitsByMpsAndMrrs) {
  PcieParams p = Gen3x16();
  p.req_hdr_B = 24;
  p.cpl_hdr_B = 20;
  p.mps_B = 256;
  p.mrrs_B = 512;
  EXPECT_EQ(DmaWrite(1000, p).d2h_tlps, 4u);
  EXPECT_EQ(DmaRead(1000, p).d2h_tlps, 2u);
  EXPECT_EQ(DmaRead(1000, p).h2d_tlps, 8u);
  (void)Gen2x8();
}

TEST(Cost, IbHeadersPerPacketAndRcAcks) {
  WireParams ib;
  WrShape send{Opcode::kSend, Transport::kRc, 32};
  WireBytes w = Wire(send, ib);
  EXPECT_EQ(w.req_B, 8u + 12 + 4 + 2 + 32);  // LRH BTH ICRC VCRC + payload
  EXPECT_EQ(w.resp_B, 8u + 12 + 4 + 2 + 4);  // ACK with AETH
  WrShape ud{Opcode::kSend, Transport::kUd, 32};
  EXPECT_EQ(Wire(ud, ib).req_B, w.req_B + 8);  // DETH
  EXPECT_EQ(Wire(ud, ib).resp_packets, 0u);    // no ACKs on UD
  WrShape wr{Opcode::kWrite, Transport::kUc, 32};
  EXPECT_EQ(Wire(wr, ib).req_B, w.req_B + 16);  // RETH
  WrShape hdr{Opcode::kSend, Transport::kUd, 0};
  hdr.header_only = true;
  EXPECT_EQ(Wire(hdr, ib).req_B, 26u + 8 + 4);  // DETH + ImmDt, no payload
}

TEST(Cost, ReadsAndAtomicsCarryTheirExtendedHeaders) {
  WireParams ib;
  WrShape r{Opcode::kRead, Transport::kRc, 64};
  EXPECT_EQ(Wire(r, ib).req_B, 26u + 16);      // RETH
  EXPECT_EQ(Wire(r, ib).resp_B, 26u + 4 + 64);  // AETH + data
  WrShape a{Opcode::kCas, Transport::kRc, 8};
  EXPECT_EQ(Wire(a, ib).req_B, 26u + 28);      // AtomicETH
  EXPECT_EQ(Wire(a, ib).resp_B, 26u + 4 + 8);  // AETH + AtomicAckETH
}

TEST(Cost, MessagesAreSegmentedByPathMtu) {
  WireParams ib;
  ib.mtu_B = 2048;
  WrShape big{Opcode::kWrite, Transport::kRc, 5000};
  WireBytes w = Wire(big, ib);
  EXPECT_EQ(w.req_packets, 3u);
  EXPECT_EQ(w.req_B, 3u * 26 + 5000 + 16);
  EXPECT_EQ(w.resp_packets, 3u);  // one ACK per packet unless coalesced
  ib.ack_every = 4;
  EXPECT_EQ(Wire(big, ib).resp_packets, 1u);
}

TEST(Cost, RoceHeadersAndEthernetFraming) {
  WireParams v1;
  v1.kind = LinkKind::kRoceV1;
  WireParams v2 = v1;
  v2.kind = LinkKind::kRoceV2;
  EXPECT_EQ(v1.BaseHeaderBytes(), 14u + 40 + 12 + 4 + 4);
  EXPECT_EQ(v2.BaseHeaderBytes(), 14u + 20 + 8 + 12 + 4 + 4);
  v2.phy_B_per_packet = 20;  // preamble + IFG
  v2.min_frame_B = 64;
  WrShape tiny{Opcode::kSend, Transport::kRc, 0};
  EXPECT_EQ(Wire(tiny, v2).req_B, 64u + 20);  // padded to the minimum frame
}

}  // namespace
}  // namespace rdmalab::model
