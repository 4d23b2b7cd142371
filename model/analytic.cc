#include "model/analytic.h"

#include "model/workload.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rdmalab::model {

Demand& Demand::operator+=(const Demand& o) {
  h2d_mmio_B += o.h2d_mmio_B; h2d_dma_B += o.h2d_dma_B; d2h_B += o.d2h_B;
  h2d_tlps += o.h2d_tlps; d2h_tlps += o.d2h_tlps; pio_posts += o.pio_posts;
  nic_tx_ns += o.nic_tx_ns; nic_rx_ns += o.nic_rx_ns; fetch_wait_ns += o.fetch_wait_ns;
  link_tx_B += o.link_tx_B; link_rx_B += o.link_rx_B;
  link_tx_packets += o.link_tx_packets; link_rx_packets += o.link_rx_packets;
  lock_ns += o.lock_ns; serial_cpu_ns += o.serial_cpu_ns; cpu_ns += o.cpu_ns; peer_ns += o.peer_ns;
  payload_B += o.payload_B;
  return *this;
}

Demand Demand::Scaled(double k) const {
  Demand d = *this;
  d.h2d_mmio_B *= k; d.h2d_dma_B *= k; d.d2h_B *= k; d.h2d_tlps *= k; d.d2h_tlps *= k; d.pio_posts *= k;
  d.nic_tx_ns *= k; d.nic_rx_ns *= k; d.fetch_wait_ns *= k; d.link_tx_B *= k; d.link_rx_B *= k;
  d.link_tx_packets *= k; d.link_rx_packets *= k; d.lock_ns *= k; d.serial_cpu_ns *= k; d.cpu_ns *= k; d.peer_ns *= k;
  d.payload_B *= k;
  return d;
}

void Demand::AddPcie(const PcieBytes& b, double times) {
  h2d_mmio_B += times * b.mmio_B;
  h2d_dma_B += times * b.dma_cpl_B;
  d2h_B += times * b.d2h_B;
  h2d_tlps += times * b.h2d_tlps;
  d2h_tlps += times * b.d2h_tlps;
}

namespace {

struct Limit {
  const char* name;
  std::string label;
  double s_per_op;
};

// A host engine (README "A NIC whose engine is the posting CPU"): no PCIe, PIO or wire limit
// (softnic counts them, they cost nothing); the measured node's threads do their CPU work and
// carry out the WRs they post, the peers' threads those they post here, and busy-polling
// threads beyond the host's cores get a time-slice each.
// a run always has a core: a shared host slows it, it does not stop it
double HostCores(const Profile& prof) {
  return prof.cpu.available_cores > 0 ? std::clamp<double>(prof.cpu.available_cores, 1, prof.cpu.cores)
                                      : prof.cpu.cores;
}

// Busy threads beyond the cores take turns by time slices (milliseconds, against microseconds
// of work): a client and its server thread make progress only while both hold a core, and a
// window drains in far less than a slice. Any two given threads of n hold two of the c cores at
// once a share c(c-1)/(n(n-1)) of the time; 1 where every thread has a core or none waits.
double PairTogether(const Profile& prof, const Engagement& e) {
  double cores = HostCores(prof), n = e.host_threads;
  if (!prof.nic.host_engine || !e.round_trip_pairs || n <= cores) return 1.0;
  return cores * (cores - 1) / (n * (n - 1));
}

void HostEngineLimits(const Demand& d, const Profile& prof, const Engagement& e, std::vector<Limit>& limits) {
  double cores = HostCores(prof);
  double share = e.host_threads > cores ? cores / e.host_threads : 1.0;
  double own = std::min((e.cores ? e.cores : cores) * share, cores);
  double peers = e.peer_threads ? std::min(e.peer_threads * share, cores) : cores;
  if (e.round_trip_pairs && e.host_threads > cores) {
    double together = e.round_trip_pairs * PairTogether(prof, e);
    own = std::min(own, together);
    peers = std::min(peers, together);
  }
  limits.push_back({"cpu", "CPU (posting thread)", (d.cpu_ns + d.nic_tx_ns) * 1e-9 / own});
  limits.push_back({"nic_rx", "CPU (peers' posting threads)", (d.nic_rx_ns + d.peer_ns) * 1e-9 / peers});
  limits.push_back({"host_cpu", "CPU (host cores)", (d.cpu_ns + d.nic_tx_ns + d.nic_rx_ns + d.peer_ns) * 1e-9 / cores});
}

// guide16 Sec. 3.4: a PU that takes an atomic acquires the NIC's lock for its address and
// holds it across the PCIe read-modify-write; while it waits for and holds the lock it serves no
// other verb (atomics contend with non-atomic verbs too). The `pus` PUs thus form a closed
// population cycling between their own work (`pu_ns` per operation on one PU) and the lock
// (`lock_ns` per operation, queued): exact mean-value analysis gives their rate, below both the
// lock's and the PUs' own limits when both are busy.
constexpr double kLockWaitMargin = 1.01;

double LockWaitRateOpsPerNs(uint32_t pus, double pu_ns, double lock_ns) {
  double queued = 0, rate = 0;
  for (uint32_t n = 1; n <= pus; ++n) {
    double at_lock = lock_ns * (1 + queued);
    rate = n / (at_lock + pu_ns);
    queued = rate * at_lock;
  }
  return rate;
}

}  // namespace

