// Cross-core cache-line ping-pong: the physical floor for any shared-memory transport
// (softnic, UCX posix). Two threads pinned to two cores bounce a counter through one
// cache line; each hand-over is one cache-line transfer between the cores, so the
// one-way latency is (time of a batch) / (2 * round trips in the batch).
//
// --stream SLOTS: the same two cores as producer and consumer of a stream of lines, SLOTS
// of them in flight (a ring; the consumer hands its position back once per half ring), as a
// window of WRITE-delivered requests reaches a polling server. The consumer's time per line
// is what a throughput pays per line moved, its misses overlapping the producer's stores;
// a ping-pong's one-way latency is what one message in flight pays.
//
// Usage: rdmalab-cacheline-pingpong [--cores A,B] [--rounds N] [--batch K] [--stream SLOTS] [--json]
// Prints a one-line summary, or with --json one JSON document (schema_version 1).

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

constexpr int kSchemaVersion = 1;
constexpr size_t kCacheLineBytes = 64;
constexpr int kDefaultRounds = 2000;      // batches, each timed separately
constexpr int kDefaultBatch = 1000;       // round trips per batch
constexpr int kWarmupRounds = 50;
static_assert(kWarmupRounds < kDefaultRounds);

struct Options {
  int core_a = 0;
  int core_b = 1;
  int rounds = kDefaultRounds;
  int batch = kDefaultBatch;
  int stream_slots = 0;  // 0: ping-pong
  bool json = false;
};

// The one shared line. The ping thread writes odd values, the pong thread even ones;
// each waits (acquire) for the other's value, then publishes its own (release).
struct alignas(kCacheLineBytes) Line {
  std::atomic<uint64_t> value{0};
};
static_assert(sizeof(Line) == kCacheLineBytes);

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr,
               "cacheline_pingpong: %s\n"
               "usage: rdmalab-cacheline-pingpong [--cores A,B] [--rounds N>=%d] "
               "[--batch K>=1] [--stream SLOTS>=2] [--json]\n",
               what.c_str(), kWarmupRounds + 1);
  std::exit(2);
}

int parse_int(const char* flag, const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0 || v > 1'000'000'000)
    usage_error(std::string(flag) + " wants a non-negative integer, got '" + text + "'");
  return static_cast<int>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--cores") {
      std::string v = value();
      auto comma = v.find(',');
      if (comma == std::string::npos) usage_error("--cores wants A,B, got '" + v + "'");
      o.core_a = parse_int("--cores", v.substr(0, comma).c_str());
      o.core_b = parse_int("--cores", v.substr(comma + 1).c_str());
      if (o.core_a == o.core_b) usage_error("--cores wants two different cores, got '" + v + "'");
    } else if (a == "--rounds") {
      o.rounds = parse_int("--rounds", value());
      if (o.rounds <= kWarmupRounds)
        usage_error("--rounds must exceed the " + std::to_string(kWarmupRounds) + " warm-up rounds");
    } else if (a == "--batch") {
      o.batch = parse_int("--batch", value());
      if (o.batch < 1) usage_error("--batch must be >= 1");
    } else if (a == "--stream") {
      o.stream_slots = parse_int("--stream", value());
      if (o.stream_slots < 2) usage_error("--stream wants at least 2 slots in flight");
    } else if (a == "--json") {
      o.json = true;
    } else {
      usage_error("unknown argument '" + a + "'");
    }
  }
  return o;
}

void pin_to(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0)
    throw std::runtime_error("cannot pin to core " + std::to_string(core) + ": " + std::strerror(rc));
}

inline void spin_until(const std::atomic<uint64_t>& v, uint64_t want) {
  while (v.load(std::memory_order_acquire) != want) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

// Runs o.rounds batches of o.batch steps on core_a (`step` gets the step's number over the
// whole run) and returns each measured batch's time divided by `items_per_batch`.
template <typename Step>
std::vector<double> TimeBatches(const Options& o, double items_per_batch, Step step) {
  pin_to(o.core_a);
  std::vector<double> ns;
  ns.reserve(o.rounds);
  uint64_t next = 0;
  for (int r = 0; r < o.rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < o.batch; ++k, ++next) step(next);
    auto t1 = std::chrono::steady_clock::now();
    if (r >= kWarmupRounds) ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / items_per_batch);
  }
  return ns;
}

