// Per-operation CPU costs of a HERD worker's backend and of a client's workload: MICA GET
// and PUT over a working set far larger than the LLC (one at a time, and in batches with
// the pipeline's prefetches), the next operation, and value fill and check.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "kv/cache/mica.h"
#include "kv/workload/keyhash.h"
#include "kv/workload/workload.h"

namespace rdmalab::kv {
namespace {

constexpr std::uint64_t kKeys = 4 << 20;
constexpr std::uint32_t kValueBytes = 32;
constexpr std::size_t kKeyOrder = 1 << 20;  // random keyhashes, cycled through by each benchmark

struct Preloaded {
  std::unique_ptr<MicaCache> cache;
  std::vector<KeyHash> keys;  // in random order
};

// 4 Mi keys of 32 B, as in HERD's per-partition default: a 64 MiB index, a 224 MiB log.
Preloaded& Store() {
  static Preloaded store = [] {
    MicaConfig config;
    config.bucket_count_log2 = 20;
    config.log_bytes = 512ull << 20;
    Preloaded preloaded{std::make_unique<MicaCache>(config), {}};
    std::uint8_t value[kValueBytes];
    for (std::uint64_t key = 0; key < kKeys; ++key) {
      FillValue(key, kPreloadWriter, kPreloadVersion, value, kValueBytes);
      preloaded.cache->Put(KeyHashOf(key), value, kValueBytes);
    }
    std::mt19937_64 rng(1);
    for (std::size_t i = 0; i < kKeyOrder; ++i) preloaded.keys.push_back(KeyHashOf(rng() % kKeys));
    return preloaded;
  }();
  return store;
}

void BM_MicaGet(benchmark::State& state) {
  auto& store = Store();
  std::size_t i = 0;
  const std::uint8_t* value;
  std::uint32_t bytes;
  for (auto _ : state) {
    benchmark::DoNotOptimize(store.cache->Get(store.keys[i++ & (kKeyOrder - 1)], &value, &bytes));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_MicaGet);

// HERD's pipeline, unrolled over a batch: all bucket prefetches, then all bucket reads with
// log prefetches, then all log reads. Items are GETs.
void BM_MicaGetPrefetched(benchmark::State& state) {
  auto& store = Store();
  const auto batch = static_cast<std::size_t>(state.range(0));
  std::vector<LogRef> refs(batch);
  std::size_t next = 0;
  const std::uint8_t* value;
  std::uint32_t bytes;
  for (auto _ : state) {
    const KeyHash* keys = &store.keys[next];
    next = (next + batch) & (kKeyOrder - 1);
    for (std::size_t j = 0; j < batch; ++j) store.cache->PrefetchBucket(keys[j]);
    for (std::size_t j = 0; j < batch; ++j) refs[j] = store.cache->FindAndPrefetch(keys[j]);
    for (std::size_t j = 0; j < batch; ++j) benchmark::DoNotOptimize(store.cache->Read(refs[j], keys[j], &value, &bytes));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
}
BENCHMARK(BM_MicaGetPrefetched)->Arg(4)->Arg(8)->Arg(16);

void BM_MicaPut(benchmark::State& state) {
  auto& store = Store();
  std::uint8_t value[kValueBytes];
  FillValue(0, 1, 1, value, kValueBytes);
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(store.cache->Put(store.keys[i++ & (kKeyOrder - 1)], value, kValueBytes));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_MicaPut);

void BM_WorkloadNext(benchmark::State& state) {
  WorkloadConfig config;
  config.keys = kKeys;
  config.zipf = state.range(0) != 0;
  Workload workload(config, 0);
  for (auto _ : state) benchmark::DoNotOptimize(workload.Next());
  state.SetLabel(config.zipf ? "zipf 0.99" : "uniform");
}
BENCHMARK(BM_WorkloadNext)->Arg(0)->Arg(1);

void BM_FillValue(benchmark::State& state) {
  const auto bytes = static_cast<std::uint32_t>(state.range(0));
  std::vector<std::uint8_t> value(bytes);
  std::uint32_t version = 0;
  for (auto _ : state) {
    FillValue(12345, 1, ++version, value.data(), bytes);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_FillValue)->Arg(32)->Arg(1000);

void BM_CheckValue(benchmark::State& state) {
  const auto bytes = static_cast<std::uint32_t>(state.range(0));
  std::vector<std::uint8_t> value(bytes);
  FillValue(12345, 1, 1, value.data(), bytes);
  for (auto _ : state) benchmark::DoNotOptimize(CheckValue(12345, value.data(), bytes, bytes));
}
BENCHMARK(BM_CheckValue)->Arg(32)->Arg(1000);

}  // namespace
}  // namespace rdmalab::kv

BENCHMARK_MAIN();
