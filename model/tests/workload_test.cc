// How uniform and Zipf keys fall on EREW workers (herd14 Fig. 14).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "model/workload.h"

namespace rdmalab::model {
namespace {

double Sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

TEST(Workload, UniformKeysShareEvenly) {
  std::vector<double> s = WorkerShares("uniform", 0.99, 1 << 20, 10);
  ASSERT_EQ(s.size(), 10u);
  for (double x : s) EXPECT_DOUBLE_EQ(x, 0.1);
}

TEST(Workload, ZipfSharesSumToOneAndTheHottestWorkerCarriesMore) {
  std::vector<double> s = WorkerShares("zipf", 0.99, 8 << 20, 10);
  EXPECT_NEAR(Sum(s), 1.0, 1e-9);
  double hottest = *std::max_element(s.begin(), s.end());
  EXPECT_GT(hottest, 0.11);  // the most popular key alone has ~6% of all requests
  EXPECT_LT(hottest, 0.3);
}

TEST(Workload, SkewGrowsWithTheta) {
  auto max_share = [](double theta) {
    std::vector<double> s = WorkerShares("zipf", theta, 8 << 20, 10);
    return *std::max_element(s.begin(), s.end());
  };
  EXPECT_NEAR(max_share(0.0), 0.1, 0.005);  // theta 0 is uniform
  EXPECT_LT(max_share(0.5), max_share(0.99));
}

TEST(Workload, FewKeysAreHashedExactly) {
  // 3 keys on 2 workers: the shares are sums of 1/rank^theta, whatever the hash.
  std::vector<double> s = WorkerShares("zipf", 1.0, 3, 2);
  double total = 1 + 0.5 + 1.0 / 3;
  std::vector<double> possible = {1 / total, 0.5 / total, (1.0 / 3) / total, 1.5 / total, (4.0 / 3) / total,
                                  (0.5 + 1.0 / 3) / total, 0.0, 1.0};
  for (double x : s)
    EXPECT_TRUE(std::any_of(possible.begin(), possible.end(), [&](double p) { return std::abs(p - x) < 1e-12; })) << x;
}

TEST(Workload, TranslationMissesGrowWithTheRegionAndFallWithSkewAndClustering) {
  auto miss = [](const std::string& d, uint32_t value_B, bool clustered) {
    return TranslationMissRate(d, 0.99, 4 << 20, value_B, clustered, 4096, 4096);
  };
  EXPECT_EQ(miss("uniform", 4, true), 0);               // 4096 pages: all cached
  EXPECT_NEAR(miss("uniform", 16, true), 0.75, 1e-12);  // 16384 pages, a quarter cached
  EXPECT_NEAR(miss("uniform", 16, false), 0.75, 1e-12);
  EXPECT_LT(miss("zipf", 16, true), miss("zipf", 16, false));
  EXPECT_LT(miss("zipf", 16, false), miss("uniform", 16, false));
  EXPECT_NEAR(HottestKeysShare("uniform", 0.99, 1000, 250), 0.25, 1e-12);
  EXPECT_NEAR(HottestKeysShare("zipf", 0.99, 1000, 1000), 1.0, 1e-12);
}

}  // namespace
}  // namespace rdmalab::model
