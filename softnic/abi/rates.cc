// Conversions between the ibv_rate encoding (the IB static-rate field of an address
// handle) and link speeds. One table row per encoding keeps all four conversions
// consistent with each other; the numbers are rdma-core's, so programs that compare
// them see the same values on every provider.
#include <infiniband/verbs.h>

#include <array>

namespace {

// A rate with no 2.5 Gb/s multiplier: rdma-core defines none for the 64b/66b-coded
// FDR/EDR-era rates, so ibv_rate_to_mult reports -1 and mult_to_ibv_rate never yields them.
constexpr int kNoMult = 0;
constexpr int kUnknownRate = -1;

struct RateRow {
  ibv_rate rate;
  int mult;  // multiple of the 2.5 Gb/s SDR lane rate, or kNoMult
  int mbps;  // data rate after line encoding
};

constexpr std::array<RateRow, 23> kRates{{
    {IBV_RATE_2_5_GBPS, 1, 2500},
    {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},
    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},
    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, kNoMult, 14062},
    {IBV_RATE_56_GBPS, kNoMult, 56250},
    {IBV_RATE_112_GBPS, kNoMult, 112500},
    {IBV_RATE_168_GBPS, kNoMult, 168750},
    {IBV_RATE_25_GBPS, kNoMult, 25781},
    {IBV_RATE_100_GBPS, kNoMult, 103125},
    {IBV_RATE_200_GBPS, kNoMult, 206250},
    {IBV_RATE_300_GBPS, kNoMult, 309375},
    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},
    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},
    {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
}};

// Every encoding except IBV_RATE_MAX (0) has a row; the inverse lookups need each
// multiplier and each speed to name one rate only.
static_assert(kRates.size() == IBV_RATE_1200_GBPS - IBV_RATE_MAX - 1);

constexpr bool all_distinct(int RateRow::*field, bool skip_no_mult) {
  for (size_t i = 0; i < kRates.size(); ++i) {
    for (size_t j = i + 1; j < kRates.size(); ++j) {
      const int a = kRates[i].*field;
      if (skip_no_mult && a == kNoMult) continue;
      if (a == kRates[j].*field) return false;
    }
  }
  return true;
}
static_assert(all_distinct(&RateRow::mult, true));
static_assert(all_distinct(&RateRow::mbps, false));

const RateRow* find_rate(ibv_rate rate) {
  for (const RateRow& row : kRates) {
    if (row.rate == rate) return &row;
  }
  return nullptr;
}

}  // namespace

extern "C" int ibv_rate_to_mult(enum ibv_rate rate) {
  const RateRow* row = find_rate(rate);
  return row != nullptr && row->mult != kNoMult ? row->mult : kUnknownRate;
}

extern "C" enum ibv_rate mult_to_ibv_rate(int mult) {
  if (mult == kNoMult) return IBV_RATE_MAX;
  for (const RateRow& row : kRates) {
    if (row.mult == mult) return row.rate;
  }
  return IBV_RATE_MAX;
}

extern "C" int ibv_rate_to_mbps(enum ibv_rate rate) {
  const RateRow* row = find_rate(rate);
  return row != nullptr ? row->mbps : kUnknownRate;
}

extern "C" enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow& row : kRates) {
    if (row.mbps == mbps) return row.rate;
  }
  return IBV_RATE_MAX;
}