// Returns the one-way latency (ns) of every measured batch.
std::vector<double> run(const Options& o) {
  Line line;
  const uint64_t total_trips = uint64_t(o.rounds) * uint64_t(o.batch);

  std::thread pong([&] {
    pin_to(o.core_b);
    for (uint64_t i = 0; i < total_trips; ++i) {
      spin_until(line.value, 2 * i + 1);
      line.value.store(2 * i + 2, std::memory_order_release);
    }
  });

  std::vector<double> one_way_ns = TimeBatches(o, 2.0 * o.batch, [&](uint64_t next) {
    line.value.store(2 * next + 1, std::memory_order_release);
    spin_until(line.value, 2 * next + 2);
  });
  pong.join();
  return one_way_ns;
}

// --stream: returns the consumer's time per line (ns) of every measured batch of lines.
std::vector<double> run_stream(const Options& o) {
  const uint64_t slots = static_cast<uint64_t>(o.stream_slots);
  const uint64_t credit_every = std::max<uint64_t>(slots / 2, 1);
  std::vector<Line> ring(slots);
  Line consumed;  // the consumer's position, published once per credit_every lines
  const uint64_t total = uint64_t(o.rounds) * uint64_t(o.batch);

  std::thread producer([&] {
    pin_to(o.core_b);
    uint64_t room_until = slots;  // lines the last position seen lets it store
    for (uint64_t i = 0; i < total; ++i) {
      while (i >= room_until) {
        room_until = consumed.value.load(std::memory_order_acquire) + slots;
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
      ring[i % slots].value.store(i + 1, std::memory_order_release);
    }
  });

  std::vector<double> per_line_ns = TimeBatches(o, o.batch, [&](uint64_t next) {
    spin_until(ring[next % slots].value, next + 1);
    if ((next + 1) % credit_every == 0) consumed.value.store(next + 1, std::memory_order_release);
  });
  consumed.value.store(total, std::memory_order_release);
  producer.join();
  return per_line_ns;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t idx = static_cast<size_t>(p * double(v.size() - 1) + 0.5);
  return v[idx];
}

// The distribution of one measured quantity, as `NAME_median`, `_p10`, `_p90`, `_min`.
nlohmann::json Distribution(const std::vector<double>& ns, const std::string& name) {
  return {{name + "_median", percentile(ns, 0.5)},
          {name + "_p10", percentile(ns, 0.1)},
          {name + "_p90", percentile(ns, 0.9)},
          {name + "_min", percentile(ns, 0.0)}};
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::vector<double> ns;
  try {
    ns = o.stream_slots ? run_stream(o) : run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cacheline_pingpong: %s\n", e.what());
    return 1;
  }
  const double median = percentile(ns, 0.5);
  if (o.json) {
    nlohmann::json doc = {{"schema_version", kSchemaVersion}};
    if (o.stream_slots) {
      doc["context"] = {{"benchmark", "cacheline_stream"},
                        {"cores", {o.core_a, o.core_b}},
                        {"slots_in_flight", o.stream_slots},
                        {"lines_per_batch", o.batch},
                        {"measured_batches", ns.size()}};
      doc.update(Distribution(ns, "per_line_ns"));
    } else {
      doc["context"] = {{"benchmark", "cacheline_pingpong"},
                        {"cores", {o.core_a, o.core_b}},
                        {"round_trips_per_batch", o.batch},
                        {"measured_batches", ns.size()}};
      doc.update(Distribution(ns, "one_way_ns"));
    }
    std::printf("%s\n", doc.dump(2).c_str());
  } else if (o.stream_slots) {
    std::printf("cores %d,%d  %.1f ns per line streamed, %d in flight (median of %zu batches of %d lines; "
                "p10 %.1f, p90 %.1f)\n",
                o.core_a, o.core_b, median, o.stream_slots, ns.size(), o.batch, percentile(ns, 0.1),
                percentile(ns, 0.9));
  } else {
    std::printf("cores %d,%d  one-way latency %.1f ns (median of %zu batches of %d round trips; "
                "p10 %.1f, p90 %.1f)\n",
                o.core_a, o.core_b, median, ns.size(), o.batch, percentile(ns, 0.1),
                percentile(ns, 0.9));
  }
  return 0;
}
