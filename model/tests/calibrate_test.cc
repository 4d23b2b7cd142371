// Acceptance 2: after a reproducible fit, every verb-level number of calibration.yaml is
// predicted within +-10% and the bottleneck matches where the source names one.
#include <gtest/gtest.h>

#include <cmath>

#include "model/calibrate.h"
#include "model/analytic.h"

namespace rdmalab::model {
namespace {

const CalibrationResult& Result() {
  static CalibrationResult r = Calibrate(DefaultCalibrationPath(), DefaultProfileDir(), 0.10);
  return r;
}

TEST(Calibrate, EveryPublishedRateIsWithinTenPercentWithTheNamedBottleneck) {
  int rates = 0;
  for (const auto& row : Result().rows) {
    EXPECT_TRUE(row.pass) << row.profile << ": " << row.what << " published " << row.published << " predicted "
                          << row.predicted << " (" << row.predicted_bottleneck << ") " << row.note;
    if (row.unit == "mops") {
      ++rates;
      EXPECT_LE(std::fabs(row.error), 0.10) << row.what;
      if (!row.published_bottleneck.empty()) {
        EXPECT_TRUE(SameBottleneck(row.published_bottleneck, row.predicted_bottleneck)) << row.what;
      }
    }
  }
  EXPECT_GE(rates, 30);
  EXPECT_TRUE(Result().ok);
}

TEST(Calibrate, TheFitReproducesTheStoredProfileValues) {
  EXPECT_GE(Result().fits.size(), 20u);
  for (const auto& f : Result().fits)
    EXPECT_NEAR(f.fitted / f.stored, 1.0, 0.01) << f.profile << " " << f.field << " -> " << f.target;
  CalibrationResult again = Calibrate(DefaultCalibrationPath(), DefaultProfileDir(), 0.10);
  ASSERT_EQ(again.fits.size(), Result().fits.size());
  for (size_t i = 0; i < again.fits.size(); ++i) EXPECT_DOUBLE_EQ(again.fits[i].fitted, Result().fits[i].fitted);
}

TEST(Calibrate, UnfittedRatesComeOutOfTheFormulas) {
  // Rows no field was fitted to: the MMIO, DMA and link bounds.
  int unfitted = 0;
  for (const auto& row : Result().rows)
    if (!row.fitted && row.unit == "mops") {
      ++unfitted;
      EXPECT_TRUE(row.pass) << row.what;
    }
  EXPECT_GE(unfitted, 10);
}

TEST(Calibrate, EveryMeasurementIsMapped) {
  EXPECT_TRUE(Result().unmapped.empty()) << Result().unmapped.front();
  EXPECT_GE(Result().rows.size(), 51u);
}

TEST(Calibrate, BottleneckNamesMatchTheirAliases) {
  EXPECT_TRUE(SameBottleneck("IB bw", "link bw"));
  EXPECT_TRUE(SameBottleneck("NIC message rate", "NIC"));
  EXPECT_FALSE(SameBottleneck("MMIO bw", "DMA bw"));
}

// A measured calibration (run_all.py calibrate): points in the measured-points document.
nlohmann::json MeasuredPoint(const std::string& id, const std::string& field, nlohmann::json point, double mops) {
  return {{"id", id}, {"field", field}, {"metric", "mops"}, {"measured", mops}, {"point", std::move(point)},
          {"files", {"softnic/calibrate-tput/points/" + id + ".json"}}};
}

nlohmann::json MeasuredDoc(nlohmann::json points) {
  return {{"schema_version", "rdmalab-calibration-points/1"}, {"extends", "host-engine"}, {"points", std::move(points)}};
}

const nlohmann::json kOutboundWrite = {{"mode", "tput"}, {"roles", {{"server", 1}, {"client", 1}}},
                                       {"params", {{"verb", "write"}, {"size", 32}, {"inline_size", 64},
                                                   {"direction", "outbound"}, {"threads", 1}, {"qp", 1},
                                                   {"tx_depth", 32}, {"cq_mod", 16}, {"post_list", 16}}}};

TEST(CalibrateMeasured, TheWallRefusesApplicationLevelPoints) {
  for (const char* mode : {"kv", "sequencer", "echo"}) {
    nlohmann::json app = {{"mode", mode}, {"roles", {{"server", 1}, {"client", 1}}}, {"params", nlohmann::json::object()}};
    nlohmann::json doc = MeasuredDoc({MeasuredPoint("write", "nic.write_ns", kOutboundWrite, 20),
                                      MeasuredPoint(std::string("app-") + mode, "", app, 5)});
    try {
      FitMeasured(doc, DefaultProfileDir(), 0.15);
      ADD_FAILURE() << mode << " point was accepted by the fit";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("verb-level"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(mode), std::string::npos) << e.what();
    }
  }
}

TEST(CalibrateMeasured, FitsAFieldToItsPointAndKeepsThePointFiles) {
  // the host engine's outbound WRITE in lists of 16: one thread posts (a call per list and
  // post_per_wr_ns per WR), carries out each WR (its line included), polls one completion in 16
  nlohmann::json doc = MeasuredDoc({MeasuredPoint("write", "nic.write_ns", kOutboundWrite, 20)});
  MeasuredFit r = FitMeasured(doc, DefaultProfileDir(), 0.15);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_NEAR(r.rows[0].predicted, 20, 0.01);
  EXPECT_TRUE(r.ok);
  ASSERT_EQ(r.fits.size(), 1u);
  EXPECT_EQ(r.fits[0].field, "nic.write_ns");
  const Profile& p = r.profile;
  double per_wr_ns = 1e3 / 20;
  EXPECT_NEAR(p.nic.t.write_ns,
              per_wr_ns - (p.cpu.post_doorbell_ns + p.cpu.poll_cq_ns) / 16 - p.cpu.post_per_wr_ns - p.nic.line_ns, 0.01);
  EXPECT_EQ(r.profile.points.at("nic.write_ns").at(0), "softnic/calibrate-tput/points/write.json");
}

TEST(CalibrateMeasured, APointThatOnlyBoundsItsFieldGetsTheBound) {
  // Fetch-and-adds from two clients: on 4096 counters the clients' engines set the rate; on one
  // counter measured no slower, the counter's line never sets it, so its hold time is at most
  // the time at which it would: the fit takes that bound instead of keeping the seed.
  nlohmann::json atomics = {{"mode", "atomics"}, {"roles", {{"server", 1}, {"client", 2}}},
                            {"params", {{"verb", "faa"}, {"threads", 1}, {"tx_depth", 16}, {"cq_mod", 16}}}};
  nlohmann::json many = atomics, one = atomics;
  many["params"]["counters"] = 4096;
  one["params"]["counters"] = 1;
  nlohmann::json doc = MeasuredDoc({MeasuredPoint("many", "nic.atomic_in_ns", many, 20),
                                    MeasuredPoint("one", "nic.atomic_lock_hold_ns", one, 21)});
  MeasuredFit r = FitMeasured(doc, DefaultProfileDir(), 0.15);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_NEAR(r.rows[0].predicted, 20, 0.01);
  EXPECT_NEAR(r.rows[1].predicted, 20, 0.01);  // as close to 21 as the model gets
  EXPECT_NEAR(r.profile.nic.atomic_lock_hold_ns, 1e3 / 20, 0.01);  // the lock's limit meets the clients'
  EXPECT_TRUE(r.ok);
}

}  // namespace
}  // namespace rdmalab::model
