// Analytic bottleneck model (README "Throughput"): the per-operation demand an
// operation puts on each resource of one host+NIC, and rate = min over resources of
// capacity / demand, with the limiting resource named as the papers name it.
#pragma once

#include <string>
#include <vector>

#include "model/cost.h"
#include "model/point.h"
#include "model/profile.h"

namespace rdmalab::model {

// Demand of one operation on one host + NIC ("the measured node").
struct Demand {
  // PCIe bytes as doubles: batch costs (doorbells, WQE DMAs, 1-in-N CQEs) are amortised.
  double h2d_mmio_B = 0;
  double h2d_dma_B = 0;
  double d2h_B = 0;
  double h2d_tlps = 0, d2h_tlps = 0;
  double pio_posts = 0;      // WQE-by-MMIO posts and doorbells (host write-combining)
  double nic_tx_ns = 0;      // requester engine, aggregate over PUs
  double nic_rx_ns = 0;      // responder engine
  // Time a requester PU waits per operation for DMA reads it cannot proceed without (the
  // WQEs after a doorbell, a non-inline payload): hidden while the PU serves other QPs, so it
  // costs only when a PU has few QPs (guide16 Sec. 3.3, 5.2.1: one QP binds a core to a PU).
  double fetch_wait_ns = 0;
  double link_tx_B = 0, link_rx_B = 0;
  double link_tx_packets = 0, link_rx_packets = 0;
  double lock_ns = 0;        // serialized atomic lock time, already divided by buckets in use
  double serial_cpu_ns = 0;  // host work serialized across cores (a shared counter's cache line)
  double cpu_ns = 0;         // core time (spread over the cores in use)
  // Host engine only (Profile nic.host_engine): core time of the peers' threads, which carry
  // out the WRs they post to this node (nic_rx_ns) and receive this node's SENDs (peer_ns).
  double peer_ns = 0;
  double payload_B = 0;      // useful bytes moved (for Gb/s)

