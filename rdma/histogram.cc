#include "rdma/histogram.h"

#include <algorithm>
#include <cmath>

namespace rdmalab {

std::uint64_t LatencyHistogram::BucketLow(std::size_t bucket) noexcept {
  if (bucket < 2 * kSubBuckets) return bucket;
  const std::size_t shift = bucket / kSubBuckets - 1;
  return (kSubBuckets + bucket % kSubBuckets) << shift;
}

std::uint64_t LatencyHistogram::BucketWidth(std::size_t bucket) noexcept {
  if (bucket < 2 * kSubBuckets) return 1;
  return std::uint64_t{1} << (bucket / kSubBuckets - 1);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) noexcept {
  for (std::size_t i = 0; i < kBucketCount; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  sum_squares_ += other.sum_squares_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double LatencyHistogram::Stdev() const noexcept {
  if (count_ < 2) return 0.0;
  const double n = static_cast<double>(count_);
  const double variance = (sum_squares_ - sum_ * sum_ / n) / (n - 1);
  return variance > 0 ? std::sqrt(variance) : 0.0;
}

std::uint64_t LatencyHistogram::Percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  const double clamped = std::clamp(p, 0.0, 100.0);
  const auto rank = std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::ceil(clamped / 100.0 * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const std::uint64_t mid = BucketLow(i) + BucketWidth(i) / 2;
      return std::clamp(mid, Min(), max_);
    }
  }
  return max_;
}

}  // namespace rdmalab
