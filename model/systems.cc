// Sequencers and key-value systems composed from verb costs at the server (README "Throughput").
// Each operation is the sum of the verbs the server's NIC serves or issues for it, plus the
// server CPU work; the clients are assumed numerous enough not to limit (as in the papers).
#include <algorithm>
#include <cmath>

#include "model/analytic.h"
#include "model/workload.h"

namespace rdmalab::model {
namespace {

constexpr uint32_t kHerdInlineLimitB = 192;   // herd14: larger values use non-inlined SENDs
constexpr uint32_t kHerdSignalEvery = 64;     // selective signaling of responses
constexpr uint32_t kMaxResponseBatch = 16;    // guide16: up to one request per client per sweep
constexpr double kSweepTolerance = 1e-3;      // requests per sweep: far below one request
constexpr uint32_t kDefaultClients = 51;      // herd14 Sec. 5: 51 client processes on 17 machines
constexpr uint32_t kPointerB = 8;
constexpr uint32_t kFarmNeighbourhood = 6;
constexpr double kPilafBucketReads = 1.6;     // 3-1 cuckoo: second bucket with probability 0.6
constexpr uint32_t kPilafBucketB = 32;
constexpr uint32_t kAckB = 8;                 // PUT acknowledgements
constexpr uint32_t kLeaseB = 8;               // HydraDB: validity flag / lease word beside the value
constexpr double kReadBasedReadsPerGet = 2;   // guide16 Fig. 9: a READ-based store needs 2 READs per GET
constexpr int kHerdPipelineStages = 2;        // herd14 Sec. 4.1.1: one stage per memory access of a GET
constexpr double kFlushWaitToleranceUs = 1e-4;

VerbSpec Verb(Opcode op, Transport t, bool inl, bool signaled = false) {
  VerbSpec v;
  v.op = op;
  v.transport = t;
  v.inline_data = inl;
  v.signaled = signaled;
  return v;
}

uint32_t Clients(const Point& pt) { return pt.clients ? pt.clients : kDefaultClients; }
uint32_t Workers(const Point& pt, const Profile& prof) { return pt.threads ? pt.threads : prof.cpu.cores; }

// Requests a worker finds in one sweep over its clients' slots (guide16 Sec. 4.2): of the
// clients x window requests outstanding, those not in flight (rate x unloaded latency, Little's
// law) wait at the server, shared by the workers; at most one per client per sweep. More
// workers with the same clients find fewer each; a lightly loaded server finds one.
// `rate_at(sweep)` predicts the rate with that sweep size; the fixed point is found by bisection
// (the wait falls as the rate, which rises with the sweep, grows).
template <typename RateAt>
double EmergentSweep(const Point& pt, uint32_t workers, const Profile& prof, RateAt rate_at) {
  double cap = std::min<double>(kMaxResponseBatch, Clients(pt));
  if (!prof.Has(kBatching)) return cap;  // without the mechanism: the fullest batch
  auto excess = [&](double sweep) {
    auto [mops, lat_us] = rate_at(sweep);
    double waiting = static_cast<double>(Clients(pt)) * pt.window - mops * lat_us;
    return sweep - std::clamp(waiting / workers, 1.0, cap);
  };
  double lo = 1, hi = cap;
  if (excess(lo) >= 0) return lo;
  if (excess(hi) <= 0) return hi;
  while (hi - lo > kSweepTolerance) {
    double mid = (lo + hi) / 2;
    (excess(mid) < 0 ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// herd14 Sec. 4.1.1: a worker pushes a request it finds into its two-stage pipeline and
// answers it when it leaves, each stage advanced by the worker's next request or, after
// `pipeline_flush_ns` without one, by a no-op. With the worker's requests arriving at random
// at `per_worker_mops`, a stage waits min(next arrival, flush) on average: (1 - e^(-l F)) / l.
// Light load: a flush per stage (Sec. 5.4: the wait adds to the latency); heavy: little.
double PipelineWaitUs(double per_worker_mops, const Profile& prof) {
  double flush_us = prof.cpu.pipeline_flush_ns / 1000;
  double stage_us = per_worker_mops > 0 ? -std::expm1(-per_worker_mops * flush_us) / per_worker_mops : flush_us;
  return kHerdPipelineStages * stage_us;
}

uint32_t Doorbell(double sweep) { return std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(sweep))); }

// Responses posted per sweep of `sweep` requests on average: sweeps of floor and ceil sizes in
// proportion, so the cost moves smoothly with the sweep (the fixed point needs no jumps).
Demand OutboundPerSweep(const WrShape& wr, double sweep, bool doorbell, const Profile& prof, const WireParams& wire,
                        uint32_t signal_every) {
  double lo = std::max(1.0, std::floor(sweep)), f = std::max(1.0, sweep) - lo;
  Demand d = Outbound(wr, static_cast<uint32_t>(lo), signal_every, prof, wire, doorbell).Scaled(1 - f);
  if (f > 0) d += Outbound(wr, static_cast<uint32_t>(lo) + 1, signal_every, prof, wire, doorbell).Scaled(f);
  return d;
}

Demand Cpu(double ns) {
  Demand d;
  d.cpu_ns = ns;
  return d;
}

struct Composer {
  const Point& pt;
  const Profile& prof;
  const WireParams& wire;
  Demand total;
  std::vector<std::pair<std::string, Demand>> parts;
  double lat_us = 0;

  void Add(const std::string& what, const Demand& d, double weight) {
    if (weight <= 0) return;
    total += d.Scaled(weight);
    parts.push_back({what + (weight != 1 ? " x" + std::to_string(weight).substr(0, 4) : ""), d});
  }
  // A PUT as FaRM and HydraDB make it: the client WRITEs key + value into a buffer the
  // server polls, the server inserts and answers with a WRITE. Returns the PUT's latency.
  double AddWritePut(Transport t, uint32_t sk, uint32_t sv, double f_put) {
    const std::string verb = std::string("WRITE-") + TransportName(t);
    WrShape req = Shape(Verb(Opcode::kWrite, t, sk + sv <= prof.wqe.max_inline_B), sk + sv);
    WrShape ack = Shape(Verb(Opcode::kWrite, t, true, true), kAckB);
    Add("inbound " + verb + " PUT", Inbound(req, prof, wire), f_put);
    Add("outbound " + verb + " PUT ack", Outbound(ack, 1, kHerdSignalEvery, prof, wire), f_put);
    Add("server CPU (PUT: poll, insert)",
        Cpu(prof.cpu.poll_request_ns + prof.cpu.kv_request_ns + 2 * prof.cpu.dram_ns), f_put);
    Add("server loads the PUT's lines", LineFetch(prof, true), f_put);
    Add("client loads the ack's line", LineFetch(prof, false), f_put);
    return VerbLatencyUs(req, prof, wire, true) + VerbLatencyUs(ack, prof, wire, true);
  }
  Prediction Finish(Engagement e) {
    // On a host engine nothing overlaps a lone request: the server's CPU work for it and the
    // client's own (its next request, its completions) lie on its round trip beside the verbs'.
    if (prof.nic.host_engine) lat_us += (total.cpu_ns + total.peer_ns) / 1000;
    ShareHost(e, pt, true, true, true);  // the server's workers and the clients' threads poll, clients for answers
    // Little's law bounds the rate only when the point says how many clients there are.
    if (pt.window_bound && pt.clients && pt.window && lat_us > 0) {
      e.outstanding = static_cast<double>(Clients(pt)) * pt.window;
      e.rtt_us = lat_us;
    }
    Prediction p = Solve(total, prof, wire, e);
    p.parts = parts;
    p.lat_us = lat_us;
    return p;
  }
};

// One worker's part of the total (herd14 Fig. 14) when the point asks for `core`.
Prediction PerCore(const Point& pt, Prediction p, uint32_t workers) {
  if (pt.core < 0) return p;
  if (static_cast<uint32_t>(pt.core) >= workers)
    throw ModelError("params.core = " + std::to_string(pt.core) + " is out of range (valid: 0.." +
                     std::to_string(workers - 1) + " for " + std::to_string(workers) + " workers)");
  double share = WorkerShares(pt.distribution, pt.zipf_theta, pt.keys, workers)[pt.core];
  p.mops *= share;
  p.gbps *= share;
  p.notes.push_back("worker " + std::to_string(pt.core) + " serves " + std::to_string(share * 100).substr(0, 5) +
                    "% of the requests");
  return p;
}

}  // namespace

Prediction PredictSequencer(const Point& pt, const Profile& prof) {
  const WireParams& wire = WireFor(pt, prof);
  const CpuParams& cpu = prof.cpu;
  uint32_t workers = Workers(pt, prof);
  if (pt.design == "atomics") {
    Point a = pt;
    a.mode = "atomics";
    a.verb = Verb(Opcode::kFaa, Transport::kRc, false, true);
    a.counters = 1;
    return PredictAtomics(a, prof, ClientAnswerWork(prof, cpu.sequencer_client_answer_ns));
  }
  bool spec = pt.design == "spec-s0";
  bool batched = pt.design != "herd-rpc" || pt.batching;
  // guide16 Sec. 4.2.2: Spec-S0 claims a sweep's counter values with one atomic add in its
  // batched and its non-batched (WQE-by-MMIO, --batch 1) forms alike
  bool counter_batched = batched || spec;
  // guide16 Sec. 4.2: multi-queue is 3 response QPs per core; Spec-S0 (Sec. 4.2.1) builds on
  // the RPCs with both optimizations
  uint32_t queues = pt.design == "herd-rpc-mq" || spec ? std::max(pt.queues, 3u) : pt.queues;
  auto compose = [&](double sweep) {
    Composer c{pt, prof, wire, {}, {}, 0};
    // rdmalab-bench's --batch (post_list here) fixes the responses per doorbell
    uint32_t batch = !batched ? 1 : pt.batch_given ? pt.post_list : Doorbell(sweep);
    // guide16 Sec. 4.1: the batched design SENDs the N requests a sweep found with a Doorbell,
    // N = 1 included; --batch 1 asks for one WQE-by-MMIO post each
    bool doorbell = batched && !(pt.batch_given && batch == 1);
    WrShape req = spec ? Shape(Verb(Opcode::kSend, Transport::kUd, true), 0)
                       : Shape(Verb(Opcode::kWrite, Transport::kUc, true), 16);
    if (spec) req.header_only = true;
    c.Add(spec ? "inbound header-only SEND" : "inbound WRITE-UC request 16 B", Inbound(req, prof, wire), 1);
    if (!spec) c.Add("server loads the request's line", LineFetch(prof, true), 1);
    c.Add("clients' own work per answer", ClientAnswerWork(prof, cpu.sequencer_client_answer_ns), 1);
    // response: 8-byte integer (Spec-S0: header-only with the lower 4 bytes as immediate)
    WrShape resp = Shape(Verb(Opcode::kSend, Transport::kUd, true), 8);
    resp.signaled = true;
    if (spec) resp.header_only = true, resp.payload_B = 0;
    c.Add(std::string(spec ? "outbound header-only SEND" : "outbound SEND-UD 8 B") +
              (doorbell ? " (doorbell batch " + std::to_string(batch) + ")" : " (WQE-by-MMIO)"),
          pt.batch_given || !batched ? Outbound(resp, batch, kHerdSignalEvery, prof, wire, doorbell)
                                     : OutboundPerSweep(resp, sweep, doorbell, prof, wire, kHerdSignalEvery),
          1);
    // server CPU: detect the request, take the next value of the shared counter (one atomic
    // add of N per sweep when batched)
    double per_counter = counter_batched ? sweep : 1;
    Demand work = Cpu(spec ? 0 : cpu.poll_request_ns);
    work.serial_cpu_ns = cpu.shared_atomic_ns / per_counter;
    work.cpu_ns += cpu.shared_atomic_ns / per_counter;
    c.Add("server CPU (poll, shared counter" + std::string(counter_batched ? ", one add per sweep)" : ")"), work, 1);
    Engagement e;
    e.cores = pt.threads;
    e.qps = workers * queues;
    c.lat_us = VerbLatencyUs(req, prof, wire, true) + VerbLatencyUs(resp, prof, wire, true, doorbell);
    return c.Finish(e);
  };
  // the RPC baseline answers each request as it finds it: nothing is batched
  double sweep = !counter_batched ? 1 : EmergentSweep(pt, workers, prof, [&](double s) {
    Prediction p = compose(s);
    return std::make_pair(p.mops, p.lat_us);
  });
  Prediction p = compose(sweep);
  p.notes.push_back("requests per sweep (per doorbell when batched): " + std::to_string(sweep).substr(0, 5));
  p.requests_per_sweep = sweep;
  return p;
}

namespace {

// What every key-value system's prediction starts from: the point, the profile, and the
// quantities and verb shapes the systems share.
struct KvServer {
  const Point& pt;
  const Profile& prof;
  const WireParams& wire;
  double f_put = pt.put_fraction, f_get = 1 - pt.put_fraction;
  uint32_t sk = pt.key_B, sv = pt.value_B;
  uint32_t workers = Workers(pt, prof);
  uint32_t clients = Clients(pt);

