// guide16's formula tables (Fig. 2b, Table 1, Appendix A) as the pcie mode evaluates them.
#include <gtest/gtest.h>

#include "model/formulas.h"

namespace rdmalab::model {
namespace {

FormulaValue Formula(const nlohmann::json& params, const std::string& profile = "cib") {
  Profile prof = LoadProfile(profile, DefaultProfileDir());
  return EvaluateFormula(PointFromJson({{"mode", "pcie"}, {"params", params}}), prof);
}

TEST(Formulas, AppendixATenWqesOf65BytesOnPcie3) {
  FormulaValue mmio = Formula({{"formula", "wqe_batch"}, {"method", "mmio"}, {"wqes", 10}, {"wqe_size", 65}});
  FormulaValue doorbell = Formula({{"formula", "wqe_batch"}, {"method", "doorbell"}, {"wqes", 10}, {"wqe_size", 65}});
  EXPECT_EQ(mmio.metric, "pcie_h2d_bytes");
  EXPECT_DOUBLE_EQ(mmio.value, 1800);      // 10 x 2 lines x (64 + 26)
  EXPECT_DOUBLE_EQ(doorbell.value, 1534);  // (8 + 26) + 10 x (128 + 22)
  // CX3 fetches one WQE per DMA; a 128 B padded WQE is one completion either way.
  EXPECT_DOUBLE_EQ(
      Formula({{"formula", "wqe_batch"}, {"method", "doorbell"}, {"wqes", 10}, {"wqe_size", 65}}, "cx3").value, 1534);
}

TEST(Formulas, DoorbellBeatsMmioOnlyForBatches) {
  auto bytes = [](const char* method, int n) {
    return Formula({{"formula", "wqe_batch"}, {"method", method}, {"wqes", n}, {"wqe_size", 64}}).value;
  };
  EXPECT_LT(bytes("mmio", 1), bytes("doorbell", 1));  // one 90 B line vs 34 + 86
  EXPECT_GT(bytes("mmio", 16), bytes("doorbell", 16));
}

TEST(Formulas, TransferByDmaAndByMmio) {
  EXPECT_DOUBLE_EQ(Formula({{"formula", "transfer"}, {"method", "dma"}, {"size", 100}}).value, 100 + 22);
  EXPECT_DOUBLE_EQ(Formula({{"formula", "transfer"}, {"method", "dma"}, {"size", 129}}).value, 129 + 2 * 22);
  EXPECT_DOUBLE_EQ(Formula({{"formula", "transfer"}, {"method", "mmio"}, {"size", 100}}).value, 2 * (64 + 26));
  EXPECT_DOUBLE_EQ(Formula({{"formula", "transfer"}, {"method", "mmio"}, {"size", 0}}).value, 0);
}

TEST(Formulas, Table1WqeHeaders) {
  EXPECT_DOUBLE_EQ(Formula({{"formula", "wqe_header"}, {"wqe_type", "rc_uc"}}).value, 36);
  EXPECT_DOUBLE_EQ(Formula({{"formula", "wqe_header"}, {"wqe_type", "ud"}}).value, 68);
  EXPECT_DOUBLE_EQ(Formula({{"formula", "wqe_header"}, {"wqe_type", "recv"}}).value, 16);
  EXPECT_EQ(Formula({{"formula", "wqe_header"}, {"wqe_type", "ud"}}).metric, "wqe_bytes");
}

TEST(Formulas, AMethodThatDoesNotFitTheFormulaIsAnErrorNamingTheValidOnes) {
  try {
    Formula({{"formula", "wqe_batch"}, {"method", "dma"}});
    FAIL() << "expected an error";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("valid: mmio, doorbell"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rdmalab::model