void ShareHost(Engagement& e, const Point& pt, bool own, bool peers, bool round_trips) {
  e.peer_threads = pt.peer_threads;
  e.round_trip_pairs = round_trips ? pt.peer_threads : 0;
  e.host_threads = (own ? (pt.threads ? pt.threads : 1) : 0) + (peers ? pt.peer_threads : 0);
}

Prediction Solve(const Demand& d, const Profile& prof, const WireParams& wire, const Engagement& e) {
  Prediction out;
  out.per_op = d;
  std::vector<Limit> limits;
  if (prof.nic.host_engine) HostEngineLimits(d, prof, e, limits);
  const double pcie_Bps = prof.pcie.DirectionBytesPerSec();
  const double dllp = prof.pcie.dllp_B_per_tlp;
  // ACK and flow-control DLLPs travel opposite to the TLPs they acknowledge/credit.
  if (!prof.nic.host_engine) {
    limits.push_back({"pcie_h2d", d.h2d_mmio_B >= d.h2d_dma_B ? "MMIO bw" : "DMA bw",
                      (d.h2d_mmio_B + d.h2d_dma_B + d.d2h_tlps * dllp) / pcie_Bps});
    limits.push_back({"pcie_d2h", "DMA bw", (d.d2h_B + d.h2d_tlps * dllp) / pcie_Bps});
    if (prof.nic.pio_mops > 0) limits.push_back({"pio", "PIO", d.pio_posts / (prof.nic.pio_mops * 1e6)});
    double pus = prof.nic.pus;
    double engaged_tx = e.qps ? std::min<double>(e.qps, pus) / pus : 1.0;
    double engaged_rx = e.qps_rx ? std::min<double>(e.qps_rx, pus) / pus : 1.0;
    // A PU's fetch waits overlap with the work of its other QPs; with the QP count unknown
    // (0 = "enough QPs") they are hidden entirely.
    double qps_per_pu = e.qps ? e.qps / std::min<double>(e.qps, pus) : 0;
    double wait_ns = qps_per_pu > 0 ? d.fetch_wait_ns / qps_per_pu / pus : 0;
    limits.push_back({"nic_tx", "NIC", (d.nic_tx_ns + wait_ns) * 1e-9 / engaged_tx});
    limits.push_back({"nic_rx", "NIC", d.nic_rx_ns * 1e-9 / engaged_rx});
    if (d.lock_ns > 0 && d.nic_rx_ns > 0 && prof.Has(kLockWait)) {
      uint32_t waiting = std::max<uint32_t>(static_cast<uint32_t>(std::lround(engaged_rx * pus)), 1);
      double s_per_op = 1e-9 / LockWaitRateOpsPerNs(waiting, d.nic_rx_ns * pus, d.lock_ns);
      // named only where the stalls cost more than 1% beyond the lock or the PUs alone
      if (s_per_op > kLockWaitMargin * std::max(d.lock_ns * 1e-9, d.nic_rx_ns * 1e-9 / engaged_rx))
        limits.push_back({"lock_wait", "NIC (PUs wait for the atomic lock)", s_per_op});
    }
    limits.push_back({"link_tx", "link bw", d.link_tx_B / wire.BytesPerSec()});
    limits.push_back({"link_rx", "link bw", d.link_rx_B / wire.BytesPerSec()});
    double cores = e.cores ? std::min<double>(e.cores, prof.cpu.cores) : prof.cpu.cores;
    limits.push_back({"cpu", "CPU", d.cpu_ns * 1e-9 / cores});
  }
  limits.push_back({"atomic_lock", prof.nic.host_engine ? "cache-line transfer" : "PCIe RTT", d.lock_ns * 1e-9});
  limits.push_back({"shared_counter", "CPU (shared counter)", d.serial_cpu_ns * 1e-9});
  // a client's window drains only while it and its server thread both hold a core
  if (e.outstanding > 0 && e.rtt_us > 0)
    limits.push_back({"window", "window/latency", e.rtt_us * 1e-6 / (e.outstanding * PairTogether(prof, e))});
  if (e.requesters_mops > 0) limits.push_back({"requesters", e.requesters_label, 1e-6 / e.requesters_mops});

  double worst = 0;
  for (const auto& l : limits) {
    if (l.s_per_op <= 0) continue;
    if (l.s_per_op > worst) {
      worst = l.s_per_op;
      out.bottleneck = l.name;
      out.bottleneck_label = l.label;
    }
  }
  if (worst <= 0) throw ModelError("the operation demands nothing of any resource (empty operation)");
  out.mops = 1e-6 / worst;
  for (const auto& l : limits) {
    if (l.s_per_op <= 0) continue;
    out.resources.push_back({l.name, l.label, 1e-6 / l.s_per_op, l.s_per_op / worst});
  }
  out.gbps = out.mops * 1e6 * d.payload_B * 8 / 1e9;
  return out;
}