  Composer Compose() const { return Composer{pt, prof, wire, {}, {}, 0}; }
  Engagement Cores() const {
    Engagement e;
    e.cores = pt.threads;
    return e;
  }
  double Lat(const WrShape& wr, bool one_way) const { return VerbLatencyUs(wr, prof, wire, one_way); }
  WrShape Read(uint32_t bytes) const { return Shape(Verb(Opcode::kRead, Transport::kRc, false, true), bytes); }
  // A client's READ of a random key's data in the server's table (on a host engine, from
  // memory as often as the table outgrows the host's cache).
  Demand TableRead(uint32_t bytes) const {
    Demand d = Inbound(Read(bytes), prof, wire);
    d.nic_rx_ns += ColdDataNs(pt, bytes, prof);
    return d;
  }
  double TableReadLatUs(uint32_t bytes) const { return Lat(Read(bytes), false) + ColdDataNs(pt, bytes, prof) / 1000; }
  Prediction Finish(Composer& c, const Engagement& e) const { return PerCore(pt, c.Finish(e), workers); }
};

// HERD with `sweep` requests answered per sweep, the hottest worker's `imbalance` and the
// answers' wait in the worker's pipeline.
Prediction HerdAt(const KvServer& kv, double sweep, double imbalance, double pipeline_wait_us) {
  const Point& pt = kv.pt;
  const Profile& prof = kv.prof;
  const uint32_t sk = kv.sk, sv = kv.sv;
  Composer h = kv.Compose();
  // request: the client's UC WRITE into the request region (GET: keyhash; PUT: key, LEN, value)
  WrShape get_req = Shape(Verb(Opcode::kWrite, Transport::kUc, true), sk);
  WrShape put_req = Shape(Verb(Opcode::kWrite, Transport::kUc, sv + sk + 2 <= prof.wqe.max_inline_B), sk + 2 + sv);
  h.Add("inbound WRITE-UC GET request " + std::to_string(sk) + " B", Inbound(get_req, prof, kv.wire), kv.f_get);
  h.Add("inbound WRITE-UC PUT request " + std::to_string(sk + 2 + sv) + " B", Inbound(put_req, prof, kv.wire), kv.f_put);
  h.Add("server loads the request's line", LineFetch(prof, true), 1);
  h.Add("clients' own work per request", PeerWork(prof, 0, 1), 1);
  // a client's window of requests arrives together and is served on one context load
  h.Add("QP-context misses (" + std::to_string(kv.clients) + " UC QPs)", QpCacheMisses(kv.clients, prof, true, pt.window),
        1);
  uint32_t batch = pt.batching ? Doorbell(sweep) : 1;
  bool doorbell = pt.batching;  // guide16 Sec. 4.1: a sweep's responses go by Doorbell
  const int64_t inline_limit = pt.inline_size_B >= 0 ? pt.inline_size_B : kHerdInlineLimitB;
  bool inl = sv <= inline_limit && sv <= prof.wqe.max_inline_B;
  WrShape get_resp = Shape(Verb(Opcode::kSend, Transport::kUd, inl, true), sv);
  WrShape put_resp = Shape(Verb(Opcode::kSend, Transport::kUd, true, true), 0);
  std::string how = doorbell ? " (doorbell batch " + std::to_string(batch) + ")" : " (WQE-by-MMIO)";
  h.Add("outbound SEND-UD GET response " + std::to_string(sv) + " B" + (inl ? " inline" : "") + how,
        OutboundPerSweep(get_resp, sweep, doorbell, prof, kv.wire, kHerdSignalEvery), kv.f_get);
  h.Add("outbound SEND-UD PUT response" + how, OutboundPerSweep(put_resp, sweep, doorbell, prof, kv.wire,
                                                                 kHerdSignalEvery), kv.f_put);
  // MICA lookup: 2 random accesses, hidden by the 2-stage prefetching pipeline. Workers
  // own their keys (EREW), so the hottest worker's share of the requests limits them all.
  const CpuParams& cpu = prof.cpu;
  h.Add(std::string("server CPU (poll, MICA with prefetch)") + (imbalance > 1.0001 ? ", hottest worker" : ""),
        Cpu(cpu.poll_request_ns + cpu.kv_request_ns + 2 * cpu.prefetched_access_ns), imbalance);
  Engagement e = kv.Cores();
  e.qps = kv.workers * pt.queues;
  e.qps_rx = kv.clients;
  h.lat_us = kv.Lat(get_req, true) + (cpu.kv_request_ns + 2 * cpu.dram_ns) / 1000 + pipeline_wait_us +
             VerbLatencyUs(get_resp, prof, kv.wire, true, doorbell);
  return h.Finish(e);
}

Prediction PredictHerd(const KvServer& kv) {
  const Point& pt = kv.pt;
  std::vector<double> shares = WorkerShares(pt.distribution, pt.zipf_theta, pt.keys, kv.workers);
  double imbalance = *std::max_element(shares.begin(), shares.end()) * kv.workers;
  double pipeline_wait_us = 0;  // the answer's wait in the worker's pipeline (PipelineWaitUs)
  auto predict = [&](double& sweep) {
    sweep = pt.batching ? EmergentSweep(pt, kv.workers, kv.prof, [&](double s) {
      Prediction p = HerdAt(kv, s, imbalance, pipeline_wait_us);
      return std::make_pair(p.mops, p.lat_us);
    }) : 1;
    return HerdAt(kv, sweep, imbalance, pipeline_wait_us);
  };
  double sweep = 1;
  Prediction p = predict(sweep);
  if (kv.prof.cpu.pipeline_flush_ns > 0 && kv.prof.Has(kPipelineFlush)) {
    // The wait falls as the rate rises, and the rate (where the window bounds it) falls as the
    // wait grows: bisect on the wait, between none and a flush per stage.
    double lo = 0, hi = PipelineWaitUs(0, kv.prof);
    while (hi - lo > kFlushWaitToleranceUs) {
      pipeline_wait_us = (lo + hi) / 2;
      double implied = PipelineWaitUs(predict(sweep).mops / kv.workers, kv.prof);
      (implied > pipeline_wait_us ? lo : hi) = pipeline_wait_us;
    }
    pipeline_wait_us = (lo + hi) / 2;
    p = predict(sweep);
    p.notes.push_back("answers wait " + std::to_string(pipeline_wait_us).substr(0, 5) +
                      " us in the worker's two-stage pipeline (later requests or a flush advance it)");
  }
  if (pt.batching) p.notes.push_back("responses per doorbell: " + std::to_string(sweep).substr(0, 5));
  p.requests_per_sweep = sweep;
  return PerCore(pt, p, kv.workers);
}

Prediction PredictPilaf(const KvServer& kv) {
  const Profile& prof = kv.prof;
  Composer c = kv.Compose();
  c.Add("inbound READ 32 B bucket", kv.TableRead(kPilafBucketB), kv.f_get * kPilafBucketReads);
  c.Add("inbound READ value " + std::to_string(kv.sv) + " B", kv.TableRead(kv.sv), kv.f_get);
  // PUT: client SENDs key+value (UC, inline), server replies with a SEND (UC, inline, unsignaled)
  WrShape put_req = Shape(Verb(Opcode::kSend, Transport::kUc, true), kv.sk + kv.sv);
  WrShape put_resp = Shape(Verb(Opcode::kSend, Transport::kUc, true, true), kAckB);
  c.Add("inbound SEND-UC PUT", Inbound(put_req, prof, kv.wire), kv.f_put);
  c.Add("outbound SEND-UC PUT reply", Outbound(put_resp, 1, kHerdSignalEvery, prof, kv.wire), kv.f_put);
  c.Add("server CPU (PUT)", Cpu(prof.cpu.kv_request_ns + 2 * prof.cpu.dram_ns), kv.f_put);
  c.Add("clients' own work per request, READ completions", PeerWork(prof, kPilafBucketReads + 1, 1), kv.f_get);
  c.Add("clients' own work per request", PeerWork(prof, 0, 1), kv.f_put);
  c.Add("QP-context misses", QpCacheMisses(kv.clients, prof, true), 1);
  Engagement e = kv.Cores();
  e.qps = kv.workers;
  e.qps_rx = kv.clients;
  c.lat_us = kv.f_get * ((kPilafBucketReads + 1) * kv.TableReadLatUs(kPilafBucketB)) +
             kv.f_put * (kv.Lat(put_req, true) + kv.Lat(put_resp, true));
  return kv.Finish(c, e);
}

// farm and farm-var: GET by READs of a hopscotch neighbourhood (farm-var: of pointers, then the value).
Prediction PredictFarm(const KvServer& kv) {
  const bool var = kv.pt.system == "farm-var";
  uint32_t bucket = kFarmNeighbourhood * (kv.sk + (var ? kPointerB : kv.sv));
  Composer c = kv.Compose();
  c.Add("inbound READ neighbourhood " + std::to_string(bucket) + " B", kv.TableRead(bucket), kv.f_get);
  if (var) c.Add("inbound READ value " + std::to_string(kv.sv) + " B", kv.TableRead(kv.sv), kv.f_get);
  double put_lat_us = c.AddWritePut(Transport::kUc, kv.sk, kv.sv, kv.f_put);
  c.Add("clients' own work per request, READ completions", PeerWork(kv.prof, var ? 2 : 1, 1), kv.f_get);
  c.Add("clients' own work per request", PeerWork(kv.prof, 0, 1), kv.f_put);
  c.Add("QP-context misses", QpCacheMisses(kv.clients, kv.prof, true), 1);
  Engagement e = kv.Cores();
  e.qps = kv.workers;
  e.qps_rx = kv.clients;
  c.lat_us = kv.f_get * (kv.TableReadLatUs(bucket) * (var ? 2 : 1)) + kv.f_put * put_lat_us;
  return kv.Finish(c, e);
}

// GET: one READ of the value and its lease word (the client's address cache hits); PUT: an
// inlined WRITE-RC request and an inlined WRITE-RC response (HydraDB-em).
Prediction PredictHydraDb(const KvServer& kv) {
  Composer c = kv.Compose();
  c.Add("inbound READ value + lease " + std::to_string(kv.sv + kLeaseB) + " B", kv.TableRead(kv.sv + kLeaseB),
        kv.f_get);
  double put_lat_us = c.AddWritePut(Transport::kRc, kv.sk, kv.sv, kv.f_put);
  c.Add("clients' own work per request, READ completions", PeerWork(kv.prof, 1, 1), kv.f_get);
  c.Add("clients' own work per request", PeerWork(kv.prof, 0, 1), kv.f_put);
  c.Add("QP-context misses", QpCacheMisses(kv.clients, kv.prof, true), 1);
  Engagement e = kv.Cores();
  e.qps = kv.workers;
  e.qps_rx = kv.clients;
  c.lat_us = kv.f_get * kv.TableReadLatUs(kv.sv + kLeaseB) + kv.f_put * put_lat_us;
  return kv.Finish(c, e);
}

// Not a system but guide16 Fig. 9's bound: every operation costs two inbound READs.
Prediction PredictReadBased(const KvServer& kv) {
  Composer c = kv.Compose();
  c.Add("inbound READ " + std::to_string(kv.sv) + " B", kv.TableRead(kv.sv), kReadBasedReadsPerGet);
  c.Add("clients' own work per request, READ completions", PeerWork(kv.prof, kReadBasedReadsPerGet, 1), 1);
  Engagement e = kv.Cores();
  e.qps_rx = kv.clients;
  c.lat_us = kReadBasedReadsPerGet * kv.TableReadLatUs(kv.sv);
  return kv.Finish(c, e);
}

// drtm and drtm-write: GET by one READ; PUT by a lock CAS and an unlock (drtm-write: and the value's WRITE).
Prediction PredictDrtm(const KvServer& kv) {
  const Profile& prof = kv.prof;
  Composer c = kv.Compose();
  c.Add("inbound READ item " + std::to_string(kv.sk + kv.sv) + " B", kv.TableRead(kv.sk + kv.sv), kv.f_get);
  WrShape atomic = Shape(Verb(Opcode::kCas, Transport::kRc, false, true), 8);
  Demand a = Inbound(atomic, prof, kv.wire);
  // lock words of random keys spread over every lock bucket the NIC has, unless they share
  // the address bits that pick the bucket (lock_placement same-bits): then all wait for one
  a.lock_ns = prof.nic.atomic_lock_hold_ns / (kv.pt.same_bits_locks ? 1 : prof.nic.atomic_lock_buckets);
  c.Add("inbound atomics (lock CAS, unlock)", a, 2 * kv.f_put);
  c.Add("clients' own work per request, READ completions", PeerWork(prof, 1, 1), kv.f_get);
  c.Add("clients' own work per request, atomic completions", PeerWork(prof, 2, 1), kv.f_put);
  if (kv.pt.system == "drtm-write")
    c.Add("inbound WRITE-RC value", Inbound(Shape(Verb(Opcode::kWrite, Transport::kRc, false, true), kv.sv), prof, kv.wire),
          kv.f_put);
  c.Add("QP-context misses", QpCacheMisses(kv.clients, prof, true), 1);
  Engagement e = kv.Cores();
  e.qps_rx = kv.clients;
  c.lat_us = kv.f_get * kv.TableReadLatUs(kv.sk + kv.sv) + kv.f_put * 2 * kv.Lat(atomic, false);
  return kv.Finish(c, e);
}

// The model's prediction of each rdmalab-kv system (and its read-based bound); a system
// without a row is described and accepted as rdmalab-kv declares it, and not modeled.
struct KvSystemModel {
  const char* system;
  Prediction (*predict)(const KvServer&);
};

constexpr KvSystemModel kKvSystemModels[] = {
    {"herd", PredictHerd},   {"pilaf", PredictPilaf},    {"farm", PredictFarm},
    {"farm-var", PredictFarm}, {"drtm", PredictDrtm},    {"drtm-write", PredictDrtm},
    {"hydradb", PredictHydraDb}, {"read-based", PredictReadBased},
};

}  // namespace

Prediction PredictKv(const Point& pt, const Profile& prof) {
  const KvServer kv{pt, prof, WireFor(pt, prof)};
  for (const auto& model : kKvSystemModels)
    if (pt.system == model.system) return model.predict(kv);
  throw NotModeled("system " + pt.system + ": the model has no prediction for it yet (model/systems.cc)");
}

}  // namespace rdmalab::model
