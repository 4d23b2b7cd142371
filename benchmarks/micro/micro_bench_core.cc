// CPU costs inside rdmalab-bench's measurement loops that are not the provider's: a latency
// sample (TSC read + histogram record) and a keyed READ's address (tput --distribution) must
// stay a few ns so that doing them for every op does not change what is measured.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "benchmarks/bench/key_addresses.h"
#include "rdma/clock.h"
#include "rdma/histogram.h"

namespace {

void BM_TscRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(rdmalab::ReadTsc());
}
BENCHMARK(BM_TscRead);

void BM_HistogramRecord(benchmark::State& state) {
  // Latencies spread over four decades, so that the record touches many buckets.
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> latency(7.0, 1.2);
  std::vector<std::uint64_t> samples(4096);
  for (auto& sample : samples) sample = static_cast<std::uint64_t>(latency(rng));
  auto histogram = std::make_unique<rdmalab::LatencyHistogram>();
  std::size_t i = 0;
  for (auto _ : state) {
    histogram->Record(samples[i++ & (samples.size() - 1)]);
  }
  benchmark::DoNotOptimize(histogram->Count());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_HistogramRecord);

void BM_LatencySample(benchmark::State& state) {
  // What the tput loop does per signaled completion: read the TSC, convert, record.
  const auto clock = rdmalab::TscClock::Calibrate(10);
  auto histogram = std::make_unique<rdmalab::LatencyHistogram>();
  std::uint64_t posted_at = clock.Now();
  for (auto _ : state) {
    const std::uint64_t now = clock.Now();
    histogram->Record(clock.TicksToNs(now - posted_at));
    posted_at = now;
  }
  benchmark::DoNotOptimize(histogram->Count());
}
BENCHMARK(BM_LatencySample);

// tput --distribution's post path: the slot of the next keyed READ over the default 4 Mi keys.
// Args: Zipf (0: uniform), clustered (0: unclustered).
void BM_KeyedReadSlot(benchmark::State& state) {
  const bool zipf = state.range(0) != 0, clustered = state.range(1) != 0;
  auto addresses = rdmalab::bench::KeyAddresses({std::uint64_t{1} << 22, zipf, 0.99, clustered, 1}).Stream(0);
  for (auto _ : state) benchmark::DoNotOptimize(addresses.NextSlot());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_KeyedReadSlot)->ArgNames({"zipf", "clustered"})->Args({0, 1})->Args({0, 0})->Args({1, 1})->Args({1, 0});

}  // namespace

BENCHMARK_MAIN();
