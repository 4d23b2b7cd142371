// kv/workload/workload.h: the GET fraction, uniform and Zipf key popularity against their
// theory, independent streams, and values that tell a client when a GET is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kv/workload/workload.h"
#include "tests/unit/kv_check_message.h"

namespace rdmalab::kv {
namespace {

constexpr int kOps = 1'000'000;

WorkloadConfig Config(std::uint64_t keys, bool zipf, double get_fraction = 0.95) {
  WorkloadConfig config;
  config.keys = keys;
  config.zipf = zipf;
  config.get_fraction = get_fraction;
  return config;
}

std::vector<std::uint32_t> KeyCounts(const WorkloadConfig& config, std::uint64_t stream) {
  Workload workload(config, stream);
  std::vector<std::uint32_t> counts(config.keys, 0);
  for (int i = 0; i < kOps; ++i) {
    const Op op = workload.Next();
    if (op.key_index >= config.keys) {
      ADD_FAILURE() << "key index " << op.key_index << " >= keys " << config.keys;
      break;
    }
    ++counts[op.key_index];
  }
  return counts;
}

TEST(Workload, GetFractionHonored) {
  for (const double fraction : {0.0, 0.5, 0.9, 0.95, 1.0}) {
    Workload workload(Config(1000, false, fraction), 0);
    int gets = 0;
    for (int i = 0; i < kOps; ++i) gets += workload.Next().get;
    // Six standard deviations of a binomial over 1M draws is below 0.003.
    EXPECT_NEAR(static_cast<double>(gets) / kOps, fraction, 0.003) << fraction;
  }
}

TEST(Workload, OperationIndependentOfKey) {
  // Up to 2^32 uniform keys one draw picks both the key and GET or PUT: every key must still
  // see get_fraction (a power-of-two key count leaves the low bits of the draw to the operation).
  for (const std::uint64_t keys : {std::uint64_t{7}, std::uint64_t{1024}}) {
    Workload workload(Config(keys, false, 0.25), 5);
    std::vector<int> gets(keys), ops(keys);
    for (int i = 0; i < kOps; ++i) {
      const Op op = workload.Next();
      ++ops[op.key_index];
      gets[op.key_index] += op.get;
    }
    for (std::uint64_t k = 0; k < keys; ++k) {
      // Six standard deviations of a binomial over ops[k] draws at p = 0.25.
      const double tolerance = 6 * std::sqrt(0.25 * 0.75 / ops[k]);
      EXPECT_NEAR(static_cast<double>(gets[k]) / ops[k], 0.25, tolerance) << "key " << k << " of " << keys;
    }
  }
  Workload many(Config(std::uint64_t{1} << 40, false, 0.25), 5);  // two draws an operation
  int gets = 0;
  for (int i = 0; i < kOps; ++i) gets += many.Next().get;
  EXPECT_NEAR(static_cast<double>(gets) / kOps, 0.25, 0.003);
}

TEST(Workload, UniformCoversKeysEvenly) {
  constexpr std::uint64_t kKeys = 1000;
  const auto counts = KeyCounts(Config(kKeys, false), 3);
  const double expected = static_cast<double>(kOps) / kKeys;
  double chi_square = 0;
  for (const std::uint32_t count : counts) chi_square += (count - expected) * (count - expected) / expected;
  // 999 degrees of freedom: mean 999, standard deviation sqrt(2 * 999) ~ 45.
  EXPECT_LT(chi_square, 999 + 6 * 45) << "uniform keys are not uniform";
  EXPECT_GT(chi_square, 999 - 6 * 45) << "uniform keys are too even to be random";
}

TEST(Workload, ZipfHottestKeyMatchesTheoryAndIsScrambled) {
  constexpr std::uint64_t kKeys = 1 << 20;
  const WorkloadConfig config = Config(kKeys, true);
  double zeta = 0;
  for (std::uint64_t i = kKeys; i >= 1; --i) zeta += std::pow(static_cast<double>(i), -config.zipf_theta);
  Workload workload(config, 0);
  EXPECT_NEAR(workload.HottestKeyProbability(), 1.0 / zeta, 1e-9);

  const auto counts = KeyCounts(config, 0);
  const auto hottest = static_cast<std::uint64_t>(std::max_element(counts.begin(), counts.end()) - counts.begin());
  EXPECT_EQ(hottest, workload.KeyOfRank(0));
  EXPECT_NE(hottest, 0u) << "ranks are not scrambled";
  // p ~ 0.07 over 1M draws: one standard deviation ~ 255, the bound ~ 5.
  const double expected_hottest = kOps / zeta;
  EXPECT_NEAR(counts[hottest], expected_hottest, 0.02 * expected_hottest);
  // Rank 1 has probability 1 / (2^theta * zeta) in Gray et al.'s generator.
  const double expected_second = expected_hottest / std::pow(2.0, config.zipf_theta);
  EXPECT_NEAR(counts[workload.KeyOfRank(1)], expected_second, 0.03 * expected_second);
  // Hot keys are spread over the key space, not neighbours.
  std::vector<std::uint64_t> top;
  for (std::uint64_t rank = 0; rank < 8; ++rank) top.push_back(workload.KeyOfRank(rank));
  std::sort(top.begin(), top.end());
  EXPECT_GT(top.back() - top.front(), kKeys / 4);
}

TEST(Workload, StreamsDifferAndRepeat) {
  const WorkloadConfig config = Config(1 << 20, true);
  auto first_ops = [](Workload workload) {
    std::vector<std::uint64_t> keys;
    for (int i = 0; i < 1000; ++i) keys.push_back(workload.Next().key_index);
    return keys;
  };
  const auto stream0 = first_ops(Workload(config, 0));
  const auto stream1 = first_ops(Workload(config, 1));
  EXPECT_EQ(first_ops(Workload(config, 0)), stream0) << "a stream does not repeat";
  WorkloadConfig other_seed = config;
  other_seed.seed = 2;
  for (const auto& other : {stream1, first_ops(Workload(other_seed, 0))}) {
    int same = 0;
    for (std::size_t i = 0; i < other.size(); ++i) same += other[i] == stream0[i];
    // Both streams hit the hottest key ~7% of the time; 20% equal would be a correlation.
    EXPECT_LT(same, 200);
  }
}

TEST(Workload, SmallKeyCounts) {
  // Gray et al.'s constants divide by zero for fewer than 3 keys; the generator must not.
  for (const std::uint64_t keys : {1, 2, 3}) {
    for (const bool zipf : {false, true}) {
      const auto counts = KeyCounts(Config(keys, zipf), 0);
      std::uint64_t total = 0;
      for (const std::uint32_t count : counts) total += count;
      EXPECT_EQ(total, static_cast<std::uint64_t>(kOps)) << keys << " keys, zipf " << zipf;
      if (!zipf) {
        for (const std::uint32_t count : counts) EXPECT_NEAR(count, kOps / keys, 0.01 * kOps) << keys;
      }
    }
  }
}

TEST(Workload, CheckNamesTheBadValue) {
  WorkloadConfig config;
  EXPECT_EQ(CheckMessage(config), "");
  config.keys = 0;
  EXPECT_NE(CheckMessage(config).find("keys 0"), std::string::npos);
  for (const double fraction : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    config = WorkloadConfig{};
    config.get_fraction = fraction;
    EXPECT_NE(CheckMessage(config).find("get_fraction"), std::string::npos) << fraction;
  }
  for (const double theta : {0.0, 1.0, 1.2}) {
    config = WorkloadConfig{};
    config.zipf_theta = theta;
    EXPECT_NE(CheckMessage(config).find("zipf_theta"), std::string::npos) << theta;
  }
  for (const std::uint32_t bytes : {0u, 1001u}) {
    config = WorkloadConfig{};
    config.value_bytes = bytes;
    EXPECT_NE(CheckMessage(config).find("value_bytes " + std::to_string(bytes)), std::string::npos);
  }
  for (const std::uint32_t bytes : {15u, 251u}) {
    config = WorkloadConfig{};
    config.key_bytes = bytes;
    EXPECT_NE(CheckMessage(config).find("key_bytes " + std::to_string(bytes)), std::string::npos);
  }
  config = WorkloadConfig{};
  config.zipf = true;
  config.keys = kMaxZipfKeys + 1;
  EXPECT_NE(CheckMessage(config).find("with zipf"), std::string::npos);
  EXPECT_THROW(Workload(config, 0), std::invalid_argument);
}

TEST(Values, RoundTripEverySize) {
  std::vector<std::uint8_t> value(kMaxWorkloadValueBytes);
  for (std::uint32_t bytes = 1; bytes <= kMaxWorkloadValueBytes; ++bytes) {
    for (const std::uint64_t key : {std::uint64_t{0}, std::uint64_t{77}, std::uint64_t{1} << 40}) {
      for (const std::uint32_t writer : {kPreloadWriter, 3u}) {
        FillValue(key, writer, 12345, value.data(), bytes);
        ASSERT_EQ(CheckValue(key, value.data(), bytes, bytes), ValueCheck::kOk) << bytes << " bytes, key " << key;
        if (bytes >= kValueHeaderBytes) {
          const ValueStamp stamp = StampOf(value.data(), bytes);
          EXPECT_EQ(stamp.writer, writer);
          EXPECT_EQ(stamp.version, 12345u);
        }
        EXPECT_EQ(CheckValue(key, value.data(), bytes, bytes + 1), ValueCheck::kCorrupt);
      }
    }
  }
}

TEST(Values, WrongKeyDetected) {
  std::vector<std::uint8_t> value(kMaxWorkloadValueBytes);
  for (std::uint32_t bytes = 1; bytes <= kMaxWorkloadValueBytes; ++bytes) {
    FillValue(1000, 2, 9, value.data(), bytes);
    EXPECT_EQ(CheckValue(1001, value.data(), bytes, bytes), ValueCheck::kWrongKey) << bytes;
    if (bytes >= 2) {
      EXPECT_EQ(CheckValue(1000 + 256, value.data(), bytes, bytes), ValueCheck::kWrongKey) << bytes;
    }
  }
  // An all-zero buffer is not key 0's value.
  const std::vector<std::uint8_t> zeros(kMaxWorkloadValueBytes, 0);
  for (std::uint32_t bytes = 1; bytes <= kMaxWorkloadValueBytes; ++bytes) {
    EXPECT_NE(CheckValue(0, zeros.data(), bytes, bytes), ValueCheck::kOk) << bytes;
  }
}

TEST(Values, EveryFlippedByteDetected) {
  std::vector<std::uint8_t> value(kMaxWorkloadValueBytes);
  for (std::uint32_t bytes = kValueHeaderBytes; bytes <= kMaxWorkloadValueBytes; ++bytes) {
    FillValue(31337, 5, 6, value.data(), bytes);
    for (std::uint32_t position = 0; position < bytes; ++position) {
      for (const std::uint8_t flip : {std::uint8_t{0x01}, std::uint8_t{0x80}, std::uint8_t{0xff}}) {
        value[position] ^= flip;
        const ValueCheck check = CheckValue(31337, value.data(), bytes, bytes);
        value[position] ^= flip;
        ASSERT_NE(check, ValueCheck::kOk) << bytes << " bytes, byte " << position << " ^ " << int{flip};
        if (bytes > kValueHeaderBytes) {
          ASSERT_EQ(check, ValueCheck::kCorrupt) << bytes << " bytes, byte " << position;
        }
      }
    }
  }
}

}  // namespace
}  // namespace rdmalab::kv
