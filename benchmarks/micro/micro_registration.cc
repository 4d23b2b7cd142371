// What ibv_reg_mr and ibv_dereg_mr cost on private memory, 4 KiB to 1 MiB: the first
// registration of pages (a buffer never registered before), a registration of a buffer
// registered and deregistered before (what an MPI or UCX registration cache does after an
// eviction), and a second registration of a range another MR still holds.
//
// Links against the system libibverbs; run with LD_LIBRARY_PATH=build/lib/softnic to
// measure softnic (run_micro.sh with MICRO_PROGRAM=rdmalab-micro-registration). One
// iteration is one ibv_reg_mr and one ibv_dereg_mr; the time reported is their sum, and the
// counters reg_s and dereg_s are each verb's mean (printed with their unit, e.g. 3.1u).
// The memory is anonymous private pages, written before they are registered, as heap
// memory in use is; page-aligned, so that no buffer shares a page with another.

#include <infiniband/verbs.h>
#include <sys/mman.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace {

constexpr size_t kMinBytes = 4096;
constexpr size_t kMaxBytes = size_t{1} << 20;
constexpr size_t kFirstPoolBytes = size_t{256} << 20;  // fresh pages for every first registration
constexpr size_t kMaxFirstIterations = 1024;
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
static_assert(kFirstPoolBytes / kMaxBytes >= 64, "too few first registrations of 1 MiB to average");

enum class Mode { kFirst, kAgain, kHeld };

[[noreturn]] void Fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

struct Pd {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  Pd() {
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    if (list == nullptr || count == 0) {
      throw std::runtime_error("no RDMA device (is LD_LIBRARY_PATH=build/lib/softnic set?)");
    }
    context = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (context == nullptr) Fail("ibv_open_device", errno);
    pd = ibv_alloc_pd(context);
    if (pd == nullptr) Fail("ibv_alloc_pd", errno);
  }
  ~Pd() {
    ibv_dealloc_pd(pd);
    ibv_close_device(context);
  }
};

Pd& SharedPd() {
  static Pd pd;
  return pd;
}

struct Pages {
  void* base;
  size_t bytes;
  explicit Pages(size_t n) : bytes(n) {
    base = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) Fail("mmap of " + std::to_string(n) + " bytes", errno);
    std::memset(base, 0x5a, n);
  }
  ~Pages() { munmap(base, bytes); }
  uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(base) + offset; }
};

ibv_mr* Register(void* addr, size_t bytes) {
  ibv_mr* mr = ibv_reg_mr(SharedPd().pd, addr, bytes, kAccess);
  if (mr == nullptr) Fail("ibv_reg_mr of " + std::to_string(bytes) + " bytes", errno);
  return mr;
}

void BM_RegDereg(benchmark::State& state) {
  const auto mode = static_cast<Mode>(state.range(0));
  const size_t bytes = size_t(state.range(1));
  const size_t iterations = size_t(state.max_iterations);
  Pages pages(mode == Mode::kFirst ? iterations * bytes : bytes);
  ibv_mr* held = nullptr;
  if (mode != Mode::kFirst) ibv_dereg_mr(Register(pages.at(0), bytes));
  if (mode == Mode::kHeld) held = Register(pages.at(0), bytes);
  using Clock = std::chrono::steady_clock;
  std::chrono::duration<double> reg{0}, dereg{0};
  size_t n = 0;
  for (auto _ : state) {
    uint8_t* addr = pages.at(mode == Mode::kFirst ? n * bytes : 0);
    auto t0 = Clock::now();
    ibv_mr* mr = Register(addr, bytes);
    auto t1 = Clock::now();
    if (ibv_dereg_mr(mr) != 0) Fail("ibv_dereg_mr", errno);
    auto t2 = Clock::now();
    reg += t1 - t0;
    dereg += t2 - t1;
    state.SetIterationTime(std::chrono::duration<double>(t2 - t0).count());
    ++n;
  }
  if (held != nullptr) ibv_dereg_mr(held);
  state.counters["reg_s"] = benchmark::Counter(reg.count(), benchmark::Counter::kAvgIterations);
  state.counters["dereg_s"] = benchmark::Counter(dereg.count(), benchmark::Counter::kAvgIterations);
  state.SetBytesProcessed(int64_t(n * bytes));
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"mode", "bytes"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

// mode 1: again, after a deregistration; 2: again, while another MR holds it.
void RepeatSizes(benchmark::internal::Benchmark* b) {
  Sizes(b);
  for (int64_t mode : {1, 2})
    for (size_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= 4) b->Args({mode, int64_t(bytes)});
}

}  // namespace

// A first registration needs pages no earlier iteration registered, so its pool is sized by
// a fixed iteration count; each size is its own benchmark for that.
#define FIRST_REGISTRATION(bytes)                                                                 \
  BENCHMARK(BM_RegDereg)                                                                          \
      ->Name("BM_RegDereg/first")                                                                 \
      ->Apply(Sizes)                                                                              \
      ->Args({0, bytes})                                                                          \
      ->Iterations(int64_t(std::min(kMaxFirstIterations, kFirstPoolBytes / size_t(bytes))))
FIRST_REGISTRATION(4096);
FIRST_REGISTRATION(16384);
FIRST_REGISTRATION(65536);
FIRST_REGISTRATION(262144);
FIRST_REGISTRATION(1048576);
BENCHMARK(BM_RegDereg)->Name("BM_RegDereg/repeat")->Apply(RepeatSizes);

BENCHMARK_MAIN();
