#include "model/sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace rdmalab::model {
namespace {

// Stages an operation passes through, in order.
enum Stage : uint8_t { kArriveNic, kLock, kPcie, kComplete };

struct Event {
  double t_ns;
  uint32_t op;   // slot of the outstanding operation (client * window + k)
  Stage stage;
};
struct Later {
  bool operator()(const Event& a, const Event& b) const { return a.t_ns > b.t_ns; }
};

// xorshift64*: deterministic, allocation-free
struct Rng {
  uint64_t s;
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ULL;
  }
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
};

// Exact LRU over QP ids: an intrusive doubly-linked list in preallocated arrays.
struct Lru {
  std::vector<uint32_t> prev, next;
  std::vector<uint8_t> cached;
  uint32_t head = kNone, tail = kNone, size = 0, capacity = 0;
  static constexpr uint32_t kNone = UINT32_MAX;

  void Init(uint32_t ids, uint32_t cap) {
    prev.assign(ids, kNone);
    next.assign(ids, kNone);
    cached.assign(ids, 0);
    capacity = cap;
  }
  void Unlink(uint32_t id) {
    (prev[id] == kNone ? head : next[prev[id]]) = next[id];
    (next[id] == kNone ? tail : prev[next[id]]) = prev[id];
  }
  void PushFront(uint32_t id) {
    prev[id] = kNone;
    next[id] = head;
    if (head != kNone) prev[head] = id;
    head = id;
    if (tail == kNone) tail = id;
  }
  // Returns true on a hit.
  bool Touch(uint32_t id) {
    if (cached[id]) {
      Unlink(id);
      PushFront(id);
      return true;
    }
    cached[id] = 1;
    PushFront(id);
    if (++size > capacity) {
      uint32_t victim = tail;
      Unlink(victim);
      cached[victim] = 0;
      --size;
    }
    return false;
  }
};

// Latency histogram: 10 ns buckets up to ~10 ms, the rest in the last bucket.
constexpr double kHistBucketNs = 10;
constexpr size_t kHistBuckets = 1 << 20;

double Percentile(const std::vector<uint32_t>& hist, uint64_t total, double q) {
  uint64_t want = static_cast<uint64_t>(std::ceil(q * total)), seen = 0;
  for (size_t i = 0; i < hist.size(); ++i) {
    seen += hist[i];
    if (seen >= want && want > 0) return (i + 0.5) * kHistBucketNs / 1000;
  }
  return hist.size() * kHistBucketNs / 1000;
}

}  // namespace

