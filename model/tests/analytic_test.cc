// The analytic bottleneck model: each resource limits where the papers say it does.
#include <gtest/gtest.h>

#include <vector>

#include "model/analytic.h"

namespace rdmalab::model {
namespace {

const Profile& Cib() {
  static Profile p = LoadProfile("cib", DefaultProfileDir());
  return p;
}

Prediction Eval(const nlohmann::json& params, const std::string& mode = "tput", const Profile& prof = Cib(),
                const nlohmann::json& roles = nlohmann::json::object()) {
  return Predict(PointFromJson({{"mode", mode}, {"roles", roles}, {"params", params}}), prof);
}

const nlohmann::json kUdSend = {{"verb", "send_inline"}, {"connection", "UD"}, {"size", 32}, {"direction", "outbound"}, {"cq_mod", 16}};

TEST(Analytic, NonBatchedUdSendIsMmioBound) {
  Prediction p = Eval(kUdSend);
  EXPECT_EQ(p.bottleneck, "pcie_h2d");
  EXPECT_EQ(p.bottleneck_label, "MMIO bw");
  EXPECT_NEAR(p.mops, 175.04 / 2, 0.2);  // 2 lines per WQE (DLLPs travel the other way)
}

TEST(Analytic, DoorbellBatchingMovesTheBoundToDmaReads) {
  nlohmann::json b = kUdSend;
  b["post_list"] = 16;
  Prediction p = Eval(b);
  EXPECT_EQ(p.bottleneck_label, "DMA bw");
  EXPECT_GT(p.mops, Eval(kUdSend).mops);
  EXPECT_NEAR(p.per_op.h2d_mmio_B, (8 + 26) / 16.0, 1e-9);  // doorbell amortised over the batch
}

TEST(Analytic, InboundReadBecomesLinkBoundWithPayload) {
  EXPECT_EQ(Eval({{"verb", "read"}, {"size", 32}}).bottleneck, "nic_rx");
  Prediction big = Eval({{"verb", "read"}, {"size", 1024}});
  EXPECT_EQ(big.bottleneck, "link_tx");
  EXPECT_NEAR(big.gbps, 2 * 54.55 * 1024 / (1024 + 26 + 4 + 8), 0.1);
}

TEST(Analytic, OneCounterSerializesAtomicsOnThePcieRoundTrip) {
  Prediction one = Eval({{"verb", "faa"}, {"counters", 1}}, "atomics");
  EXPECT_EQ(one.bottleneck_label, "PCIe RTT");
  EXPECT_NEAR(one.mops, 1e3 / Cib().nic.atomic_lock_hold_ns, 1e-6);
  // 16 buckets: the lock (28 ns per atomic) and the PUs' own work (19 ns) are both busy, and
  // PUs waiting for the lock serve nothing else (guide16 Sec. 3.4): a little below 16x
  Prediction sixteen = Eval({{"verb", "faa"}, {"counters", 16}}, "atomics");
  EXPECT_LT(sixteen.mops, 16 * one.mops);
  EXPECT_GT(sixteen.mops, 0.9 * 16 * one.mops);
  EXPECT_EQ(sixteen.bottleneck, "lock_wait");
  EXPECT_EQ(Eval({{"verb", "cas"}, {"counters", 65536}}, "atomics").bottleneck_label, "NIC");
}

TEST(Analytic, OneQpEngagesOnePu) {
  Prediction all = Eval({{"verb", "read"}, {"size", 8}});
  Prediction one = Eval({{"verb", "read"}, {"size", 8}, {"qp", 1}});
  EXPECT_NEAR(one.mops, all.mops / Cib().nic.pus, 1e-6);
}

TEST(Analytic, ManyQpsMissTheQpContextCache) {
  Profile cx3 = LoadProfile("cx3-pcie2", DefaultProfileDir());
  nlohmann::json w = {{"verb", "write"}, {"connection", "UC"}, {"size", 32}};
  double few = Eval(w, "tput", cx3).mops;
  w["tx_depth"] = 16;  // the window calibrate assumes for herd14 Sec. 3.3's clients
  double many = Eval(w, "tput", cx3, {{"client", 1600}}).mops;
  EXPECT_NEAR(few, 35, 0.1);
  EXPECT_NEAR(many, 30, 0.1);
}

TEST(Analytic, InlineReceiveHelpsOnCx3ButNotOverUdOnCib) {
  Profile cx3 = LoadProfile("cx3", DefaultProfileDir());
  nlohmann::json r = {{"verb", "send"}, {"connection", "UD"}, {"size", 32}};
  nlohmann::json ri = r;
  ri["inline_recv"] = true;
  EXPECT_GT(Eval(ri, "tput", cx3).mops, Eval(r, "tput", cx3).mops);
  EXPECT_DOUBLE_EQ(Eval(ri).mops, Eval(r).mops);
  EXPECT_DOUBLE_EQ(Eval(ri).per_op.d2h_B, Eval(r).per_op.d2h_B);
}

TEST(Analytic, RoceCostsMoreWireBytesThanIb) {
  Profile cx3 = LoadProfile("cx3-pcie2", DefaultProfileDir());
  nlohmann::json r = {{"verb", "read"}, {"size", 64}};
  nlohmann::json roce = r;
  roce["link"] = "roce";
  EXPECT_GT(Eval(roce, "tput", cx3).per_op.link_tx_B, Eval(r, "tput", cx3).per_op.link_tx_B);
  EXPECT_THROW(Eval(roce), ModelError);  // cib has no RoCE block
}

TEST(Analytic, EchoCostsAnInboundRequestAndAnOutboundResponse) {
  Profile cx3 = LoadProfile("cx3-pcie2", DefaultProfileDir());
  Prediction e = Eval({{"request", "write"}, {"response", "send"}, {"size", 32}, {"optimizations", "inline,unsignaled,uc"}},
                     "echo", cx3);
  EXPECT_EQ(e.parts.size(), 3u);
  EXPECT_GT(e.per_op.nic_rx_ns, 0);
  EXPECT_GT(e.per_op.nic_tx_ns, 0);
  EXPECT_EQ(e.bottleneck_label, "PIO");
}

TEST(Analytic, EchoFollowsTheBenchmarksParameterConventions) {
  Profile cx3 = LoadProfile("cx3-pcie2", DefaultProfileDir());
  // herd14-fig5-echo step 4: UC WRITE requests, UD SEND responses, inline, 1 in 64 signaled
  Prediction bench = Eval({{"request", "write"}, {"response", "send"}, {"response_connection", "UD"}, {"connection", "UC"},
                           {"inline_size", 256}, {"cq_mod", 64}, {"size", 32}}, "echo", cx3);
  Prediction opts = Eval({{"request", "write"}, {"response", "send"}, {"size", 32}, {"optimizations", "inline,unsignaled,uc"}},
                         "echo", cx3);
  EXPECT_NEAR(bench.mops, opts.mops, 0.01);
  Prediction basic = Eval({{"request", "write"}, {"response", "send"}, {"size", 32}}, "echo", cx3);  // RC, not inline
  EXPECT_LT(basic.mops, bench.mops);
  EXPECT_GT(basic.per_op.h2d_dma_B, 0);  // the response payload is fetched by DMA
}

TEST(Analytic, SequencerDesignsHaveTheBenchmarksSpellingOnly) {
  Point a = PointFromJson({{"mode", "sequencer"}, {"params", {{"design", "herd-rpc-mq"}}}});
  EXPECT_EQ(a.design, "herd-rpc-mq");
  EXPECT_THROW(PointFromJson({{"mode", "sequencer"}, {"params", {{"design", "herd_rpc_batch_mq"}}}}), ModelError);
  EXPECT_THROW(PointFromJson({{"mode", "sequencer"}, {"params", {{"design", "paxos"}}}}), ModelError);
}

TEST(Analytic, ModernProfilesReachTheirAdvertisedMessageRates) {
  nlohmann::json hdr = {{"verb", "send"}, {"connection", "UD"}, {"header_only", true}, {"post_list", 16},
                        {"direction", "outbound"}, {"cq_mod", 64}};
  Profile cx5 = LoadProfile("cx5", DefaultProfileDir());
  Profile cx6 = LoadProfile("cx6", DefaultProfileDir());
  EXPECT_NEAR(Eval(hdr, "tput", cx5).mops, 200, 0.5);  // ConnectX-5 brief
  EXPECT_NEAR(Eval(hdr, "tput", cx6).mops, 215, 0.5);  // ConnectX-6 brief
  // PCIe 4.0 x16 doubles the MMIO line rate of PCIe 3.0 x16
  EXPECT_NEAR(cx6.pcie.DirectionBytesPerSec() / Cib().pcie.DirectionBytesPerSec(), 2.0, 1e-9);
}

TEST(Analytic, WindowBoundsTheRateByLittlesLaw) {
  Prediction p = Eval({{"verb", "read"}, {"size", 8}, {"direction", "outbound"}, {"qp", 1}, {"tx_depth", 1}});
  EXPECT_EQ(p.bottleneck, "window");
  EXPECT_NEAR(p.mops, 1 / p.lat_us, 1e-9);
  Prediction unbounded = Eval({{"verb", "read"}, {"size", 8}, {"direction", "outbound"}, {"qp", 1}, {"tx_depth", 1},
                               {"window_bound", false}});
  EXPECT_EQ(unbounded.bottleneck, "nic_tx");
}

TEST(Analytic, SgBatchingAmortisesPerWrCosts) {
  Profile cx3 = LoadProfile("cx3", DefaultProfileDir());
  nlohmann::json one = {{"verb", "send"}, {"size", 64}, {"sge", 1}};
  nlohmann::json many = one;
  many["sge"] = 16;
  EXPECT_GT(Eval(many, "sgbatch", cx3).mops, Eval(one, "sgbatch", cx3).mops);
}

// On a host engine each element of a gather list and of the RECV's scatter list is the engine's
// own work (nic.sge_ns): a batch of k packets does not amortise them, at the sender nor the receiver.
TEST(Analytic, HostEngineSgBatchPaysEveryElement) {
  Profile engine = LoadProfile("host-engine", DefaultProfileDir());
  engine.cpu.cores = 2;  // one core each: the two forwarding processes of a one-host run
  engine.nic.sge_ns = 0;
  nlohmann::json k16 = {{"verb", "send"}, {"connection", "RC"}, {"size", 64}, {"sge", 16}, {"threads", 1}};
  double free_elements = Eval(k16, "sgbatch", engine).mops;
  engine.nic.sge_ns = 100;
  double paid = Eval(k16, "sgbatch", engine).mops;
  // each packet: its element gathered and scattered by its sender's thread, (k - 1) / k of them
  // beyond a list's first, on both hosts' cores
  EXPECT_LT(paid, free_elements);
  EXPECT_LE(paid, 1e3 / (2 * 100.0 * 15 / 16) + 1e-9);
}

// On a host engine a client's window drains only while the client and its server thread both
// hold a core: 5 busy threads on 2 cores hold a given pair together 2 x 1 / (5 x 4) of the time.
TEST(Analytic, HostEngineWindowDrainsOnlyWhileBothHoldACore) {
  Profile engine = LoadProfile("host-engine", DefaultProfileDir());
  engine.cpu.cores = 2;
  engine.cpu.available_cores = 2;
  nlohmann::json herd = {{"system", "herd"}, {"window", 1}, {"workers", 1}, {"threads", 1}};
  Prediction one = Eval(herd, "kv", engine, {{"server", 1}, {"client", 1}});
  Prediction four = Eval(herd, "kv", engine, {{"server", 1}, {"client", 4}});
  ASSERT_EQ(one.bottleneck, "window");
  ASSERT_EQ(four.bottleneck, "window");
  EXPECT_NEAR(four.mops / one.mops, 4 * 2.0 / 20, 0.01);
}

// On a host engine a READ of a random key's data pays the memory's time as often as the keys'
// region outgrows the host's cache: nothing for a region it holds, nearly all of it for one a
// thousand times larger.
TEST(Analytic, HostEngineKeyedReadsPayForMemoryBeyondTheCache) {
  Profile engine = LoadProfile("host-engine", DefaultProfileDir());
  engine.cpu.cache_B = 1 << 20;
  engine.nic.cold_access_ns = 200;
  engine.nic.cold_line_ns = 80;
  auto per_read_ns = [&](int keys, const char* distribution = "uniform") {
    nlohmann::json read = {{"verb", "read"}, {"connection", "RC"}, {"size", 1024}, {"direction", "inbound"},
                           {"distribution", distribution}, {"keys", keys}, {"threads", 1}, {"qp", 1}};
    return 1e3 / Eval(read, "tput", engine, {{"server", 1}, {"client", 1}}).mops;
  };
  double cached = per_read_ns(512), cold = per_read_ns(1 << 20);  // 512 KiB, 1 GiB
  EXPECT_NEAR(cold - cached, 0.999 * (200 + 15 * 80), 5);
  // distribution none: each READ reads its own window slot, whatever keys says (rdmalab-bench)
  EXPECT_DOUBLE_EQ(per_read_ns(1 << 20, "none"), per_read_ns(0, "none"));
  EXPECT_NEAR(per_read_ns(1 << 20, "none"), cached, 1e-9);
}

TEST(Analytic, LatencyOfReadExceedsInlineWrite) {
  Prediction r = Eval({{"verb", "read"}, {"size", 32}}, "lat");
  Prediction w = Eval({{"verb", "write_inline"}, {"size", 32}}, "lat");
  EXPECT_GT(r.lat_us, 1.0);
  EXPECT_LT(r.lat_us, 5.0);
  EXPECT_GT(Eval({{"verb", "write"}, {"size", 32}}, "lat").lat_us, w.lat_us);  // payload DMA round trip
}

// A host engine (README "A NIC whose engine is the posting CPU"), on a host of 2 cores.
const Profile& HostEngine() {
  static Profile p = [] {
    Profile h = LoadProfile("host-engine", DefaultProfileDir());
    h.cpu.cores = 2;
    return h;
  }();
  return p;
}

TEST(HostEngine, InboundWritesAreThePeersWorkAndShareTheHostsCores) {
  nlohmann::json w = {{"verb", "write"}, {"size", 32}, {"inline_size", 64}, {"direction", "inbound"}, {"threads", 1}};
  auto rate = [&](int clients) { return Eval(w, "tput", HostEngine(), {{"server", 1}, {"client", clients}}); };
  Prediction one = rate(1), two = rate(2), three = rate(3);
  EXPECT_EQ(one.bottleneck, "nic_rx");
  const Profile& h = HostEngine();  // each WRITE signaled (cq_mod 1): the peer polls its completion
  EXPECT_NEAR(one.mops, 1e3 / (h.nic.t.write_in_ns + h.nic.line_ns + h.cpu.poll_cq_ns), 1e-6);
  EXPECT_NEAR(two.mops / one.mops, 2.0, 1e-9);    // a core each
  EXPECT_NEAR(three.mops / one.mops, 2.0, 1e-9);  // three busy threads time-share two cores
  for (const auto& r : one.resources)              // no PCIe, PIO or wire: softnic only counts them
    EXPECT_TRUE(r.name != "pcie_h2d" && r.name != "pcie_d2h" && r.name != "link_tx" && r.name != "link_rx") << r.name;
}

TEST(HostEngine, AnOutboundSendIsBoundByItsReceiversRecvHandling) {
  nlohmann::json s = {{"verb", "send"}, {"connection", "UD"}, {"size", 32}, {"inline_size", 64},
                      {"direction", "outbound"}, {"threads", 1}, {"post_list", 16}, {"cq_mod", 16}, {"tx_depth", 32}};
  Profile fast_sender = HostEngine();
  fast_sender.nic.t.send_ns = 20;
  fast_sender.nic.t.recv_ns = 100;
  Prediction p = Eval(s, "tput", fast_sender, {{"server", 1}, {"client", 1}});
  EXPECT_EQ(p.bottleneck, "nic_rx");
  EXPECT_NEAR(p.mops, 1e3 / fast_sender.nic.t.recv_ns, 1e-6);
}

TEST(HostEngine, AOneWrWriteBeyondTheFastPathRunsTheGeneralEngine) {
  nlohmann::json w = {{"verb", "write"}, {"direction", "outbound"}, {"threads", 1}, {"post_list", 1}, {"cq_mod", 16},
                      {"tx_depth", 32}};
  const Profile& h = HostEngine();
  auto ns = [&](uint32_t size) {
    w["size"] = size;
    return 1e3 / Eval(w, "tput", h, {{"server", 1}, {"client", 1}}).mops;
  };
  uint32_t fast = h.nic.fast_write_max_B;
  ASSERT_EQ(fast % 64, 0u);
  // one line more, and the general engine's post of a list of one instead of the fast path's
  EXPECT_NEAR(ns(fast + 64) - ns(fast), h.nic.line_ns + h.cpu.post_doorbell_ns + h.cpu.post_per_wr_ns - h.cpu.post_mmio_ns,
              1e-6);
  EXPECT_NEAR(ns(fast) - ns(fast / 2), 0, 1e-6);  // one line either way, both on the fast path
  // a peer's one-WR WRITE (inbound) pays the same at the peer's thread
  w["direction"] = "inbound";
  EXPECT_NEAR(ns(fast + 64) - ns(fast), h.nic.line_ns + h.cpu.post_doorbell_ns + h.cpu.post_per_wr_ns - h.cpu.post_mmio_ns,
              1e-6);
}

TEST(HostEngine, PayloadLinesAddToTheEngineTime) {
  nlohmann::json w = {{"verb", "write"}, {"direction", "outbound"}, {"threads", 1}, {"post_list", 16}, {"cq_mod", 16},
                      {"tx_depth", 32}};
  w["size"] = 64;
  double small_ns = 1e3 / Eval(w, "tput", HostEngine(), {{"server", 1}, {"client", 1}}).mops;
  w["size"] = 4096;
  double large_ns = 1e3 / Eval(w, "tput", HostEngine(), {{"server", 1}, {"client", 1}}).mops;
  EXPECT_NEAR(large_ns - small_ns, 63 * HostEngine().nic.line_ns, 1e-6);
}

TEST(HostEngine, ARocePointRunsTheSameEngineAsAnIbOne) {
  nlohmann::json w = {{"verb", "write"}, {"size", 32}, {"inline_size", 64}, {"direction", "outbound"}, {"threads", 1}};
  Prediction ib = Eval(w, "tput", HostEngine(), {{"server", 1}, {"client", 1}});
  w["link"] = "roce";
  Prediction roce = Eval(w, "tput", HostEngine(), {{"server", 1}, {"client", 1}});
  EXPECT_NEAR(roce.mops, ib.mops, 1e-9);  // an IB-measured host engine predicts its RoCE fabric too
}

// A key-value client's thread polls each READ's completion and does its own work per request
// (cpu.client_request_ns); on a host engine both are the peers' time, beside the READs they
// carry out. A device NIC's clients are assumed numerous: the same fields change nothing.
TEST(HostEngine, AKvClientPaysItsOwnWorkAndEveryReadsCompletion) {
  nlohmann::json get_only = {{"system", "farm"}, {"put_fraction", 0.0}, {"key_size", 16}, {"value_size", 32},
                             {"window", 4}, {"clients", 8}, {"threads", 1}, {"keys", 65536}};
  nlohmann::json roles = {{"server", 1}, {"client", 1}};
  Profile h = HostEngine();
  h.cpu.client_request_ns = 0;
  h.cpu.poll_cq_ns = 0;
  double bare_ns = 1e3 / Eval(get_only, "kv", h, roles).mops;
  h.cpu.client_request_ns = 70;
  h.cpu.poll_cq_ns = 25;
  Prediction p = Eval(get_only, "kv", h, roles);
  EXPECT_EQ(p.bottleneck, "nic_rx");
  EXPECT_NEAR(1e3 / p.mops - bare_ns, 70 + 25, 1e-6);  // FaRM-em: one READ per GET
  get_only["system"] = "farm-var";                      // two READs: two completions
  double var_bare_ns = [&] {
    Profile z = h;
    z.cpu.client_request_ns = z.cpu.poll_cq_ns = 0;
    return 1e3 / Eval(get_only, "kv", z, roles).mops;
  }();
  EXPECT_NEAR(1e3 / Eval(get_only, "kv", h, roles).mops - var_bare_ns, 70 + 2 * 25, 1e-6);
  Profile cx3 = LoadProfile("cx3", DefaultProfileDir());
  double device = Eval(get_only, "kv", cx3, roles).mops;
  cx3.cpu.client_request_ns = 1000;
  cx3.cpu.line_transfer_ns = 1000;
  EXPECT_DOUBLE_EQ(Eval(get_only, "kv", cx3, roles).mops, device);
}

// A sequencer's or an ECHO client's own work per answer beside its verbs (the window slot,
// the latency sample, a sequencer's exactly-once bitmap: cpu.sequencer_client_answer_ns,
// cpu.echo_client_answer_ns): on a host engine the peers' time in every design and for any
// verbs, the atomics sequencer included (no server thread takes part, so there it sets the
// rate with the atomics' engine time); a device NIC's clients do not limit.
TEST(HostEngine, AClientPaysItsOwnWorkPerAnswer) {
  struct Case {
    const char* mode;
    nlohmann::json params;
    double CpuParams::*answer_ns;
  };
  std::vector<Case> cases;
  for (const char* design : {"herd-rpc", "herd-rpc-batch", "herd-rpc-mq", "spec-s0", "atomics"})
    cases.push_back({"sequencer", {{"design", design}, {"threads", 1}, {"batch", 16}, {"count", 400000}},
                     &CpuParams::sequencer_client_answer_ns});
  for (const char* request : {"write", "send"})
    cases.push_back({"echo", {{"request", request}, {"response", "send"}, {"connection", "RC"},
                              {"response_connection", "UD"}, {"size", 32}, {"threads", 1}},
                     &CpuParams::echo_client_answer_ns});
  nlohmann::json roles = {{"server", 1}, {"client", 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.params.dump());
    Profile h = HostEngine();
    h.cpu.*c.answer_ns = 0;
    Prediction bare = Eval(c.params, c.mode, h, roles);
    h.cpu.*c.answer_ns = 90;
    Prediction p = Eval(c.params, c.mode, h, roles);
    EXPECT_NEAR(p.per_op.peer_ns - bare.per_op.peer_ns, 90, 1e-9);
    EXPECT_NEAR(p.per_op.cpu_ns, bare.per_op.cpu_ns, 1e-9);  // the server's threads do none of it
    if (c.params.value("design", "") == "atomics") {
      EXPECT_EQ(p.bottleneck, "nic_rx");
      EXPECT_LT(p.mops, bare.mops);
    }
    Profile cx3 = LoadProfile("cx3", DefaultProfileDir());
    double device = Eval(c.params, c.mode, cx3, roles).mops;
    cx3.cpu.*c.answer_ns = 1000;
    EXPECT_DOUBLE_EQ(Eval(c.params, c.mode, cx3, roles).mops, device);
  }
}

// A request or answer delivered by WRITE is loaded by its poller from the writer's core: one
// cache-line move at the server for the request, one at the client for a WRITE response.
TEST(HostEngine, AWriteDeliveredMessageCostsItsPollerALineTransfer) {
  nlohmann::json echo = {{"request", "write"}, {"response", "write"}, {"connection", "UC"},
                         {"response_connection", "UC"}, {"size", 32}, {"inline_size", 64}, {"threads", 1}};
  nlohmann::json roles = {{"server", 1}, {"client", 1}};
  Profile h = HostEngine();
  h.cpu.line_transfer_ns = 0;
  Prediction bare = Eval(echo, "echo", h, roles);
  h.cpu.line_transfer_ns = 40;
  Prediction p = Eval(echo, "echo", h, roles);
  EXPECT_NEAR(p.per_op.cpu_ns - bare.per_op.cpu_ns, 40, 1e-9);
  EXPECT_NEAR(p.per_op.peer_ns - bare.per_op.peer_ns, 40, 1e-9);
  echo["response"] = "send";  // a SEND's receiver takes a completion instead (nic.recv_ns)
  echo["response_connection"] = "UD";
  Prediction send = Eval(echo, "echo", h, roles);
  h.cpu.line_transfer_ns = 0;
  EXPECT_NEAR(send.per_op.peer_ns, Eval(echo, "echo", h, roles).per_op.peer_ns, 1e-9);
}

// Busy threads beyond the cores take turns by time slices: a client and the server thread it
// waits on progress only while both hold a core. Three threads on two cores: the server runs
// with one client or the other 2/3 of the time (as its plain share); four (two server threads,
// two clients): a given pair runs together 1/6 of the time, so the two pairs 1/3.
TEST(HostEngine, ARoundTripNeedsBothEndsOnACoreAtOnce) {
  Demand d;
  d.cpu_ns = 100;
  Engagement three;
  three.host_threads = 3, three.peer_threads = 2, three.cores = 1, three.round_trip_pairs = 2;
  EXPECT_NEAR(Solve(d, HostEngine(), HostEngine().link, three).mops, 10.0 * 2 / 3, 1e-9);
  Engagement four = three;
  four.host_threads = 4, four.cores = 2;
  EXPECT_NEAR(Solve(d, HostEngine(), HostEngine().link, four).mops, 10.0 / 3, 1e-9);
  four.round_trip_pairs = 0;  // streams that wait for no answer: each thread its plain share
  EXPECT_NEAR(Solve(d, HostEngine(), HostEngine().link, four).mops, 10.0, 1e-9);
}

}  // namespace
}  // namespace rdmalab::model
