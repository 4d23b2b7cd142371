// Acceptance 2: after a reproducible fit, every verb-level number of calibration.yaml is
// predicted within +-10% and the bottleneck matches where the source names one.
#include <gtest/gtest.h>

#include <cmath>

#include "model/calibrate.h"

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

}  // namespace
}  // namespace rdmalab::model
