// Issue 18: each NIC mechanism bends the curve of the experiment that shows it in the
// papers, qualitatively (never fitted to those application-level results).
#include <gtest/gtest.h>

#include "model/analytic.h"
#include "model/report.h"

namespace rdmalab::model {
namespace {

Prediction At(const std::string& mode, const nlohmann::json& params, const Profile& prof,
              const nlohmann::json& roles = nlohmann::json::object()) {
  return Predict(PointFromJson({{"mode", mode}, {"roles", roles}, {"params", params}}), prof);
}

Profile Load(const std::string& name) { return LoadProfile(name, DefaultProfileDir()); }

// herd14 Sec. 3.3 / Fig. 6: N nodes of N processes all-to-all. Outbound UC WRITEs keep
// their rate while the N x N QPs fit the QP-context cache and fall beyond it; UD SENDs
// need N QPs and stay flat.
TEST(Mechanisms, AllToAllWritesFallBeyondTheQpCache) {
  Profile p = Load("cx3-pcie2");
  auto rate = [&](const std::string& verb, const std::string& conn, int nodes) {
    return At("tput", {{"verb", verb}, {"connection", conn}, {"size", 32}, {"direction", "alltoall"},
                       {"tx_depth", 16}, {"cq_mod", 64}}, p, {{"node", nodes}}).mops;
  };
  ASSERT_LE(8u * 8u, p.nic.qp_cache_entries);
  ASSERT_GT(16u * 16u, p.nic.qp_cache_entries);
  EXPECT_NEAR(rate("write_inline", "UC", 8), rate("write_inline", "UC", 2), 1e-9);
  EXPECT_LT(rate("write_inline", "UC", 16), 0.5 * rate("write_inline", "UC", 8));
  EXPECT_NEAR(rate("send_inline", "UD", 16), rate("send_inline", "UD", 2), 1e-9);
  EXPECT_GT(rate("send_inline", "UD", 16), rate("write_inline", "UC", 16));
}

// herd14 Fig. 12 (ConnectX-3, E5-2450, 6 server processes): HERD keeps its rate up to a
// few hundred clients, then declines; a window of 16 declines less than HERD's 4.
TEST(Mechanisms, HerdDeclinesWithHundredsOfClientQps) {
  Profile p = Load("cx3");
  auto herd = [&](int clients, int window, const Profile& prof) {
    return At("kv", {{"system", "herd"}, {"workers", 6}, {"clients", clients}, {"window", window},
                     {"window_bound", false}}, prof);
  };
  EXPECT_NEAR(herd(128, 4, p).mops, herd(64, 4, p).mops, 1e-9);
  EXPECT_LT(herd(512, 4, p).mops, 0.95 * herd(128, 4, p).mops);
  EXPECT_LT(herd(1024, 4, p).mops, herd(512, 4, p).mops);
  EXPECT_EQ(herd(1024, 4, p).bottleneck, "nic_rx");
  EXPECT_GT(herd(1024, 16, p).mops, herd(1024, 4, p).mops);
  Profile off = p;
  off.disabled = kQpCache;
  EXPECT_NEAR(herd(1024, 4, off).mops, herd(64, 4, off).mops, 1e-9) << "the decline is the QP cache's";
}

// guide16 Sec. 3.3, 5.2.1 / Fig. 11b: one core on one QP is bound to one PU, which waits for
// each doorbell's WQE DMA, slower than the core's WQE-by-MMIO posts; a second QP doubles the
// batched rate until the core limits it.
// WQE-by-MMIO posts are CPU-bound and gain nothing from more QPs.
TEST(Mechanisms, MultiQueueLiftsASingleCoresUdSends) {
  Profile cib = Load("cib");
  auto send = [&](int qps, int batch) {
    return At("tput", {{"verb", "send_inline"}, {"connection", "UD"}, {"size", 60}, {"direction", "outbound"},
                       {"threads", 1}, {"qp", qps}, {"post_list", batch}, {"cq_mod", 16}}, cib);
  };
  EXPECT_EQ(send(1, 16).bottleneck, "nic_tx");
  EXPECT_LT(send(1, 16).mops, send(1, 1).mops) << "on one QP, batching lowers the core's rate (Fig. 11b)";
  EXPECT_NEAR(send(2, 16).mops / send(1, 16).mops, 2.0, 0.05);
  EXPECT_GE(send(4, 16).mops / send(1, 16).mops, 2.0);
  EXPECT_EQ(send(4, 16).bottleneck, "cpu");
  EXPECT_NEAR(send(4, 1).mops, send(1, 1).mops, 1e-9);
  Profile off = cib;
  off.disabled = kPuPerQp;
  EXPECT_GT(At("tput", {{"verb", "send_inline"}, {"connection", "UD"}, {"size", 60}, {"direction", "outbound"},
                        {"threads", 1}, {"qp", 1}, {"post_list", 16}, {"cq_mod", 16}}, off).mops,
            send(1, 16).mops);
}

// guide16 Sec. 4.2 / Fig. 7: the batched RPC sequencer on one core is PU-bound; multi-queue
// (3 response QPs per core) lifts it to the core's own limit.
TEST(Mechanisms, MultiQueueLiftsASingleCoresSequencer) {
  Profile cib = Load("cib");
  auto seq = [&](const std::string& design) {
    return At("sequencer", {{"design", design}, {"threads", 1}}, cib, {{"client", 70}});
  };
  Prediction one = seq("herd-rpc-batch"), mq = seq("herd-rpc-mq");
  EXPECT_EQ(one.bottleneck, "nic_tx");
  EXPECT_GT(mq.mops, 1.05 * one.mops);
  EXPECT_EQ(mq.bottleneck, "cpu");
}

// guide16 Sec. 4.2 / Fig. 7: with 70 clients fixed, each of more workers finds fewer requests
// per sweep, so the responses per doorbell fall (and the rate with them beyond a point).
TEST(Mechanisms, ResponsesPerDoorbellFallAsCoresGrowWithFixedClients) {
  Profile cib = Load("cib");
  auto seq = [&](int cores) {
    return At("sequencer", {{"design", "herd-rpc-mq"}, {"threads", cores}}, cib, {{"client", 70}});
  };
  double last = 1e9;
  for (int cores : {2, 6, 8, 10, 14}) {
    double sweep = seq(cores).requests_per_sweep;
    EXPECT_LE(sweep, last) << cores;
    last = sweep;
  }
  EXPECT_EQ(seq(2).requests_per_sweep, 16);  // capped: one request per client, 16 per doorbell
  EXPECT_LT(seq(14).requests_per_sweep, 0.5 * seq(6).requests_per_sweep);
  EXPECT_LT(seq(14).mops, seq(8).mops);
  // HERD's GET responses the same way
  auto herd = [&](int cores) {
    return At("kv", {{"system", "herd"}, {"workers", cores}, {"clients", 70}, {"batching", true}, {"queues", 3},
                     {"window_bound", false}}, cib).requests_per_sweep;
  };
  EXPECT_GT(herd(2), herd(12));
}

// guide16 Sec. 4.2.2 / Fig. 8: the Doorbell costs the response a WQE DMA read, so batching
// adds latency even when the load is light.
TEST(Mechanisms, BatchingAddsLatencyAtLowLoad) {
  Profile cib = Load("cib");
  auto lat = [&](const nlohmann::json& extra) {
    nlohmann::json params = {{"design", "spec-s0"}, {"threads", 10}, {"tx_depth", 1}};
    for (const auto& [k, v] : extra.items()) params[k] = v;
    Prediction p = At("sequencer", params, cib, {{"client", 2}});
    EXPECT_EQ(p.bottleneck, "window");  // light load: the clients' window limits
    return p.lat_us;
  };
  double batched = lat(nlohmann::json::object()), one_by_one = lat({{"batch", 1}});
  EXPECT_NEAR(batched - one_by_one, cib.lat.pcie_rtt_ns / 1000, 0.05);
}

// guide16 Sec. 4.2.2: Spec-S0 claims a sweep's counter values with one atomic add in both
// forms, so its non-batched form is not bound by the shared counter as the RPC baseline is.
TEST(Mechanisms, SpecS0BatchesTheCounterWithAndWithoutResponseBatching) {
  Profile cib = Load("cib");
  auto seq = [&](const std::string& design, int batch) {
    return At("sequencer", {{"design", design}, {"batch", batch}, {"window_bound", false}}, cib, {{"client", 70}});
  };
  Prediction spec_one = seq("spec-s0", 1), spec = seq("spec-s0", 16), rpc = seq("herd-rpc", 1);
  EXPECT_LT(spec_one.per_op.serial_cpu_ns, 0.5 * cib.cpu.shared_atomic_ns);
  EXPECT_LT(spec.per_op.serial_cpu_ns, 0.5 * cib.cpu.shared_atomic_ns);
  EXPECT_NEAR(rpc.per_op.serial_cpu_ns, cib.cpu.shared_atomic_ns, 1e-9);
  EXPECT_GT(spec_one.mops, 2 * rpc.mops);
}

// nosql Sec. 4.6 / Fig. 18: a non-inline WRITE's payload is DMA-read before the NIC can send
// it, an inline one travels in the WQE: small inline WRITEs are faster, with one client
// process or 24 (the survey's setup).
TEST(Mechanisms, SmallInlineWritesBeatNonInline) {
  Profile p = Load("cx-nosql");
  auto write = [&](const std::string& verb, int qps, const Profile& prof) {
    return At("tput", {{"verb", verb}, {"connection", "RC"}, {"size", 16}, {"direction", "outbound"}, {"qp", qps},
                       {"cq_mod", 16}}, prof);
  };
  for (int qps : {1, 24}) {
    EXPECT_GT(write("write_inline", qps, p).mops, 1.3 * write("write", qps, p).mops) << qps;
    EXPECT_GT(write("write", qps, p).lat_us, write("write_inline", qps, p).lat_us) << qps;
  }
  Profile off = p;
  off.disabled = kPayloadFetch;
  EXPECT_NEAR(write("write", 24, off).per_op.nic_tx_ns, write("write_inline", 24, off).per_op.nic_tx_ns, 1e-9);
  EXPECT_EQ(write("write", 24, off).per_op.fetch_wait_ns, 0);
}

// nosql Sec. 4.6 / Fig. 18: WRITEs from one client process to a server. The server's NIC is not
// what limits them: the requester's is, which DMA-reads each non-inline payload before sending
// it, so inline WRITEs reach the server several times faster (the survey: 4.5x at small sizes).
// More client processes lift the bound; a point at the papers' scale (window_bound false) has none.
TEST(Mechanisms, FewRequestersBoundAnInboundRate) {
  Profile p = Load("cx-nosql");
  auto write = [&](const std::string& verb, int clients, bool bound, const Profile& prof) {
    return At("tput", {{"verb", verb}, {"connection", "RC"}, {"size", 8}, {"direction", "inbound"}, {"tx_depth", 16},
                       {"window_bound", bound}}, prof, {{"client", clients}});
  };
  Prediction dma = write("write", 1, true, p), inl = write("write_inline", 1, true, p);
  EXPECT_EQ(dma.bottleneck, "requesters");
  EXPECT_EQ(dma.bottleneck_label, "requesters' NIC");
  EXPECT_GT(inl.mops, 3 * dma.mops);
  EXPECT_GT(write("write", 4, true, p).mops, 3 * dma.mops);
  EXPECT_NE(write("write", 1, false, p).bottleneck, "requesters");
  Profile off = p;
  off.disabled = kRequesters;
  EXPECT_LT(write("write_inline", 1, true, off).mops, 1.5 * write("write", 1, true, off).mops)
      << "without the requesters' limit only the window (latency) separates them";
}

// guide16 Sec. 3.4, 4.3.2 / Fig. 10: a PU that takes an atomic waits for the NIC's lock and
// serves no other verb meanwhile. ConnectX-3 serializes every atomic behind one lock, so a few
// PUTs (two atomics each) stall the PUs that would serve the GETs' READs: 5% PUTs cost far more
// than their own lock time. Connect-IB's 4096 lock buckets leave its PUs unstalled.
TEST(Mechanisms, PusWaitingForTheAtomicLockSlowTheReads) {
  auto drtm = [&](double puts, const Profile& prof) {
    return At("kv", {{"system", "drtm"}, {"key_size", 16}, {"value_size", 32}, {"put_fraction", puts},
                     {"window_bound", false}}, prof);
  };
  Profile cx3 = Load("cx3");
  Prediction gets = drtm(0, cx3), few_puts = drtm(0.05, cx3);
  EXPECT_EQ(few_puts.bottleneck, "lock_wait");
  EXPECT_LT(few_puts.mops, 0.8 * gets.mops);
  Profile off = cx3;
  off.disabled = kLockWait;
  EXPECT_GT(drtm(0.05, off).mops, 0.9 * gets.mops) << "without the stalls the lock alone does not bind at 5% PUTs";
  EXPECT_EQ(drtm(1, cx3).bottleneck, "atomic_lock");  // all atomics: the lock itself
  Profile cib = Load("cib");
  EXPECT_NE(drtm(0.05, cib).bottleneck, "lock_wait");
}

// nosql Sec. 4.4 / Fig. 14: READs of values chosen by key among 4 M keys. Small values fit
// the NIC's translation cache whatever the keys; larger ones miss, uniform keys more than Zipf
// keys, and Zipf keys more when the values lie scattered than when hot values share pages.
TEST(Mechanisms, ZipfBeatsUniformAndClusteredBeatsScatteredForLargeReads) {
  Profile p = Load("cx-nosql");
  auto read = [&](int size, const std::string& distribution, const std::string& placement, const Profile& prof) {
    return At("tput", {{"verb", "read"}, {"connection", "RC"}, {"direction", "inbound"}, {"tx_depth", 16},
                       {"keys", 4 << 20}, {"size", size}, {"distribution", distribution}, {"placement", placement}},
              prof, {{"client", 8}}).mops;
  };
  EXPECT_NEAR(read(4, "zipf", "clustered", p), read(4, "uniform", "unclustered", p), 1e-9);
  for (int size : {32, 64}) {
    EXPECT_GT(read(size, "zipf", "clustered", p), 1.3 * read(size, "uniform", "clustered", p)) << size;
    EXPECT_GT(read(size, "zipf", "clustered", p), 1.3 * read(size, "zipf", "unclustered", p)) << size;
    EXPECT_GT(read(size, "zipf", "unclustered", p), read(size, "uniform", "unclustered", p)) << size;
  }
  EXPECT_LT(read(64, "uniform", "clustered", p), read(4, "uniform", "clustered", p));
  Profile off = p;
  off.disabled = kTranslation;
  EXPECT_NEAR(read(64, "uniform", "unclustered", off), read(64, "zipf", "clustered", off), 1e-9);
}

// herd14 Sec. 4.1.1, 5.4 / Fig. 11: a HERD worker answers a request when two later requests
// (or two flushes, each after several hundred idle cycles) have advanced its pipeline. Under
// light load every answer waits for the flushes; one worker taking all of a load waits less
// than ten sharing it (the paper's one partition below ten), a saturated worker hardly at all.
// A window-bound rate falls with the longer round trip; the design without the pipeline waits
// for nothing.
TEST(Mechanisms, HerdAnswersWaitInALightlyLoadedWorkersPipeline) {
  Profile p = Load("cx3-pcie2");
  ASSERT_GT(p.cpu.pipeline_flush_ns, 0);
  auto herd = [&](int workers, int clients, int window, const Profile& prof) {
    return At("kv", {{"system", "herd"}, {"key_size", 16}, {"value_size", 32}, {"put_fraction", 0.05},
                     {"workers", workers}, {"clients", clients}, {"window", window}}, prof);
  };
  Profile off = p;
  off.disabled = kPipelineFlush;
  double flushes_us = 2 * p.cpu.pipeline_flush_ns / 1000;
  Prediction light = herd(10, 1, 1, p), light_off = herd(10, 1, 1, off);
  EXPECT_NEAR(light.lat_us - light_off.lat_us, flushes_us, 0.05 * flushes_us);
  EXPECT_LT(light.mops, light_off.mops) << "one request in flight: the rate is the round trip's";
  EXPECT_EQ(light.bottleneck, "window");
  double one_partition = herd(1, 4, 4, p).lat_us - herd(1, 4, 4, off).lat_us;
  double ten_partitions = herd(10, 4, 4, p).lat_us - herd(10, 4, 4, off).lat_us;
  EXPECT_LT(one_partition, 0.95 * ten_partitions);
  Prediction saturated = herd(1, 16, 4, p);
  EXPECT_EQ(saturated.bottleneck, "cpu");
  EXPECT_LT(saturated.lat_us - herd(1, 16, 4, off).lat_us, 0.9 * flushes_us);
  EXPECT_NEAR(saturated.mops, herd(1, 16, 4, off).mops, 1e-9) << "a busy worker's rate is its CPU's";
  Profile cib = Load("cib");
  EXPECT_EQ(cib.cpu.pipeline_flush_ns, 0) << "guide16's batched HERD has no two-stage pipeline";
}

// `explain` names each mechanism's share and the one that sets the rate.
TEST(Mechanisms, ExplainNamesTheMechanismThatSetsTheRate) {
  Profile cx3 = Load("cx3");
  Point herd = PointFromJson({{"mode", "kv"}, {"params", {{"system", "herd"}, {"workers", 6}, {"clients", 1024},
                                                          {"window_bound", false}}}});
  std::string text = MechanismShares(herd, cx3, Predict(herd, cx3));
  for (const auto& m : kMechanisms) EXPECT_NE(text.find(m.name), std::string::npos) << m.name;
  EXPECT_NE(text.find("sets the rate: qp_cache"), std::string::npos) << text;
  Profile cib = Load("cib");
  Point read = PointFromJson({{"mode", "tput"}, {"params", {{"verb", "read"}, {"size", 32}}}});
  EXPECT_NE(MechanismShares(read, cib, Predict(read, cib)).find("sets the rate: none of these"), std::string::npos);
}

}  // namespace
}  // namespace rdmalab::model
