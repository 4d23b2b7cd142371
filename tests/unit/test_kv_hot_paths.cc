// The hot paths of kv's store (Workload::Next, MicaCache's GET stages and Put, value fill
// and check) allocate nothing: this binary counts every operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "kv/cache/mica.h"
#include "kv/workload/keyhash.h"
#include "kv/workload/workload.h"

namespace {
std::atomic<std::uint64_t> allocations{0};
}  // namespace

void* operator new(std::size_t bytes) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* memory = std::malloc(bytes == 0 ? 1 : bytes)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }

namespace rdmalab::kv {
namespace {

TEST(KvHotPaths, AllocateNothing) {
  MicaConfig cache_config;
  cache_config.bucket_count_log2 = 8;
  cache_config.log_bytes = 64 << 10;
  cache_config.prefault = false;
  MicaCache cache(cache_config);
  WorkloadConfig uniform;
  uniform.keys = 10'000;
  WorkloadConfig zipf = uniform;
  zipf.zipf = true;
  Workload workloads[] = {Workload(uniform, 0), Workload(zipf, 1)};
  std::uint8_t value[kMaxValueBytes];
  const std::uint8_t* found = nullptr;
  std::uint32_t found_bytes = 0;
  std::uint32_t version = 0;

  const std::uint64_t before = allocations.load();
  for (int i = 0; i < 100'000; ++i) {
    const Op op = workloads[i % 2].Next();
    const KeyHash key = KeyHashOf(op.key_index);
    cache.PrefetchBucket(key);
    if (op.get) {
      if (cache.Read(cache.FindAndPrefetch(key), key, &found, &found_bytes)) {
        EXPECT_NE(CheckValue(op.key_index, found, found_bytes, uniform.value_bytes), ValueCheck::kCorrupt);
      }
    } else {
      FillValue(op.key_index, 0, ++version, value, uniform.value_bytes);
      cache.Put(key, value, uniform.value_bytes);
    }
  }
  EXPECT_EQ(allocations.load() - before, 0u);
  EXPECT_GT(cache.stats().get_hits, 0u);
}

}  // namespace
}  // namespace rdmalab::kv