  Demand& operator+=(const Demand& o);
  Demand Scaled(double k) const;
  void AddPcie(const PcieBytes& b, double times = 1);
};

struct ResourceUse {
  std::string name;   // pcie_h2d, pcie_d2h, pio, nic_tx, nic_rx, link_tx, link_rx, atomic_lock, cpu, window
  std::string label;  // as the papers say: "MMIO bw", "DMA bw", "PIO", "NIC", "link bw", "PCIe RTT", "CPU"
  double limit_mops;  // the rate this resource alone allows
  double utilization; // predicted rate / limit
};

struct Prediction {
  double mops = 0;          // operations (of the mode's unit) per second, millions
  double gbps = 0;          // useful payload bandwidth
  std::string bottleneck;   // resource name
  std::string bottleneck_label;
  std::vector<ResourceUse> resources;
  Demand per_op;            // at the measured node
  double lat_us = 0;        // unloaded latency of one operation (lat mode), else at the predicted load
  std::vector<std::string> notes;
  double requests_per_sweep = 0;  // sequencers and batched HERD: requests a worker finds per sweep
  std::vector<std::pair<std::string, Demand>> parts;  // the verbs composing one operation (explain)
};

// Resources the node can serve, given how many QPs and cores the workload engages.
struct Engagement {
  uint32_t qps = 0;       // QPs feeding the requester engine; 0 = all PUs engaged
  uint32_t qps_rx = 0;    // QPs feeding the responder engine; 0 = all PUs engaged
  uint32_t cores = 0;     // 0 = all cores
  double outstanding = 0; // ops in flight (Little's law bound), 0 = unbounded
  double rtt_us = 0;      // latency of one op for the window bound
  // Host engine only: the peers' posting threads (0 = as many as the host's cores), and the
  // busy-polling threads of every process on the host (0 = no more than its cores).
  uint32_t peer_threads = 0;
  uint32_t host_threads = 0;
  // Host engine only: client threads each waiting for a server thread's answers (ECHO, the
  // sequencers, the key-value systems); 0 = streams that need no answer to go on.
  uint32_t round_trip_pairs = 0;
  // Inbound: the rate the requesting peers can post all together (their own NIC, PCIe and
  // cores), with what limits them; 0 = enough requesters (no limit).
  double requesters_mops = 0;
  std::string requesters_label;
};

Prediction Solve(const Demand& d, const Profile& prof, const WireParams& wire, const Engagement& e);
// Host engine: the threads that busy-poll on the host share its cores. `own`: the measured
// node's threads poll (senders, servers, receivers of SENDs); `peers`: the peers' threads do;
// `round_trips`: each peer thread waits for the answers of the server thread it talks to.
void ShareHost(Engagement& e, const Point& pt, bool own, bool peers, bool round_trips = false);

// Building blocks for composing an operation out of verbs at the measured node.
WrShape Shape(const VerbSpec& v, uint64_t payload_B, uint32_t sge = 1, bool inline_recv = false);
// The node posts `wr` (batched `batch` per doorbell) and its NIC carries it out.
// One CQE per `cq_mod` WRs when `wr.signaled`, none otherwise. `doorbell`: post by Doorbell
// even a batch of one (the NIC DMA-reads the WQE) instead of WQE-by-MMIO.
Demand Outbound(const WrShape& wr, uint32_t batch, uint32_t cq_mod, const Profile& prof, const WireParams& wire,
                bool doorbell = false);
// The node's NIC serves `wr` arriving from a peer (no host CPU involved except RECVs). On a
// host engine the peer's thread carries it out, posted `peer_batch` WRs per post.
Demand Inbound(const WrShape& wr, const Profile& prof, const WireParams& wire, uint32_t peer_batch = 1);
// The NIC's QP-context cache misses with `qps` connected QPs used in random order; each
// context load serves `burst` consecutive operations of its QP.
Demand QpCacheMisses(uint32_t qps, const Profile& prof, bool rx, double burst = 1);
// Address-translation misses of a responder serving `value_B`-byte values chosen by key
// (pt's distribution, keys, placement): one translation-entry DMA read each, waited for.
Demand TranslationMisses(const Point& pt, uint32_t value_B, const Profile& prof, double* miss_rate = nullptr);
// Host engine: the time a WR's `bytes` of remote data add when they come from memory: a random
// key's item of the point's `keys` (its distribution and placement) misses the host's cache
// (cpu.cache_B) as often as the items outgrow it; 0 where every item stays cached.
double ColdDataNs(const Point& pt, uint32_t bytes, const Profile& prof);

// Host engine only (empty otherwise: a device NIC's peers are assumed numerous): the peers'
// threads' work beside the WRs they post here: `completions` they poll (a READ's or an
// atomic's, each signaled one) and `requests` of a key-value client's own work
// (cpu.client_request_ns).
Demand PeerWork(const Profile& prof, double completions, double requests = 0);
// Host engine only: a client's own work per answer beside its verbs, `answer_ns` (a sequencer's
// cpu.sequencer_client_answer_ns, ECHO's cpu.echo_client_answer_ns), the peers' time.
Demand ClientAnswerWork(const Profile& prof, double answer_ns);
// Host engine only: a poller loads a line its peer's core just wrote (a request or answer
// delivered by WRITE): `own` at this node (cpu_ns), else at the peer (peer_ns).
Demand LineFetch(const Profile& prof, bool own);

// Unloaded latency of one verb, requester post to requester completion (READ, signaled
// WRITE/SEND) or to the responder's poll seeing the data (`one_way`).
// `doorbell`: the WR was posted by doorbell, so the NIC DMA-reads its WQE first (guide16
// Sec. 4.2.2: batching's latency cost).
double VerbLatencyUs(const WrShape& wr, const Profile& prof, const WireParams& wire, bool one_way,
                     bool doorbell = false);

const WireParams& WireFor(const Point& pt, const Profile& prof);

// Verb-level modes: lat, tput, echo, atomics, sgbatch.
Prediction PredictVerb(const Point& pt, const Profile& prof);
// The atomics mode's prediction with `client_work` added to every operation's requester (the
// sequencer's atomics design: its clients' work per answer).
Prediction PredictAtomics(const Point& pt, const Profile& prof, const Demand& client_work);
// Sequencers (guide16 Sec. 4.3, Table 3) and key-value systems (herd14, guide16), composed
// from the verbs each issues at the server (README "Throughput"); never fitted to their results.
Prediction PredictSequencer(const Point& pt, const Profile& prof);
Prediction PredictKv(const Point& pt, const Profile& prof);
// Everything: dispatches to verb modes, sequencers and key-value systems.
Prediction Predict(const Point& pt, const Profile& prof);

}  // namespace rdmalab::model