WrShape Shape(const VerbSpec& v, uint64_t payload_B, uint32_t sge, bool inline_recv) {
  WrShape wr;
  wr.op = v.op;
  wr.transport = v.transport;
  wr.payload_B = static_cast<uint32_t>(v.header_only ? 0 : payload_B);
  wr.inline_data = v.inline_data && (v.op == Opcode::kSend || v.op == Opcode::kWrite);
  wr.signaled = v.signaled;
  wr.header_only = v.header_only;
  wr.inline_recv = inline_recv;
  wr.sge = sge;
  return wr;
}

namespace {

double OutboundNs(const WrShape& wr, const NicTimes& t) {
  switch (wr.op) {
    case Opcode::kSend: return wr.header_only ? t.send_header_only_ns : t.send_ns;
    case Opcode::kWrite: return t.write_ns;
    case Opcode::kRead: return t.read_ns;
    case Opcode::kCas:
    case Opcode::kFaa: return t.atomic_ns;
    case Opcode::kRecv: return 0;
  }
  return 0;
}

bool InlineRecvApplies(const WrShape& wr, const Profile& prof) {
  return wr.inline_recv && wr.op == Opcode::kSend && wr.payload_B <= kCqeBytes &&
         (wr.transport != Transport::kUd || prof.nic.inline_recv_ud);
}

double InboundNs(const WrShape& wr, const Profile& prof) {
  const NicTimes& t = prof.nic.t;
  double extra = wr.transport == Transport::kDc ? t.dct_extra_ns : 0;
  switch (wr.op) {
    case Opcode::kSend:
      if (wr.header_only) return t.recv_header_only_ns + extra;
      return (InlineRecvApplies(wr, prof) ? t.recv_inline_ns : t.recv_ns) + extra;
    case Opcode::kWrite: return t.write_in_ns + extra;
    case Opcode::kRead: return t.read_in_ns + extra;
    case Opcode::kCas:
    case Opcode::kFaa: return t.atomic_in_ns + extra;
    case Opcode::kRecv: return 0;
  }
  return 0;
}


constexpr uint32_t kRecvRepostBatch = 16;  // RECVs re-posted with one doorbell (HERD refills 64)

// A non-inline SEND or WRITE carries a payload the NIC must DMA-read before it can send.
bool NeedsPayloadFetch(const WrShape& wr) {
  return (wr.op == Opcode::kSend || wr.op == Opcode::kWrite) && !wr.inline_data && !wr.header_only && wr.payload_B > 0;
}

// Host engine: the 64 B lines of payload the posting thread moves between cores.
double PayloadLines(const WrShape& wr) {
  return wr.header_only ? 0 : std::ceil(static_cast<double>(wr.payload_B) / kCacheLineBytes);
}

// Host engine: the engine time a WR's payload adds: its lines, and for a non-inline SEND or
// WRITE the gather of the payload through its lkey, each element beyond the first its own.
double PayloadNs(const WrShape& wr, const Profile& prof) {
  if (!NeedsPayloadFetch(wr)) return PayloadLines(wr) * prof.nic.line_ns;
  return PayloadLines(wr) * prof.nic.line_ns + prof.nic.gather_ns + (std::max(wr.sge, 1u) - 1) * prof.nic.sge_ns;
}

// Host engine: the posting thread's cost of posting a WR beside carrying it out. A WR of a
// list of `batch` pays its share of the list's fixed cost and its own; a post of one WR takes
// the engine's fast path (softnic's single SEND, or WRITE up to `fast_write_max_B`), else the
// general engine as a list of one. READs' and atomics' one-WR posts are in their engine times.
double HostPostNs(const WrShape& wr, uint32_t batch, const Profile& prof) {
  bool general = batch > 1 || (wr.op == Opcode::kWrite && wr.payload_B > prof.nic.fast_write_max_B);
  return general ? prof.cpu.post_doorbell_ns / batch + prof.cpu.post_per_wr_ns : prof.cpu.post_mmio_ns;
}

}  // namespace

