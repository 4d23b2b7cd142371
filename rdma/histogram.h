// Log-linear latency histogram (HDR style): values below 2^(kSubBucketBits+1) are exact,
// larger ones fall in buckets whose width is at most 1/2^kSubBucketBits of their value, so
// every percentile is within 0.8% of the truth. Record() touches one counter and a few
// scalars: no allocation, no branch on the value's range beyond one count-leading-zeros.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <limits>

namespace rdmalab {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 7;
  static constexpr std::uint64_t kSubBuckets = std::uint64_t{1} << kSubBucketBits;
  static constexpr int kValueBits = 64;
  // Exact range [0, 2*kSubBuckets), then one row of kSubBuckets per further power of two.
  static constexpr std::size_t kBucketCount = (kValueBits - kSubBucketBits + 1) * kSubBuckets;
  static_assert(kBucketCount == 7424, "bucket index layout changed: update the tests");

  void Record(std::uint64_t value) noexcept {
    ++buckets_[BucketOf(value)];
    ++count_;
    const double v = static_cast<double>(value);
    sum_ += v;
    sum_squares_ += v * v;
    if (value < min_) min_ = value;
    if (value > max_) max_ = value;
  }

  void Merge(const LatencyHistogram& other) noexcept;
  void Clear() noexcept { *this = LatencyHistogram(); }

  std::uint64_t Count() const noexcept { return count_; }
  std::uint64_t Min() const noexcept { return count_ ? min_ : 0; }
  std::uint64_t Max() const noexcept { return max_; }
  double Mean() const noexcept { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  double Stdev() const noexcept;
  // The value at percentile p in [0, 100]: the midpoint of the bucket holding the
  // ceil(p/100 * count)-th smallest sample, clamped to [Min, Max]. 0 when empty.
  std::uint64_t Percentile(double p) const noexcept;

  static std::size_t BucketOf(std::uint64_t value) noexcept {
    if (value < 2 * kSubBuckets) return static_cast<std::size_t>(value);
    const int shift = (kValueBits - 1 - std::countl_zero(value)) - kSubBucketBits;
    return static_cast<std::size_t>((shift + 1) * kSubBuckets + ((value >> shift) - kSubBuckets));
  }
  static std::uint64_t BucketLow(std::size_t bucket) noexcept;
  static std::uint64_t BucketWidth(std::size_t bucket) noexcept;

 private:
  std::array<std::uint64_t, kBucketCount> buckets_{};
  std::uint64_t count_ = 0;
  double sum_ = 0;
  double sum_squares_ = 0;
  std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t max_ = 0;
};

}  // namespace rdmalab
