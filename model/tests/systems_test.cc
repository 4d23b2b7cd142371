// Key-value systems and sequencers are compositions of verb costs (acceptance 3).
#include <gtest/gtest.h>

#include "model/analytic.h"
#include "model/experiments.h"

namespace rdmalab::model {
namespace {

Prediction Kv(const nlohmann::json& params, const Profile& prof) {
  return Predict(PointFromJson({{"mode", "kv"}, {"params", params}}, true), prof);
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
  for (int cores : {1, 4, 14}) {
    double base = Kv({{"system", "herd"}, {"threads", cores}}, cib).mops;
    double batched = Kv({{"system", "herd"}, {"threads", cores}, {"batching", true}}, cib).mops;
    EXPECT_GT(batched, base) << cores;
  }
}

TEST(Systems, PilafIsBoundByItsReadsFarmVarByTwoReads) {
  Profile p = LoadProfile("cx3-pcie2", DefaultProfileDir());
  Prediction pilaf = Kv({{"system", "pilaf"}, {"put_fraction", 0.0}}, p);
  EXPECT_NEAR(pilaf.mops, 19.5 / 2.6, 0.01);  // 1.6 bucket READs + 1 value READ at 19.5 M READs/s
  Prediction var = Kv({{"system", "farm_var"}, {"put_fraction", 0.0}}, p);
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
  EXPECT_EQ(by["herd_rpc"].bottleneck, "shared_counter");
  EXPECT_GT(by["herd_rpc_batch"].mops, 3 * by["herd_rpc"].mops);
  EXPECT_EQ(by["spec_s0"].bottleneck, "nic_rx");  // header-only RECVs
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