SimResult Simulate(const SimConfig& c) {
  auto wall0 = std::chrono::steady_clock::now();
  const uint32_t slots = std::max(1u, c.clients) * std::max(1u, c.window);
  const uint32_t qps = std::max(1u, c.qps);
  const uint32_t pus = std::max(1u, c.pus);
  // Everything the loop touches is allocated here.
  std::vector<Event> heap;
  heap.reserve(slots + 1);
  std::vector<double> issued(slots, 0);
  std::vector<double> pu_free(pus, 0);
  std::vector<double> bucket_free(std::max(1u, c.lock_buckets), 0);
  std::vector<uint32_t> hist(kHistBuckets, 0);
  std::vector<uint64_t> per_client(std::max(1u, c.clients), 0);
  Lru qp_cache;
  if (c.qp_cache_entries) qp_cache.Init(qps, c.qp_cache_entries);
  double pcie_free = 0, link_free = 0, host_free = 0;
  uint32_t queued_wqes = 0;  // ops waiting at or being served by a PU
  Rng rng{c.seed * 0x9E3779B97F4A7C15ULL + 1};
  SimResult r;
  const uint64_t warmup = std::min<uint64_t>(c.ops / 10, 100000);
  const uint64_t total_ops = c.ops + warmup;
  uint64_t issued_ops = 0, done = 0;
  double t_measure0 = 0, sum_lat_ns = 0, max_lat_ns = 0;

  auto service = [&](double mean) { return c.exponential && mean > 0 ? -mean * std::log(1 - rng.Uniform()) : mean; };
  auto push = [&](double t, uint32_t op, Stage s) {
    heap.push_back({t, op, s});
    std::push_heap(heap.begin(), heap.end(), Later{});
  };
  const double half_base = c.base_latency_ns / 2;
  for (uint32_t op = 0; op < slots && issued_ops < total_ops; ++op, ++issued_ops) {
    issued[op] = 0;
    push(half_base, op, kArriveNic);
  }
  // The event loop: hot path, no allocation (heap capacity is slots + 1).
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), Later{});
    Event e = heap.back();
    heap.pop_back();
    ++r.events;
    const uint32_t client = e.op / std::max(1u, c.window);
    const uint32_t qp = client % qps;
    switch (e.stage) {
      case kArriveNic: {
        double extra_pu = 0, extra_pcie = 0;
        if (c.qp_cache_entries && !qp_cache.Touch(qp)) {
          extra_pu += c.qp_miss_ns;
          extra_pcie += c.qp_miss_pcie_ns;
          ++r.qp_misses;
        }
        if (c.wqe_cache_entries && queued_wqes >= c.wqe_cache_entries) {
          extra_pu += c.wqe_miss_ns;
          extra_pcie += c.wqe_miss_pcie_ns;
          ++r.wqe_misses;
        }
        ++queued_wqes;
        double& free = pu_free[qp % pus];
        double start = std::max(e.t_ns, free);
        free = start + service(c.pu_service_ns) + extra_pu;
        pcie_free += extra_pcie;  // the miss's DMA occupies PCIe too
        push(free, e.op, c.lock_buckets ? kLock : kPcie);
        break;
      }
      case kLock: {
        --queued_wqes;
        uint64_t target = c.counters > 1 ? rng.Next() % c.counters : 0;
        double& free = bucket_free[target % bucket_free.size()];
        double start = std::max(e.t_ns, free);
        free = start + c.lock_hold_ns;
        push(free, e.op, kPcie);
        break;
      }
      case kPcie: {
        // PCIe, link and host are single FIFO servers in tandem with no other inflow, and
        // this event pops in arrival order, so the whole tandem resolves at once.
        if (!c.lock_buckets) --queued_wqes;
        pcie_free = std::max(e.t_ns, pcie_free) + service(c.pcie_service_ns);
        link_free = std::max(pcie_free, link_free) + service(c.link_service_ns);
        host_free = std::max(link_free, host_free) + service(c.host_service_ns);
        push(host_free + half_base, e.op, kComplete);
        break;
      }
      case kComplete: {
        ++done;
        if (done == warmup) t_measure0 = e.t_ns;
        if (done > warmup) {
          double lat = e.t_ns - issued[e.op];
          sum_lat_ns += lat;
          max_lat_ns = std::max(max_lat_ns, lat);
          size_t b = static_cast<size_t>(lat / kHistBucketNs);
          ++hist[b < kHistBuckets ? b : kHistBuckets - 1];
          ++per_client[client];
          ++r.completed;
          r.simulated_s = (e.t_ns - t_measure0) * 1e-9;
        }
        if (issued_ops < total_ops) {  // closed loop: the client issues its next operation
          ++issued_ops;
          issued[e.op] = e.t_ns;
          push(e.t_ns + half_base, e.op, kArriveNic);
        }
        break;
      }
    }
  }
  if (r.completed && r.simulated_s > 0) {
    r.mops = r.completed / r.simulated_s / 1e6;
    r.lat_us_mean = sum_lat_ns / r.completed / 1000;
    r.lat_us_p50 = Percentile(hist, r.completed, 0.5);
    r.lat_us_p90 = Percentile(hist, r.completed, 0.9);
    r.lat_us_p99 = Percentile(hist, r.completed, 0.99);
    r.lat_us_p999 = Percentile(hist, r.completed, 0.999);
    r.lat_us_max = max_lat_ns / 1000;
    auto [least, most] = std::minmax_element(per_client.begin(), per_client.end());
    if (*least > 0) r.uniformity_ratio = static_cast<double>(*most) / static_cast<double>(*least);
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

SimConfig SimConfigFor(const Point& pt, const Profile& prof, const Prediction& p) {
  SimConfig c;
  const Demand& d = p.per_op;
  const double pcie_Bps = prof.pcie.DirectionBytesPerSec();
  const double dllp = prof.pcie.dllp_B_per_tlp;
  const WireParams& wire = WireFor(pt, prof);
  c.clients = pt.clients ? pt.clients : 16;
  c.window = pt.tx_depth ? pt.tx_depth : (pt.mode == "kv" || pt.mode == "sequencer" ? pt.window : 8);
  c.qps = pt.qp ? pt.qp : c.clients;
  c.ops = pt.sim_ops;
  c.exponential = pt.sim_exponential;
  if (prof.nic.host_engine) {
    // No PUs, PCIe, link or caches: the posting threads carry every operation out on the host's
    // cores (README "A NIC whose engine is the posting CPU"), so the operations queue at the
    // busiest resource, at its rate (the window is the simulator's own); the unloaded latency
    // stays the base.
    double busiest_mops = 0;
    for (const ResourceUse& r : p.resources)
      if (r.name != "window" && r.limit_mops > 0 && (busiest_mops == 0 || r.limit_mops < busiest_mops))
        busiest_mops = r.limit_mops;
    c.pus = 1;
    c.pu_service_ns = busiest_mops > 0 ? 1e3 / busiest_mops : 0;
    c.base_latency_ns = std::max(0.0, (p.lat_us > 0 ? p.lat_us * 1000 : 2000) - c.pu_service_ns);
    return c;
  }
  c.pus = prof.nic.pus;
  c.pu_service_ns = std::max(d.nic_tx_ns, d.nic_rx_ns) * prof.nic.pus;
  double h2d = (d.h2d_mmio_B + d.h2d_dma_B + d.d2h_tlps * dllp) / pcie_Bps * 1e9;
  double d2h = (d.d2h_B + d.h2d_tlps * dllp) / pcie_Bps * 1e9;
  c.pcie_service_ns = std::max(h2d, d2h);
  c.link_service_ns = std::max(d.link_tx_B, d.link_rx_B) / wire.BytesPerSec() * 1e9;
  uint32_t cores = pt.threads ? std::min(pt.threads, prof.cpu.cores) : prof.cpu.cores;
  double pio = prof.nic.pio_mops > 0 ? d.pio_posts / prof.nic.pio_mops * 1e3 : 0;
  c.host_service_ns = std::max({d.cpu_ns / cores, d.serial_cpu_ns, pio});
  double services = c.pu_service_ns + c.pcie_service_ns + c.link_service_ns + c.host_service_ns;
  c.base_latency_ns = std::max(0.0, (p.lat_us > 0 ? p.lat_us * 1000 : 2000) - services);
  c.qp_cache_entries = prof.nic.qp_cache_entries;
  c.qp_miss_ns = prof.nic.qp_miss_ns * prof.nic.pus;
  c.qp_miss_pcie_ns = DmaRead(prof.nic.qp_context_B, prof.pcie).h2d_B() / pcie_Bps * 1e9;
  if (pt.mode == "tput" && pt.direction != "inbound") {
    c.wqe_cache_entries = prof.nic.wqe_cache_entries;
    c.wqe_miss_ns = c.pu_service_ns;  // the PU fetches the WQE again
    c.wqe_miss_pcie_ns = DmaRead(kCacheLineBytes, prof.pcie).h2d_B() / pcie_Bps * 1e9;
  }
  if (pt.mode == "atomics") {
    c.lock_buckets = prof.nic.atomic_lock_buckets;
    c.counters = pt.counters;
    c.lock_hold_ns = prof.nic.atomic_lock_hold_ns;
  }
  return c;
}

}  // namespace rdmalab::model
