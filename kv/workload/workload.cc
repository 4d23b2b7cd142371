#include "kv/workload/workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "kv/workload/keyhash.h"

namespace rdmalab::kv {
namespace {

constexpr std::uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;  // splitmix64's increment
constexpr std::uint64_t kStreamSalt = 0x3c6ef372fe94f82bull;
constexpr std::uint64_t kScrambleSalt = 0xa54ff53a5f1d36f1ull;
constexpr std::uint32_t kKeyWordSalt = 0x5a17c0de;
// Up to this many keys, one draw picks both the key and the operation (Workload::Next).
constexpr std::uint64_t kOneDrawMaxKeys = std::uint64_t{1} << 32;
constexpr std::uint32_t kKeyWordBytes = 4;
constexpr std::uint32_t kPatternWordBytes = 8;
static_assert(kValueHeaderBytes == 3 * kKeyWordBytes, "header: key word, writer, version");

template <typename... Parts>
[[noreturn]] void Invalid(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw std::invalid_argument(message.str());
}

double ZetaSum(std::uint64_t n, double theta) {
  // Smallest terms first, so that they are not lost against the large partial sum.
  double sum = 0;
  for (std::uint64_t i = n; i >= 1; --i) sum += std::pow(static_cast<double>(i), -theta);
  return sum;
}

// Many clients of one process share one config: each would otherwise spend 0.27 s on
// zeta(8 Mi keys). The lock is held while summing so that the others wait, not redo it.
double Zeta(std::uint64_t n, double theta) {
  static std::mutex mutex;
  static std::map<std::pair<std::uint64_t, double>, double> memo;
  std::lock_guard<std::mutex> lock(mutex);
  auto [entry, inserted] = memo.try_emplace({n, theta}, 0.0);
  if (inserted) entry->second = ZetaSum(n, theta);
  return entry->second;
}

std::uint64_t PatternSeed(std::uint64_t key_index, std::uint32_t writer, std::uint32_t version) {
  return SplitMix64Mix(key_index) ^ MurmurFmix64((std::uint64_t{writer} << 32) | version);
}

// Calls visit(offset, word, length) for each pattern word after the header; the last one
// may be partial. Full words go through a separate loop so that, once visit is inlined, their
// copy or compare is one 8-byte access rather than a variable-length memcpy or memcmp.
template <typename Visit>
bool ForEachPatternWord(std::uint64_t seed, std::uint32_t bytes, Visit visit) {
  std::uint32_t offset = kValueHeaderBytes;
  for (; offset + kPatternWordBytes <= bytes; offset += kPatternWordBytes) {
    if (!visit(offset, SplitMix64Mix(seed += kGoldenGamma), kPatternWordBytes)) return false;
  }
  return offset >= bytes || visit(offset, SplitMix64Mix(seed += kGoldenGamma), bytes - offset);
}

std::uint32_t KeyWord(std::uint64_t key_index, std::uint32_t writer, std::uint32_t version, std::uint32_t bytes) {
  const std::uint32_t key_word = static_cast<std::uint32_t>(key_index) ^ kKeyWordSalt;
  return bytes >= kValueHeaderBytes ? key_word ^ writer ^ version : key_word;
}

bool PatternMatches(std::uint64_t key_index, const ValueStamp& stamp, const std::uint8_t* value,
                    std::uint32_t bytes) {
  return ForEachPatternWord(PatternSeed(key_index, stamp.writer, stamp.version), bytes,
                            [value](std::uint32_t offset, std::uint64_t word, std::uint32_t length) {
                              return std::memcmp(value + offset, &word, length) == 0;
                            });
}

}  // namespace

void Check(const WorkloadConfig& config) {
  if (config.keys < 1) Invalid("workload keys ", config.keys, " is invalid: valid range is 1..2^64-1");
  if (!(config.get_fraction >= 0.0 && config.get_fraction <= 1.0)) {
    Invalid("workload get_fraction ", config.get_fraction, " is invalid: valid range is 0..1");
  }
  if (!(config.zipf_theta > 0.0 && config.zipf_theta < 1.0)) {
    Invalid("workload zipf_theta ", config.zipf_theta,
            " is invalid: valid range is (0, 1) exclusive (YCSB's generator needs theta < 1; default 0.99)");
  }
  if (config.zipf && config.keys > kMaxZipfKeys) {
    Invalid("workload keys ", config.keys, " is invalid with zipf: valid range is 1..", kMaxZipfKeys,
            " (zeta is summed over every key at start)");
  }
  if (config.value_bytes < 1 || config.value_bytes > kMaxWorkloadValueBytes) {
    Invalid("workload value_bytes ", config.value_bytes, " is invalid: valid range is 1..", kMaxWorkloadValueBytes);
  }
  if (config.key_bytes < kMinKeyTextBytes || config.key_bytes > kMaxKeyTextBytes) {
    Invalid("workload key_bytes ", config.key_bytes, " is invalid: valid range is ", kMinKeyTextBytes, "..",
            kMaxKeyTextBytes, " (shorter key texts can collide; memcached's limit is 250)");
  }
}

Workload::Workload(const WorkloadConfig& config, std::uint64_t stream) : config_(config) {
  Check(config_);
  std::uint64_t seed = SplitMix64Mix(config_.seed) ^ MurmurFmix64(stream ^ kStreamSalt);
  for (auto& word : state_) word = SplitMix64Mix(seed += kGoldenGamma);
  // get_fraction * 2^53 is exact (a power-of-two scale), so (r >> 11) < its ceiling is
  // exactly UniformUnit(r) < get_fraction.
  get_below_ = static_cast<std::uint64_t>(std::ceil(config_.get_fraction * 0x1.0p53));
  one_draw_ = !config_.zipf && config_.keys <= kOneDrawMaxKeys;
  if (!config_.zipf) return;
  const double n = static_cast<double>(config_.keys);
  const double theta = config_.zipf_theta;
  zeta_n_ = Zeta(config_.keys, theta);
  alpha_ = 1.0 / (1.0 - theta);
  zeta2_bound_ = 1.0 + std::pow(0.5, theta);
  // With 1 or 2 keys ZipfKey never reaches the formula that uses eta (whose denominator is 0 then).
  if (config_.keys > 2) eta_ = (1.0 - std::pow(2.0 / n, 1.0 - theta)) / (1.0 - zeta2_bound_ / zeta_n_);
}

std::uint64_t Workload::ZipfKey() {
  const double u = UniformUnit(NextRandom());
  const double uz = u * zeta_n_;
  std::uint64_t rank;
  if (uz < 1.0) {
    rank = 0;
  } else if (uz < zeta2_bound_) {
    rank = 1;
  } else {
    rank = static_cast<std::uint64_t>(static_cast<double>(config_.keys) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
    rank = std::min(rank, config_.keys - 1);  // rounding can reach keys itself
  }
  return KeyOfRank(rank);
}

std::uint64_t Workload::KeyOfRank(std::uint64_t rank) const {
  if (!config_.zipf) return rank;
  return SplitMix64Mix(rank ^ kScrambleSalt) % config_.keys;
}

double Workload::HottestKeyProbability() const {
  return config_.zipf ? 1.0 / zeta_n_ : 1.0 / static_cast<double>(config_.keys);
}

void FillValue(std::uint64_t key_index, std::uint32_t writer, std::uint32_t version, std::uint8_t* out,
               std::uint32_t bytes) {
  const std::uint32_t header[3] = {KeyWord(key_index, writer, version, bytes), writer, version};
  std::memcpy(out, header, std::min(bytes, kValueHeaderBytes));
  ForEachPatternWord(PatternSeed(key_index, writer, version), bytes,
                     [out](std::uint32_t offset, std::uint64_t word, std::uint32_t length) {
                       std::memcpy(out + offset, &word, length);
                       return true;
                     });
}

ValueStamp StampOf(const std::uint8_t* value, std::uint32_t bytes) {
  std::uint32_t header[3] = {0, 0, 0};
  std::memcpy(header, value, std::min(bytes, kValueHeaderBytes));
  return ValueStamp{header[1], header[2]};
}

ValueCheck CheckValue(std::uint64_t key_index, const std::uint8_t* value, std::uint32_t bytes,
                      std::uint32_t expected_bytes) {
  if (bytes != expected_bytes) return ValueCheck::kCorrupt;
  if (bytes < kValueHeaderBytes) {
    const std::uint32_t expected_key_word = KeyWord(key_index, 0, 0, bytes);
    const bool key_matches = std::memcmp(value, &expected_key_word, std::min(bytes, kKeyWordBytes)) == 0;
    return key_matches ? ValueCheck::kOk : ValueCheck::kWrongKey;
  }
  const ValueStamp stamp = StampOf(value, bytes);
  std::uint32_t stored_key_word;
  std::memcpy(&stored_key_word, value, kKeyWordBytes);
  const std::uint32_t stored_key = stored_key_word ^ KeyWord(0, stamp.writer, stamp.version, bytes);
  const bool key_matches = stored_key == static_cast<std::uint32_t>(key_index);
  if (bytes == kValueHeaderBytes) return key_matches ? ValueCheck::kOk : ValueCheck::kWrongKey;
  if (key_matches) return PatternMatches(key_index, stamp, value, bytes) ? ValueCheck::kOk : ValueCheck::kCorrupt;
  // An intact value of another key carries that key's pattern; a damaged header does not.
  const std::uint64_t other_key = (key_index & ~std::uint64_t{0xFFFFFFFF}) | stored_key;
  return PatternMatches(other_key, stamp, value, bytes) ? ValueCheck::kWrongKey : ValueCheck::kCorrupt;
}

}  // namespace rdmalab::kv
