// Key-value systems and sequencers are compositions of verb costs (acceptance 3).
#include <gtest/gtest.h>

#include "model/analytic.h"
#include "model/experiments.h"

namespace rdmalab::model {
namespace {

Prediction Kv(const nlohmann::json& params, const Profile& prof) {
  return Predict(PointFromJson({{"mode", "kv"}, {"params", params}}), prof);
}

TEST(Systems, HerdIsTheSumOfItsVerbsAndServerWork) {
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  Prediction p = Kv({{"system", "herd"}, {"put_fraction", 0.0}, {"value_size", 32}}, cib);
  VerbSpec wr{Opcode::kWrite, Transport::kUc, true, false, false};
  VerbSpec send{Opcode::kSend, Transport::kUd, true, false, true};
  WireParams w = cib.link;
  Demand expect = Inbound(Shape(wr, 16), cib, w);
  expect += Outbound(Shape(send, 32), 1, 64, cib, w);
  EXPECT_NEAR(p.per_op.nic_rx_ns, expect.nic_rx_ns, 1e-9);
  EXPECT_NEAR(p.per_op.nic_tx_ns, expect.nic_tx_ns, 1e-9);
  EXPECT_NEAR(p.per_op.h2d_mmio_B, expect.h2d_mmio_B, 1e-9);
  EXPECT_NEAR(p.per_op.d2h_B, expect.d2h_B, 1e-9);
  EXPECT_GT(p.per_op.cpu_ns, expect.cpu_ns);  // plus polling and the MICA lookup
}

TEST(Systems, BatchingHelpsHerdWhenCpuOrMmioBound) {
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  for (int cores : {1, 4}) {
    double base = Kv({{"system", "herd"}, {"workers", cores}}, cib).mops;
    // guide16 Sec. 4.1 applies batching with multi-queue
    double batched = Kv({{"system", "herd"}, {"workers", cores}, {"batching", true}, {"queues", 3}}, cib).mops;
    EXPECT_GT(batched, base) << cores;
  }
  // 51 clients over 14 workers: a sweep finds about one request, and a Doorbell for one
  // response costs a WQE DMA read that WQE-by-MMIO does not (guide16 Fig. 7 beyond 6 cores)
  double base = Kv({{"system", "herd"}, {"workers", 14}}, cib).mops;
  double batched = Kv({{"system", "herd"}, {"workers", 14}, {"batching", true}, {"queues", 3}}, cib).mops;
  EXPECT_LT(batched, base);
}

TEST(Systems, PilafIsBoundByItsReadsFarmVarByTwoReads) {
  Profile p = LoadProfile("cx3-pcie2", DefaultProfileDir());
  Prediction pilaf = Kv({{"system", "pilaf"}, {"put_fraction", 0.0}}, p);
  EXPECT_NEAR(pilaf.mops, 19.5 / 2.6, 0.01);  // 1.6 bucket READs + 1 value READ at 19.5 M READs/s
  Prediction var = Kv({{"system", "farm-var"}, {"put_fraction", 0.0}}, p);
  EXPECT_NEAR(var.mops, 19.5 / 2, 0.6);
}

TEST(Systems, DrtmPutsCollapseOnCx3WhereAtomicsSerialize) {
  Profile cx3 = LoadProfile("cx3", DefaultProfileDir());
  Prediction all_put = Kv({{"system", "drtm"}, {"put_fraction", 1.0}}, cx3);
  EXPECT_EQ(all_put.bottleneck_label, "PCIe RTT");
  EXPECT_NEAR(all_put.mops, 2.7 / 2, 0.01);  // two serialized atomics per PUT
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  EXPECT_GT(Kv({{"system", "drtm"}, {"put_fraction", 1.0}}, cib).mops, 10 * all_put.mops);
}

TEST(Systems, SequencerDesignsNameTheirBottlenecks) {
  ExperimentTable t = RunExperiment("guide16-table3", "", DefaultProfileDir());
  ASSERT_EQ(t.rows.size(), 5u);
  std::map<std::string, Prediction> by;
  for (const auto& r : t.rows) by[r.label] = r.prediction;
  EXPECT_EQ(by["atomics"].bottleneck_label, "PCIe RTT");
  EXPECT_EQ(by["herd-rpc"].bottleneck, "shared_counter");
  EXPECT_GT(by["herd-rpc-batch"].mops, 3 * by["herd-rpc"].mops);
  EXPECT_GE(by["spec-s0"].mops, by["herd-rpc-batch"].mops);
  // with enough requests outstanding for full sweeps, the header-only RECVs bound Spec-S0
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  Prediction full = Predict(PointFromJson({{"mode", "sequencer"}, {"roles", {{"client", 70}}},
                                           {"params", {{"design", "spec-s0"}, {"tx_depth", 16}, {"window_bound", false}}}}),
                            cib);
  EXPECT_EQ(full.bottleneck, "nic_rx");
}

TEST(Systems, HydraDbGetIsOneReadOfValueAndLease) {
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  Prediction p = Kv({{"system", "hydradb"}, {"put_fraction", 0.0}, {"value_size", 32}}, cib);
  VerbSpec read{Opcode::kRead, Transport::kRc, false, false, true};
  Demand expect = Inbound(Shape(read, 40), cib, cib.link);
  EXPECT_NEAR(p.per_op.nic_rx_ns, expect.nic_rx_ns + QpCacheMisses(51, cib, true).nic_rx_ns, 1e-9);
  EXPECT_NEAR(p.per_op.h2d_dma_B, expect.h2d_dma_B + QpCacheMisses(51, cib, true).h2d_dma_B, 1e-9);
  EXPECT_EQ(p.per_op.cpu_ns, 0);  // GETs never touch the server's CPU
}

TEST(Systems, ReadBasedBoundIsHalfThePeakInboundReadRate) {
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  Prediction bound = Kv({{"system", "read-based"}, {"value_size", 32}}, cib);
  Prediction read = Predict(
      PointFromJson({{"mode", "tput"}, {"params", {{"verb", "read"}, {"size", 32}, {"direction", "inbound"}}}}),
      cib);
  EXPECT_NEAR(bound.mops, read.mops / 2, 0.01 * read.mops);
}

TEST(Systems, ZipfKeysLoadOneHerdWorkerMoreAndTheCoresAddUpToTheTotal) {
  Profile p = LoadProfile("cx3-pcie2", DefaultProfileDir());
  nlohmann::json base = {{"system", "herd"}, {"workers", 10}, {"distribution", "zipf"}};
  double total = Kv(base, p).mops, sum = 0, hottest = 0;
  for (int core = 0; core < 10; ++core) {
    nlohmann::json one = base;
    one["core"] = core;
    double mops = Kv(one, p).mops;
    sum += mops;
    hottest = std::max(hottest, mops);
  }
  EXPECT_NEAR(sum, total, 1e-6 * total);
  EXPECT_GT(hottest, 1.1 * total / 10);
  // With one core the hottest worker is the whole CPU: skew costs throughput where the CPU limits.
  nlohmann::json cpu_bound = {{"system", "herd"}, {"workers", 2}};
  nlohmann::json cpu_bound_zipf = cpu_bound;
  cpu_bound_zipf["distribution"] = "zipf";
  EXPECT_LT(Kv(cpu_bound_zipf, p).mops, Kv(cpu_bound, p).mops);
  EXPECT_THROW(Kv({{"system", "herd"}, {"workers", 10}, {"core", 10}}, p), ModelError);
}

TEST(Systems, WhatTheModelDoesNotRepresentIsRefusedWithTheReason) {
  Profile cx = LoadProfile("cx-nosql", DefaultProfileDir());
  try {
    Kv({{"system", "redis"}}, cx);
    FAIL() << "redis must not be predicted";
  } catch (const NotModeled& e) {
    EXPECT_NE(std::string(e.what()).find("TCP"), std::string::npos) << e.what();
  }
  auto tput = [&](const nlohmann::json& params) {
    return Predict(PointFromJson({{"mode", "tput"}, {"params", params}}), cx);
  };
  EXPECT_THROW(tput({{"verb", "send"}, {"stack", "udp"}}), NotModeled);
  EXPECT_THROW(tput({{"verb", "send"}, {"numa", "far"}}), NotModeled);
  EXPECT_THROW(tput({{"verb", "send"}, {"page_offset", 64}}), NotModeled);
  EXPECT_THROW(tput({{"verb", "send"}, {"buffers", 2}}), NotModeled);
  EXPECT_GT(tput({{"verb", "read"}, {"placement", "clustered"}, {"distribution", "zipf"}}).mops, 0);
}

TEST(Systems, SequencerBatchOfOneMeansOnePostPerResponse) {
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  auto seq = [&](int batch) {
    return Predict(PointFromJson({{"mode", "sequencer"}, {"params", {{"design", "spec-s0"}, {"batch", batch}}}}),
                   cib);
  };
  // WQE-by-MMIO for every response vs one doorbell per 16 (RECV re-posts are the same in both)
  EXPECT_NEAR(seq(1).per_op.pio_posts - seq(16).per_op.pio_posts, 1 - 1.0 / 16, 1e-9);
}

TEST(Systems, EveryAcceptanceExperimentPrintsARateAndABottleneck) {
  for (const auto& id : ExperimentIds()) {
    ExperimentTable t = RunExperiment(id, "", DefaultProfileDir());
    EXPECT_FALSE(t.rows.empty()) << id;
    for (const auto& r : t.rows) {
      EXPECT_GT(r.prediction.mops, 0) << id << " " << r.label;
      EXPECT_FALSE(r.prediction.bottleneck.empty()) << id << " " << r.label;
    }
    EXPECT_NE(FormatExperiment(t).find("bottleneck"), std::string::npos);
  }
}

}  // namespace
}  // namespace rdmalab::model
