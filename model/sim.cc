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

// One run: everything the event loop touches is allocated at construction, and each stage
// an operation passes through is one method. The loop is the hot path: it allocates nothing
// (the heap's capacity is slots + 1: one event per outstanding operation).
class Simulation {
 public:
  explicit Simulation(const SimConfig& c)
      : c_(c),
        slots_(std::max(1u, c.clients) * std::max(1u, c.window)),
        qps_(std::max(1u, c.qps)),
        issued_(slots_, 0),
        pu_free_(std::max(1u, c.pus), 0),
        bucket_free_(std::max(1u, c.lock_buckets), 0),
        hist_(kHistBuckets, 0),
        per_client_(std::max(1u, c.clients), 0),
        rng_{c.seed * 0x9E3779B97F4A7C15ULL + 1},
        warmup_(std::min<uint64_t>(c.ops / 10, 100000)),
        total_ops_(c.ops + warmup_),
        half_base_(c.base_latency_ns / 2) {
    heap_.reserve(slots_ + 1);
    if (c.qp_cache_entries) qp_cache_.Init(qps_, c.qp_cache_entries);
  }

  SimResult Run() {
    for (uint32_t op = 0; op < slots_ && issued_ops_ < total_ops_; ++op, ++issued_ops_) {
      issued_[op] = 0;
      Push(half_base_, op, kArriveNic);
    }
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      const Event e = heap_.back();
      heap_.pop_back();
      ++r_.events;
      const uint32_t client = e.op / std::max(1u, c_.window);
      switch (e.stage) {
        case kArriveNic: ArriveNic(e, client % qps_); break;
        case kLock: Lock(e); break;
        case kPcie: Pcie(e); break;
        case kComplete: Complete(e, client); break;
      }
    }
    Summarize();
    return r_;
  }

 private:
  double Service(double mean) { return c_.exponential && mean > 0 ? -mean * std::log(1 - rng_.Uniform()) : mean; }
  void Push(double t, uint32_t op, Stage s) {
    heap_.push_back({t, op, s});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  // A PU takes the operation; a QP-context or WQE-cache miss costs it and PCIe a fetch.
  void ArriveNic(const Event& e, uint32_t qp) {
    double extra_pu = 0, extra_pcie = 0;
    if (c_.qp_cache_entries && !qp_cache_.Touch(qp)) {
      extra_pu += c_.qp_miss_ns;
      extra_pcie += c_.qp_miss_pcie_ns;
      ++r_.qp_misses;
    }
    if (c_.wqe_cache_entries && queued_wqes_ >= c_.wqe_cache_entries) {
      extra_pu += c_.wqe_miss_ns;
      extra_pcie += c_.wqe_miss_pcie_ns;
      ++r_.wqe_misses;
    }
    ++queued_wqes_;
    double& free = pu_free_[qp % pu_free_.size()];
    free = std::max(e.t_ns, free) + Service(c_.pu_service_ns) + extra_pu;
    pcie_free_ += extra_pcie;  // the miss's DMA occupies PCIe too
    Push(free, e.op, c_.lock_buckets ? kLock : kPcie);
  }

  // An atomic holds its counter's lock bucket.
  void Lock(const Event& e) {
    --queued_wqes_;
    uint64_t target = c_.counters > 1 ? rng_.Next() % c_.counters : 0;
    double& free = bucket_free_[target % bucket_free_.size()];
    free = std::max(e.t_ns, free) + c_.lock_hold_ns;
    Push(free, e.op, kPcie);
  }

  // PCIe, link and host are single FIFO servers in tandem with no other inflow, and this event
  // pops in arrival order, so the whole tandem resolves at once.
  void Pcie(const Event& e) {
    if (!c_.lock_buckets) --queued_wqes_;
    pcie_free_ = std::max(e.t_ns, pcie_free_) + Service(c_.pcie_service_ns);
    link_free_ = std::max(pcie_free_, link_free_) + Service(c_.link_service_ns);
    host_free_ = std::max(link_free_, host_free_) + Service(c_.host_service_ns);
    Push(host_free_ + half_base_, e.op, kComplete);
  }

  // Counted once the warm-up is done; closed loop: the client issues its next operation.
  void Complete(const Event& e, uint32_t client) {
    ++done_;
    if (done_ == warmup_) t_measure0_ = e.t_ns;
    if (done_ > warmup_) {
      double lat = e.t_ns - issued_[e.op];
      sum_lat_ns_ += lat;
      max_lat_ns_ = std::max(max_lat_ns_, lat);
      size_t b = static_cast<size_t>(lat / kHistBucketNs);
      ++hist_[b < kHistBuckets ? b : kHistBuckets - 1];
      ++per_client_[client];
      ++r_.completed;
      r_.simulated_s = (e.t_ns - t_measure0_) * 1e-9;
    }
    if (issued_ops_ < total_ops_) {
      ++issued_ops_;
      issued_[e.op] = e.t_ns;
      Push(e.t_ns + half_base_, e.op, kArriveNic);
    }
  }

  void Summarize() {
    if (!r_.completed || r_.simulated_s <= 0) return;
    r_.mops = r_.completed / r_.simulated_s / 1e6;
    r_.lat_us_mean = sum_lat_ns_ / r_.completed / 1000;
    r_.lat_us_p50 = Percentile(hist_, r_.completed, 0.5);
    r_.lat_us_p90 = Percentile(hist_, r_.completed, 0.9);
    r_.lat_us_p99 = Percentile(hist_, r_.completed, 0.99);
    r_.lat_us_p999 = Percentile(hist_, r_.completed, 0.999);
    r_.lat_us_max = max_lat_ns_ / 1000;
    auto [least, most] = std::minmax_element(per_client_.begin(), per_client_.end());
    if (*least > 0) r_.uniformity_ratio = static_cast<double>(*most) / static_cast<double>(*least);
  }

  const SimConfig& c_;
  const uint32_t slots_, qps_;
  std::vector<Event> heap_;
  std::vector<double> issued_, pu_free_, bucket_free_;
  std::vector<uint32_t> hist_;
  std::vector<uint64_t> per_client_;
  Lru qp_cache_;
  Rng rng_;
  const uint64_t warmup_, total_ops_;
  const double half_base_;
  double pcie_free_ = 0, link_free_ = 0, host_free_ = 0;
  uint32_t queued_wqes_ = 0;  // ops waiting at or being served by a PU
  uint64_t issued_ops_ = 0, done_ = 0;
  double t_measure0_ = 0, sum_lat_ns_ = 0, max_lat_ns_ = 0;
  SimResult r_;
};

}  // namespace

SimResult Simulate(const SimConfig& c) {
  auto wall0 = std::chrono::steady_clock::now();
  SimResult r = Simulation(c).Run();
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