Demand Outbound(const WrShape& wr, uint32_t batch, uint32_t cq_mod, const Profile& prof, const WireParams& wire,
                bool doorbell) {
  Demand d;
  batch = std::max<uint32_t>(batch, 1);
  doorbell = doorbell || batch > 1;
  uint32_t wqe = SendWqeBytes(wr, prof.wqe);
  if (batch == 1 && doorbell) {
    d.AddPcie(Doorbell(prof.pcie));
    d.AddPcie(DmaRead(PadToLine(wqe), prof.pcie));
  } else {
    d.AddPcie(PostBatch(batch, wqe, prof.pcie), 1.0 / batch);
  }
  d.pio_posts = 1.0 / batch;
  WrShape data = wr;
  data.signaled = false;
  d.AddPcie(RequesterData(data, prof.pcie));
  double cqe = wr.signaled ? 1.0 / std::max<uint32_t>(cq_mod, 1) : 0;
  d.AddPcie(DmaWrite(kCqeBytes, prof.pcie), cqe);
  d.nic_tx_ns = OutboundNs(wr, prof.nic.t);
  if (doorbell && prof.Has(kPuPerQp)) d.fetch_wait_ns += prof.lat.pcie_rtt_ns / batch;  // the batch's WQEs
  if (NeedsPayloadFetch(wr) && prof.Has(kPayloadFetch)) d.fetch_wait_ns += prof.lat.pcie_rtt_ns;
  WireBytes w = Wire(wr, wire);
  d.link_tx_B = w.req_B;
  d.link_tx_packets = w.req_packets;
  d.link_rx_B = w.resp_B;
  d.link_rx_packets = w.resp_packets;
  d.cpu_ns = (!doorbell ? prof.cpu.post_mmio_ns : prof.cpu.post_doorbell_ns / batch + prof.cpu.post_per_wr_ns) +
             cqe * prof.cpu.poll_cq_ns;
  d.payload_B = wr.payload_B;
  if (prof.nic.host_engine) {
    // a list of one is a single WR to the engine, whether or not the caller calls it a doorbell
    d.cpu_ns = HostPostNs(wr, batch, prof) + cqe * prof.cpu.poll_cq_ns;
    d.nic_tx_ns += PayloadNs(wr, prof);
    // the receiving peer polls the SEND's completion and re-posts its RECV
    if (wr.op == Opcode::kSend) d.peer_ns = wr.header_only ? prof.nic.t.recv_header_only_ns : prof.nic.t.recv_ns;
  }
  return d;
}

Demand Inbound(const WrShape& wr_in, const Profile& prof, const WireParams& wire, uint32_t peer_batch) {
  Demand d;
  WrShape wr = wr_in;
  wr.inline_recv = InlineRecvApplies(wr_in, prof);
  d.AddPcie(Responder(wr, prof.wqe, prof.pcie, wire.grh || wire.kind != LinkKind::kIb));
  d.nic_rx_ns = InboundNs(wr, prof);
  WireBytes w = Wire(wr, wire);
  d.link_rx_B = w.req_B;
  d.link_rx_packets = w.req_packets;
  d.link_tx_B = w.resp_B;
  d.link_tx_packets = w.resp_packets;
  if (wr.op == Opcode::kSend) {
    // the receiver polls the RECV completion and re-posts RECVs in doorbell batches
    d.AddPcie(Doorbell(prof.pcie), 1.0 / kRecvRepostBatch);
    d.pio_posts += 1.0 / kRecvRepostBatch;
    d.cpu_ns = prof.cpu.poll_cq_ns + prof.cpu.post_per_wr_ns + prof.cpu.post_doorbell_ns / kRecvRepostBatch;
  }
  d.payload_B = wr.payload_B;
  if (prof.nic.host_engine) {
    // the peer's thread posts and carries out the WR; this node only receives SENDs
    d.nic_rx_ns = (wr.op == Opcode::kSend ? OutboundNs(wr, prof.nic.t) : d.nic_rx_ns) + PayloadNs(wr, prof) +
                  HostPostNs(wr, std::max<uint32_t>(peer_batch, 1), prof);
    if (wr.op == Opcode::kSend) d.cpu_ns = wr.header_only ? prof.nic.t.recv_header_only_ns : prof.nic.t.recv_ns;
  }
  return d;
}

