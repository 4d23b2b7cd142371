// Per-operation CPU costs of a HERD worker's backend and of a client's workload: MICA GET
// and PUT over a working set far larger than the LLC (one at a time, and in batches with
// the pipeline's prefetches), the next operation, value fill and check, and a client
// thread's whole request loop (kv/core/client_core.h) with the network taken out.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "kv/cache/mica.h"
#include "kv/core/client_core.h"
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

// A transport that answers every request at once from values written before the run: what
// remains is the client thread's own work per request (the next operation and its key, the
// window's bookkeeping, the answer's accounting and latency sample, the loop's polling and
// housekeeping). `run_all.py calibrate` reads it as the model's cpu.client_request_ns: the
// CPU a key-value client spends per request beside its verbs, measured without any system.
class LoopbackTransport {
 public:
  static constexpr bool kLosesMessages = false;
  LoopbackTransport(const std::vector<std::uint8_t>& values, std::uint32_t value_bytes, std::uint32_t window)
      : values_(values), value_bytes_(value_bytes), answers_(window) {}
  void Issue(const Request& request) {
    const std::uint8_t* value = values_.data() + request.key_index * value_bytes_;
    answers_[tail_++ % answers_.size()] = Response{request.id, true, request.get ? value : nullptr,
                                                   request.get ? value_bytes_ : 0};
  }
  void Resend(const Request&) {}
  int Poll(Response* out, int max) {
    int n = 0;
    while (head_ != tail_ && n < max) out[n++] = answers_[head_++ % answers_.size()];
    return n;
  }

 private:
  const std::vector<std::uint8_t>& values_;
  std::uint32_t value_bytes_;
  std::vector<Response> answers_;
  std::uint64_t head_ = 0, tail_ = 0;
};

// As validate-kv runs a client process: 8 clients on one thread, window 4, 65536 keys of
// 32 B, 5% PUTs; one iteration is kOpsPerClient requests of each client.
void BM_ClientRequest(benchmark::State& state) {
  constexpr std::uint32_t kClients = 8, kWindow = 4, kKeysOfRun = 65536;
  constexpr std::uint64_t kOpsPerClient = 20000;
  static const TscClock clock = TscClock::Calibrate();
  WorkloadConfig config;
  config.keys = kKeysOfRun;
  config.get_fraction = 0.95;
  config.value_bytes = kValueBytes;
  std::vector<std::uint8_t> values(std::size_t{kKeysOfRun} * kValueBytes);
  for (std::uint64_t key = 0; key < kKeysOfRun; ++key) {
    FillValue(key, kPreloadWriter, kPreloadVersion, values.data() + key * kValueBytes, kValueBytes);
  }
  ClientPlan plan;
  plan.window = kWindow;
  plan.value_bytes = kValueBytes;
  plan.ops_per_client = kOpsPerClient;
  std::uint64_t requests = 0;
  for (auto _ : state) {
    std::vector<std::unique_ptr<LoopbackTransport>> transports;
    std::vector<ClientState> clients;
    for (std::uint32_t c = 0; c < kClients; ++c) {
      transports.push_back(std::make_unique<LoopbackTransport>(values, kValueBytes, kWindow));
      clients.emplace_back(config, c, plan);
    }
    RunCut cut;
    ThreadOutcome outcome;
    RunClients(transports, clients, plan, clock, clock.Now() + clock.NsToTicks(10'000'000'000), cut, outcome);
    if (cut.cut()) state.SkipWithError(cut.reason().c_str());
    for (const auto& client : clients) requests += client.counts.all_completed;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(requests));
}
BENCHMARK(BM_ClientRequest)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace rdmalab::kv

BENCHMARK_MAIN();
