// A NIC + host profile: every number the model uses, each with the source it came from.
// Loaded from YAML (model/profiles/*.yaml) with strict validation: an unknown field, a
// missing source or a value out of range is an error naming the field and what is valid.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/cost.h"

namespace rdmalab::model {

struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "a, b, c": the valid names a ModelError lists.
std::string Join(const std::vector<std::string>& names);

// NIC processing: aggregate service time per operation with every processing unit (PU)
// busy, split into the requester ("tx") and responder ("rx") engines (herd14: an ECHO
// costs an inbound WRITE and an outbound SEND, yet 20 M ECHOs/s > 1/(1/35 + 1/30)).
struct NicTimes {
  double send_ns = 10;             // outbound SEND (WQE with data)
  double send_header_only_ns = 10; // outbound zero-byte SEND with immediate
  double write_ns = 10;            // outbound WRITE
  double read_ns = 10;             // outbound READ (requester)
  double atomic_ns = 10;           // outbound atomic (requester)
  double recv_ns = 10;             // inbound SEND into a RECV
  double recv_header_only_ns = 10;
  double recv_inline_ns = 10;      // inbound SEND with inline-receive (payload in the CQE)
  double write_in_ns = 10;
  double read_in_ns = 10;          // inbound READ (responder)
  double atomic_in_ns = 10;        // inbound atomic, when not serialized by a lock bucket
  double dct_extra_ns = 0;         // extra per inbound op on the DC transport
};

struct NicParams {
  NicTimes t;
  uint32_t pus = 8;                 // processing units; one QP engages at most one
  double atomic_lock_hold_ns = 400; // one lock bucket held for a PCIe read-modify-write
  uint32_t atomic_lock_buckets = 1; // 1 = all atomics serialize; CIB: 4096 (12 low address bits)
  uint32_t qp_cache_entries = 256;  // QP contexts held on the NIC
  // NIC time (aggregate over PUs, like NicTimes) per QP-context load. A context stays
  // resident while its QP's queued operations are served, so a responder loads it once per
  // burst of a client's window; a requester choosing a random peer per WR, once per WR.
  double qp_miss_ns = 0;            // responder
  double qp_miss_tx_ns = 0;         // requester (herd14 Sec. 3.3: it keeps the queued WRs' state)
  uint32_t qp_context_B = 256;      // bytes DMA-read on a QP-context miss
  uint32_t wqe_cache_entries = 256; // WQEs the NIC holds; beyond, it re-reads them
  uint32_t mtt_cache_entries = 4096;  // memory-translation entries (pages) the NIC caches
  uint32_t page_B = 4096;             // bytes one translation entry maps
  uint32_t mtt_entry_B = 8;           // bytes DMA-read on a translation miss
  bool inline_recv_ud = true;       // CIB: no inline-receive over UD (guide16 fn. 4)
  uint32_t max_sge = 32;
  double pio_mops = 0;              // host-wide WQE-by-MMIO posts/s limit (herd14 "PIO"); 0 = none
  // The engine is the posting CPU (softnic; README "A NIC whose engine is the posting CPU"):
  // the thread that posts a WR carries it out, payload moves as cross-core cache-line
  // transfers, and nothing crosses PCIe or a wire. NIC times are then per-WR times on that
  // thread, and every process shares the host's `cpu.cores`.
  bool host_engine = false;
  double line_ns = 0;               // host engine: time per 64 B line of payload moved
  double gather_ns = 0;             // host engine: a non-inline WR gathers its payload through its lkey
  // host engine: a WR whose remote data is not in the host's cache (cpu.cache_B): its first
  // line (the page walk and the memory round trip), and each further line of it
  double cold_access_ns = 0;
  double cold_line_ns = 0;
  // host engine: each scatter/gather element beyond a list's first, at either end: the sender's
  // gather list and the receiver's RECV scatter list (a key check and a copy of its own each)
  double sge_ns = 0;
  // host engine: a post of one WRITE of at most this many bytes takes the engine's fast path
  // (cpu.post_mmio_ns); a larger one runs the general engine as a list of one WR
  uint32_t fast_write_max_B = 1u << 30;
};

struct CpuParams {
  uint32_t cores = 8;
  double post_mmio_ns = 100;        // one post_send by WQE-by-MMIO (herd14: 200 ns)
  double post_doorbell_ns = 100;    // fixed part of a doorbell-batched post_send
  double post_per_wr_ns = 20;       // per WR in a linked list
  double poll_cq_ns = 30;           // one completion polled
  double poll_request_ns = 30;      // detecting a request in polled memory (HERD)
  double dram_ns = 90;              // one random DRAM access (herd14: 60-120 ns)
  double prefetched_access_ns = 10; // a random access whose miss a prefetch hid
  double shared_atomic_ns = 60;     // an atomic on a cache line other cores also update
  double kv_request_ns = 50;        // MICA-style request handling besides memory accesses
  // HERD's two-stage request pipeline (herd14 Sec. 4.1.1): a worker that finds no new request
  // for this long pushes a no-op to advance it; 0 = no such pipeline (its answer waits for nothing)
  double pipeline_flush_ns = 0;
  // Host engine: the cores the host gave the measured run, all processes together (other
  // work on a shared host takes the rest); 0 = all `cores`.
  double available_cores = 0;
  // Host engine: a key-value client thread's own work per request beside its verbs (the next
  // operation and key, the window's bookkeeping, the answer's accounting); run_all.py
  // calibrate measures it with kv's client loop on a transport that answers at once.
  double client_request_ns = 0;
  // Host engine: a sequencer client's own work per answer beside its verbs (the request's
  // window slot and time, the answer's latency sample, its bit in the exactly-once bitmap);
  // run_all.py calibrate measures it with rdmalab-bench's client code, the network taken out.
  double sequencer_client_answer_ns = 0;
  // Host engine: an ECHO client's own work per answer beside its verbs (the answer's latency
  // sample, the next request's number and time on the freed slot, the measured interval's
  // check); measured as sequencer_client_answer_ns is.
  double echo_client_answer_ns = 0;
  // Host engine: a poller's load of a line its peer's core just wrote (a WRITE-delivered
  // request or answer): one cross-core cache-line move, measured by a line ping-pong.
  double line_transfer_ns = 0;
  // Host engine: the cache a working set stays in. Data a WR moves from a random place in a
  // larger region (a random key's item in a table) mostly comes from memory (nic.cold_*_ns);
  // 0: every access hits, as the calibration suite's own buffers do.
  double cache_B = 0;
};

struct LatencyParams {
  double pcie_rtt_ns = 800;       // NIC DMA read round trip
  double nic_pipeline_ns = 300;   // NIC processing of a packet, each end
  double wire_ns = 200;           // propagation + switch
  double poll_ns = 50;            // CPU notices a completion / polled byte
};

struct Profile {
  std::string name;
  std::string description;
  PcieParams pcie;
  WqeLayout wqe;
  WireParams link;
  std::optional<WireParams> roce;  // the same NIC in Ethernet mode, if the profile has it
  NicParams nic;
  CpuParams cpu;
  LatencyParams lat;
  std::map<std::string, std::string> sources;  // field path -> where the value came from
  std::map<std::string, std::string> fits;     // field path -> calibration target ("what")
  std::vector<std::string> field_order;        // fields in file order (for calibrate)
  // A measured profile (`run_all.py calibrate`): where and when it was measured, and for each
  // fitted field the stored point files it was fitted to.
  std::map<std::string, std::string> provenance;
  std::map<std::string, std::vector<std::string>> points;
  // Mechanisms switched off (bits of Mechanism): `explain` predicts without each one to
  // show its share; never set by a profile file.
  uint32_t disabled = 0;
  bool Has(uint32_t mechanism) const { return (disabled & mechanism) == 0; }
};

// The NIC and host mechanisms behind the papers' curves, each switchable for `explain`.
enum Mechanism : uint32_t {
  kQpCache = 1,         // QP-context cache misses (herd14 Sec. 3.3, Fig. 6, 12)
  kPuPerQp = 2,         // one QP is served by one PU, which waits for its fetches (guide16 Sec. 3.3)
  kBatching = 4,        // responses per doorbell from the requests a sweep finds (guide16 Sec. 4.2); off: full batches
  kPayloadFetch = 8,    // a non-inline WR's payload is DMA-read before sending (nosql Sec. 4.6)
  kTranslation = 16,    // the NIC's address-translation cache (nosql Sec. 4.4)
  kRequesters = 32,     // an inbound rate is bounded by what its few requesters can post (nosql Sec. 4.6)
  kLockWait = 64,       // a PU waiting for an atomic's lock serves no other verb (guide16 Sec. 3.4)
  kPipelineFlush = 128, // HERD's answer leaves its worker's pipeline after later requests or a flush (herd14 Sec. 4.1.1, 5.4)
};
struct MechanismInfo {
  Mechanism bit;
  const char* name;
  const char* what;
};
inline constexpr MechanismInfo kMechanisms[] = {
    {kQpCache, "qp_cache", "QP-context cache misses"},
    {kPuPerQp, "pu_per_qp", "one PU per QP waits for its DMA fetches"},
    {kBatching, "batching", "sweeps finding fewer requests than a full batch"},
    {kPayloadFetch, "payload_fetch", "non-inline payload DMA-read before sending"},
    {kTranslation, "translation", "address-translation cache misses"},
    {kRequesters, "requesters", "the requesting peers' own NICs and cores"},
    {kLockWait, "lock_wait", "PUs stalled waiting for an atomic's lock"},
    {kPipelineFlush, "pipeline_flush", "answers held in a worker's request pipeline"},
};

// One settable field: dotted path, how to read/write it as a double, and the valid range.
struct FieldInfo {
  const char* path;
  const char* unit;
  double min, max;
  double (*get)(const Profile&);
  void (*set)(Profile&, double);
};
const std::vector<FieldInfo>& ProfileFields();
const FieldInfo* FindField(const std::string& path);
double GetField(const Profile& p, const std::string& path);
void SetField(Profile& p, const std::string& path, double value);

// Directory holding the built-in profiles (the source tree's model/profiles unless
// RDMALAB_MODEL_PROFILES is set).
std::string DefaultProfileDir();
std::vector<std::string> ListProfiles(const std::string& dir);
// `name_or_path`: a profile name in `dir` or a path to a .yaml file.
Profile LoadProfile(const std::string& name_or_path, const std::string& dir);
Profile LoadProfileFromString(const std::string& yaml_text, const std::string& origin,
                              const std::string& dir);

}  // namespace rdmalab::model