Demand PeerWork(const Profile& prof, double completions, double requests) {
  Demand d;
  if (prof.nic.host_engine) d.peer_ns = completions * prof.cpu.poll_cq_ns + requests * prof.cpu.client_request_ns;
  return d;
}

Demand ClientAnswerWork(const Profile& prof, double answer_ns) {
  Demand d;
  if (prof.nic.host_engine) d.peer_ns = answer_ns;
  return d;
}

Demand LineFetch(const Profile& prof, bool own) {
  Demand d;
  if (prof.nic.host_engine) (own ? d.cpu_ns : d.peer_ns) = prof.cpu.line_transfer_ns;
  return d;
}

Demand QpCacheMisses(uint32_t qps, const Profile& prof, bool rx, double burst) {
  Demand d;
  if (qps <= prof.nic.qp_cache_entries || !prof.Has(kQpCache)) return d;
  // random use of qps contexts in an LRU of qp_cache_entries: a load finds its context
  // resident with probability entries/qps
  double miss = (1.0 - static_cast<double>(prof.nic.qp_cache_entries) / qps) / std::max(burst, 1.0);
  if (rx) d.nic_rx_ns = miss * prof.nic.qp_miss_ns;
  else d.nic_tx_ns = miss * prof.nic.qp_miss_tx_ns;
  d.AddPcie(DmaRead(prof.nic.qp_context_B, prof.pcie), miss);
  return d;
}

double ColdDataNs(const Point& pt, uint32_t bytes, const Profile& prof) {
  if (!prof.nic.host_engine || prof.cpu.cache_B <= 0 || pt.keys == 0) return 0;
  const auto lines_cached = static_cast<uint32_t>(std::min(prof.cpu.cache_B / kCacheLineBytes, 4e9));
  double miss = TranslationMissRate(pt.distribution, pt.zipf_theta, pt.keys, bytes, pt.placement == "clustered",
                                    lines_cached, kCacheLineBytes);
  double lines = std::max(1.0, std::ceil(static_cast<double>(bytes) / kCacheLineBytes));
  return miss * (prof.nic.cold_access_ns + (lines - 1) * prof.nic.cold_line_ns);
}

Demand TranslationMisses(const Point& pt, uint32_t value_B, const Profile& prof, double* miss_rate) {
  Demand d;
  double miss = prof.Has(kTranslation) ? TranslationMissRate(pt.distribution, pt.zipf_theta, pt.keys, value_B,
                                                             pt.placement == "clustered", prof.nic.mtt_cache_entries,
                                                             prof.nic.page_B)
                                       : 0;
  if (miss_rate) *miss_rate = miss;
  if (miss <= 0) return d;
  // the responder PU cannot start the data DMA before it has the entry: one PCIe round trip
  d.nic_rx_ns = miss * prof.lat.pcie_rtt_ns / prof.nic.pus;
  d.AddPcie(DmaRead(prof.nic.mtt_entry_B, prof.pcie), miss);
  return d;
}

double VerbLatencyUs(const WrShape& wr, const Profile& prof, const WireParams& wire, bool one_way, bool doorbell) {
  const LatencyParams& L = prof.lat;
  if (prof.nic.host_engine) {
    // README "A NIC whose engine is the posting CPU": the posting thread carries the WR out
    // (nic_pipeline_ns, its payload lines included); a READ or an atomic also fetches the
    // peer's lines (pcie_rtt_ns); the peer's poll sees the result one cross-core hop later
    // (wire_ns), and a SEND's receiver then takes its RECV completion (poll_ns)
    double ns = L.nic_pipeline_ns + PayloadNs(wr, prof);
    if (wr.op == Opcode::kRead || IsAtomic(wr.op)) ns += L.pcie_rtt_ns;
    if (one_way) ns += L.wire_ns + (wr.op == Opcode::kSend ? L.poll_ns : 0);
    return ns / 1000;
  }
  const double port_Bps = wire.data_Gbps * 1e9 / 8;
  WireBytes w = Wire(wr, wire);
  double ns = prof.cpu.post_mmio_ns;
  if (NeedsPayloadFetch(wr)) ns += L.pcie_rtt_ns;
  if (doorbell) ns += L.pcie_rtt_ns;
  ns += L.nic_pipeline_ns + w.req_B / port_Bps * 1e9 + L.wire_ns + L.nic_pipeline_ns;
  if (wr.op == Opcode::kRead || IsAtomic(wr.op)) {
    ns += L.pcie_rtt_ns;  // responder fetches the data (atomics: the read of the RMW)
    ns += L.nic_pipeline_ns + w.resp_B / port_Bps * 1e9 + L.wire_ns + L.nic_pipeline_ns;
    return (ns + L.pcie_rtt_ns / 2 + L.poll_ns) / 1000;  // data + CQE land, CPU polls
  }
  if (one_way) return (ns + L.pcie_rtt_ns / 2 + L.poll_ns) / 1000;
  if (IsReliable(wr.transport))  // completion after the ACK comes back
    ns += L.nic_pipeline_ns + w.resp_B / port_Bps * 1e9 + L.wire_ns + L.nic_pipeline_ns;
  return (ns + L.pcie_rtt_ns / 2 + L.poll_ns) / 1000;
}

const WireParams& WireFor(const Point& pt, const Profile& prof) {
  if (pt.link == "roce") {
    if (prof.roce) return *prof.roce;
    if (prof.link.kind != LinkKind::kIb) return prof.link;  // a RoCE-only profile (cx3-roce)
    // A NIC whose engine is the posting CPU (softnic) has no wire that limits it: its RoCE and IB
    // fabrics run the same engine, so a RoCE point takes the link it was measured on.
    if (prof.nic.host_engine) return prof.link;
    throw ModelError("params.link = roce, but profile '" + prof.name + "' has neither a roce block nor a RoCE link "
                     "(valid: ib)");
  }
  return prof.link;
}

namespace {

void Check(const Point& pt, const Profile& prof, const VerbSpec& v, int64_t size, uint32_t sge) {
  if (size < 0)
    throw ModelError("params.size = " + std::to_string(size) + " is negative (valid: 0 .. 2^30 bytes)");
  if (v.inline_data && size > prof.wqe.max_inline_B)
    throw ModelError("params.size = " + std::to_string(size) + " is above the inline limit of profile '" +
                     prof.name + "' (valid for inline: 0 .. " + std::to_string(prof.wqe.max_inline_B) + " bytes)");
  if (sge > prof.nic.max_sge)
    throw ModelError("params.sge = " + std::to_string(sge) + " exceeds profile '" + prof.name +
                     "' (valid: 1 .. " + std::to_string(prof.nic.max_sge) + ")");
  if (v.transport == Transport::kUd && size > WireFor(pt, prof).mtu_B)
    throw ModelError("params.size = " + std::to_string(size) + " exceeds the path MTU for UD (valid: 0 .. " +
                     std::to_string(WireFor(pt, prof).mtu_B) + " bytes)");
}

// Inbound WRs come from the client processes, each posting them through its own NIC (the
// same hardware as the measured node): with few of them, their WQE and payload fetches bound
// the rate the server sees (nosql Sec. 4.6: non-inline WRITEs' payload DMA reads at the
// requester). Each process runs `threads` threads of `qp` QPs, as rdmalab-bench does. Like
// Little's law, it holds where the point describes its clients (their count and `tx_depth`);
// `window_bound` false takes enough of them, the papers' scale.
void LimitByRequesters(const Point& pt, const WrShape& wr, const Profile& prof, const WireParams& wire, Engagement& e) {
  if (!prof.Has(kRequesters) || prof.nic.host_engine || !pt.window_bound || pt.clients == 0 || pt.tx_depth == 0) return;
  uint32_t threads = std::max<uint32_t>(pt.threads, 1);
  Engagement own;
  own.qps = threads * std::max<uint32_t>(pt.qp, 1);
  own.cores = threads;
  Prediction one = Solve(Outbound(wr, pt.post_list, pt.cq_mod, prof, wire), prof, wire, own);
  e.requesters_mops = one.mops * pt.clients;
  e.requesters_label = "requesters' " + one.bottleneck_label;
}

Prediction Tput(const Point& pt, const Profile& prof, const WireParams& wire) {
  WrShape wr = Shape(pt.verb, pt.size_B, pt.sge, pt.inline_recv);
  uint32_t peers = pt.clients ? pt.clients : 1;
  bool connected = IsConnected(wr.transport);
  // herd14 Sec. 3.3: N nodes of N processes each, every process connected to every process
  // of the others: N x N connected QPs at a node; a datagram process needs one QP.
  uint32_t qps = pt.qp ? pt.qp : pt.direction == "alltoall" && connected ? peers * peers : peers;
  double burst = pt.tx_depth ? pt.tx_depth : 1;  // a peer's queued WRs served on one context load
  Demand d;
  Engagement e;
  e.cores = pt.threads;
  double translation_miss = 0, cold_ns = 0;
  if (pt.direction == "inbound") {
    d = Inbound(wr, prof, wire, pt.post_list);
    if (wr.signaled) d += PeerWork(prof, 1.0 / std::max<uint32_t>(pt.cq_mod, 1));
    e.qps_rx = pt.qp;
    if (connected) d += QpCacheMisses(qps, prof, true, burst);
    if (pt.keyed && (wr.op == Opcode::kRead || wr.op == Opcode::kWrite)) {
      d += TranslationMisses(pt, wr.payload_B, prof, &translation_miss);
      cold_ns = ColdDataNs(pt, wr.payload_B, prof);  // the peer's posting thread moves the data
      d.nic_rx_ns += cold_ns;
    }
    LimitByRequesters(pt, wr, prof, wire, e);
  } else {
    d = Outbound(wr, pt.post_list, pt.cq_mod, prof, wire);
    e.qps = e.qps_rx = pt.qp;
    if (pt.direction == "alltoall") {
      d += Inbound(wr, prof, wire);
      // each WR goes to a peer chosen at random: one context load per WR at both ends
      if (connected) d += QpCacheMisses(qps, prof, true);
    }
    if (connected) d += QpCacheMisses(qps, prof, false);
  }
  double lat_us = VerbLatencyUs(wr, prof, wire, false) + translation_miss * prof.lat.pcie_rtt_ns / 1000 + cold_ns / 1000;
  bool send = wr.op == Opcode::kSend, inbound = pt.direction == "inbound", outbound = pt.direction == "outbound";
  ShareHost(e, pt, !inbound || send, !outbound || send);
  if (pt.tx_depth && pt.window_bound) {
    e.outstanding = static_cast<double>(pt.tx_depth) * (pt.direction == "inbound" ? peers : pt.qp ? pt.qp : qps);
    e.rtt_us = lat_us;
  }
  Prediction p = Solve(d, prof, wire, e);
  p.parts.push_back({pt.direction + " " + VerbName(pt.verb) + " " + std::to_string(pt.size_B) + " B", d});
  p.lat_us = lat_us;
  return p;
}

Prediction Echo(const Point& pt, const Profile& prof, const WireParams& wire) {
  WrShape req = Shape(pt.request, pt.size_B), resp = Shape(pt.response, pt.size_B);
  Demand in = Inbound(req, prof, wire);
  Demand out = Outbound(resp, 1, pt.cq_mod, prof, wire);
  Demand app;
  app.cpu_ns = (req.op == Opcode::kWrite ? prof.cpu.poll_request_ns : 0) +
               pt.accesses * (pt.prefetch ? prof.cpu.prefetched_access_ns : prof.cpu.dram_ns);
  Demand d = in;
  d += out;
  d += app;
  // a WRITE request is loaded by the server's poll, a WRITE response by the client's
  if (req.op == Opcode::kWrite) d += LineFetch(prof, true);
  if (resp.op == Opcode::kWrite) d += LineFetch(prof, false);
  if (req.signaled) d += PeerWork(prof, 1.0 / std::max<uint32_t>(pt.cq_mod, 1));  // the client polls its requests' completions
  Demand client = ClientAnswerWork(prof, prof.cpu.echo_client_answer_ns);
  d += client;
  uint32_t peers = pt.clients ? pt.clients : 1;
  if (IsConnected(req.transport)) d += QpCacheMisses(peers, prof, true);
  Engagement e;
  e.cores = pt.threads;
  e.qps = pt.qp;
  double lat_us = VerbLatencyUs(req, prof, wire, true) + app.cpu_ns / 1000 + VerbLatencyUs(resp, prof, wire, true);
  if (prof.nic.host_engine) lat_us += client.peer_ns / 1000;  // the client's own work is on the round trip too
  ShareHost(e, pt, true, true, true);
  if (pt.tx_depth && pt.window_bound) {
    e.outstanding = static_cast<double>(pt.tx_depth) * peers;
    e.rtt_us = lat_us;
  }
  Prediction p = Solve(d, prof, wire, e);
  p.parts = {{"inbound request " + VerbName(pt.request), in}, {"outbound response " + VerbName(pt.response), out},
             {"server CPU work", app}};
  if (prof.nic.host_engine) p.parts.push_back({"clients' own work per answer", client});
  p.lat_us = lat_us;
  return p;
}

Prediction Atomics(const Point& pt, const Profile& prof, const WireParams& wire, const Demand& client_work = {}) {
  WrShape wr = Shape(pt.verb, 8);
  Demand d = Inbound(wr, prof, wire);
  if (wr.signaled) d += PeerWork(prof, 1.0 / std::max<uint32_t>(pt.cq_mod, 1));
  d += client_work;
  double buckets = std::min<double>(static_cast<double>(pt.counters), prof.nic.atomic_lock_buckets);
  d.lock_ns = prof.nic.atomic_lock_hold_ns / buckets;
  d.payload_B = 8;
  Engagement e;
  e.qps_rx = pt.qp;
  ShareHost(e, pt, false, true);
  Prediction p = Solve(d, prof, wire, e);
  p.parts.push_back({"inbound " + VerbName(pt.verb) + " over " + std::to_string(pt.counters) + " counters", d});
  p.lat_us = VerbLatencyUs(wr, prof, wire, false);
  return p;
}

// Two hosts forward packets to each other; one SEND gathers k = sge packets. The unit is
// packets per second at one host; the host both sends and receives.
Prediction SgBatch(const Point& pt, const Profile& prof, const WireParams& wire) {
  uint32_t k = pt.sge;
  VerbSpec v = pt.verb;
  v.inline_data = false;
  WrShape wr = Shape(v, static_cast<uint64_t>(pt.size_B) * k, k);
  if (wr.transport == Transport::kUd && wr.payload_B > wire.mtu_B)
    throw ModelError("params.sge x size = " + std::to_string(wr.payload_B) + " B exceeds the UD MTU " +
                     std::to_string(wire.mtu_B) + " (valid: RC or UC for multi-packet messages)");
  Demand out = Outbound(wr, pt.post_list, pt.cq_mod, prof, wire);
  Demand in = Inbound(wr, prof, wire);
  if (prof.nic.host_engine) {
    // the sender's engine also scatters the message into the receiver's k-element RECV
    out.nic_tx_ns += (k - 1) * prof.nic.sge_ns;
    in.nic_rx_ns += (k - 1) * prof.nic.sge_ns;
  }
  Demand d = out;
  d += in;
  Engagement e;
  e.qps = pt.qp;
  e.cores = pt.threads;
  ShareHost(e, pt, true, true);
  Prediction p = Solve(d.Scaled(1.0 / k), prof, wire, e);
  p.gbps = p.mops * 1e6 * pt.size_B * 8 / 1e9;  // one direction, payload only
  p.parts.push_back({"one WR of " + std::to_string(k) + " x " + std::to_string(pt.size_B) + " B", d});
  p.lat_us = VerbLatencyUs(wr, prof, wire, true);
  return p;
}

}  // namespace

Prediction PredictVerb(const Point& pt, const Profile& prof) {
  const WireParams& wire = WireFor(pt, prof);
  if (pt.mode == "echo") {
    Check(pt, prof, pt.request, pt.size_B, 1);
    Check(pt, prof, pt.response, pt.size_B, 1);
    return Echo(pt, prof, wire);
  }
  Check(pt, prof, pt.verb, pt.size_B, pt.sge);
  if (pt.mode == "tput") return Tput(pt, prof, wire);
  if (pt.mode == "atomics") return Atomics(pt, prof, wire);
  if (pt.mode == "sgbatch") return SgBatch(pt, prof, wire);
  if (pt.mode == "lat") {
    WrShape wr = Shape(pt.verb, pt.size_B, pt.sge, pt.inline_recv);
    Demand d = Outbound(wr, 1, pt.cq_mod, prof, wire);
    Prediction p = Solve(d, prof, wire, Engagement{});
    // pingpong reports half a round trip: one message's one-way latency
    p.lat_us = VerbLatencyUs(wr, prof, wire, pt.lat_pingpong);
    p.mops = 1.0 / p.lat_us;  // one operation in flight
    p.bottleneck = "latency";
    p.bottleneck_label = "latency";
    for (auto& r : p.resources) r.utilization = p.mops / r.limit_mops;
    p.resources.push_back({"latency", "latency", p.mops, 1.0});
    p.gbps = p.mops * 1e6 * pt.size_B * 8 / 1e9;
    p.parts.push_back({VerbName(pt.verb) + " " + std::to_string(pt.size_B) + " B", d});
    return p;
  }
  throw ModelError("mode '" + pt.mode + "' has no verb prediction (model/params.h: Modes() names each mode's)");
}

Prediction PredictAtomics(const Point& pt, const Profile& prof, const Demand& client_work) {
  Check(pt, prof, pt.verb, pt.size_B, pt.sge);
  return Atomics(pt, prof, WireFor(pt, prof), client_work);
}

}  // namespace rdmalab::model
