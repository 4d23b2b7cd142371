#include "model/params.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace rdmalab::model {
namespace {

using nlohmann::json;

constexpr double kMaxCount = 1ll << 50;  // integer ranges beyond any run, exact in a double
constexpr uint64_t kBenchDefaultKeys = 4 << 20;  // rdmalab-bench --keys 0

// Rows' apply functions: the value is already checked against the row's type, range, choices.
#define SET(field, T) [](PointDraft& d, const json& v) { d.p.field = static_cast<T>(v.get<int64_t>()); }
#define SET_NUM(field) [](PointDraft& d, const json& v) { d.p.field = v.get<double>(); }
#define SET_BOOL(field) [](PointDraft& d, const json& v) { d.p.field = v.get<bool>(); }
#define SET_STR(field) [](PointDraft& d, const json& v) { d.p.field = v.get<std::string>(); }

using T = ParamType;
using E = Effect;

// The run-control parameters rdmalab-bench and rdmalab-kv share (rdma/flags.h and their own
// tables): accepted by every mode a binary runs, none changes a rate or a latency.
const std::vector<std::string> kRunControl = {"iters", "duration", "warmup", "validate", "seed",
                                              "timeout", "cpus", "use_hugepages"};
// The model's own knobs for the modes that predict a rate.
const std::vector<std::string> kModelKnobs = {"link", "simulate", "sim_ops", "sim_exponential", "window_bound"};

std::vector<std::string> Cat(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// Levenshtein distance, for "nearest" suggestions.
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Up to three names close to `name` (by edit distance, or one containing the other), nearest first.
std::vector<std::string> Nearest(const std::string& name, const std::vector<std::string>& valid) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& v : valid) {
    size_t d = Distance(name, v);
    bool related = v.find(name) != std::string::npos || name.find(v) != std::string::npos;
    if (d <= std::max<size_t>(1, name.size() / 3) || related) scored.push_back({d, v});
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

std::string NearestText(const std::string& name, const std::vector<std::string>& valid) {
  std::vector<std::string> near = Nearest(name, valid);
  return near.empty() ? "" : "nearest: " + Join(near) + "; ";
}

std::string Range(const ParamDef& d) {
  auto fmt = [&](double x) {
    std::ostringstream o;
    if (d.type == T::kInteger) o << static_cast<long long>(x);
    else o << x;
    return o.str();
  };
  return fmt(d.min) + ".." + fmt(d.max);
}

const char* TypeName(ParamType t) {
  switch (t) {
    case T::kInteger: return "integer";
    case T::kNumber: return "number";
    case T::kBoolean: return "boolean";
    case T::kString: return "string";
  }
  return "?";
}

const char* EffectName(Effect e) {
  switch (e) {
    case E::kModeled: return "modeled";
    case E::kNone: return "none";
    case E::kNotModeled: return "not_modeled";
  }
  return "?";
}

std::string Where(const ParamDef& d) { return "params." + std::string(d.name); }

// The value as the row's type (strings of digits and "true"/"false" as the command line gives
// them), checked against its range or choices.
json Checked(const ParamDef& d, const json& v) {
  const std::string where = Where(d);
  switch (d.type) {
    case T::kInteger: {
      int64_t x = 0;
      bool ok = v.is_number_integer();
      if (ok) x = v.get<int64_t>();
      if (v.is_string()) {
        const std::string s = v.get<std::string>();
        char* end = nullptr;
        x = std::strtoll(s.c_str(), &end, 10);
        ok = !s.empty() && end && *end == '\0';
      }
      if (!ok) throw ModelError(where + " = " + v.dump() + " is not an integer (valid: " + Range(d) + ")");
      if (x < d.min || x > d.max)
        throw ModelError(where + " = " + std::to_string(x) + " is out of range (valid: " + Range(d) + ")");
      return x;
    }
    case T::kNumber: {
      if (!v.is_number()) throw ModelError(where + " = " + v.dump() + " is not a number (valid: " + Range(d) + ")");
      double x = v.get<double>();
      if (!(x >= d.min && x <= d.max))
        throw ModelError(where + " = " + v.dump() + " is out of range (valid: " + Range(d) + ")");
      return x;
    }
    case T::kBoolean:
      if (v.is_boolean()) return v;
      if (v == "true" || v == "false") return v == "true";
      throw ModelError(where + " = " + v.dump() + " is not valid (valid: true, false)");
    case T::kString: {
      std::vector<std::string> items;
      if (d.list && v.is_array()) {
        for (const auto& e : v) {
          if (!e.is_string()) throw ModelError(where + " = " + v.dump() + ": every item must be a string");
          items.push_back(e.get<std::string>());
        }
      } else if (v.is_string()) {
        const std::string s = v.get<std::string>();
        if (!d.list) items.push_back(s);
        else
          for (size_t a = 0; a <= s.size();) {
            size_t b = std::min(s.find_first_of(",+", a), s.size());
            if (b > a) items.push_back(s.substr(a, b - a));
            a = b + 1;
          }
      } else {
        throw ModelError(where + " = " + v.dump() + " must be a string" +
                         (d.choices.empty() ? "" : " (valid: " + Join(d.choices) + ")"));
      }
      for (const auto& item : items)
        if (!d.choices.empty() && std::find(d.choices.begin(), d.choices.end(), item) == d.choices.end())
          throw ModelError(where + " = '" + item + "' is not valid (" + NearestText(item, d.choices) +
                           "valid: " + Join(d.choices) + ")");
      if (d.list) return items;
      return items.front();
    }
  }
  return v;
}

std::vector<ParamDef> BuildParams() {
  const json kNull = nullptr;
  std::vector<ParamDef> t = {
      // --- verbs (rdmalab-bench) ---
      {"verb", T::kString, nullptr, 0, 0, {"read", "write", "write_inline", "send", "send_inline", "cas", "faa"},
       kNull, E::kModeled, "the verb (default write; atomics faa; sgbatch send); *_inline: the payload goes inline",
       [](PointDraft& d, const json& v) { d.verb = v.get<std::string>(); }},
      {"connection", T::kString, nullptr, 0, 0, {"RC", "UC", "UD", "DC"}, "RC", E::kModeled,
       "transport (echo: the request's)", [](PointDraft& d, const json& v) { d.connection = v.get<std::string>(); }},
      {"size", T::kInteger, "bytes", 0, 1 << 30, {}, 32, E::kModeled, "payload bytes per message",
       SET(size_B, int64_t)},
      {"direction", T::kString, nullptr, 0, 0, {"inbound", "outbound", "alltoall"}, "inbound", E::kModeled,
       "inbound (clients -> the measured server) | outbound | alltoall (roles.node nodes)", SET_STR(direction)},
      {"tx_depth", T::kInteger, "WRs", 1, 1 << 20, {}, kNull, E::kModeled,
       "outstanding WRs per QP (unset: unbounded; sequencer: a client's requests in flight, HERD's 4)",
       SET(tx_depth, uint32_t)},
      {"cq_mod", T::kInteger, "WRs", 1, 1 << 20, {}, 1, E::kModeled,
       "signal one WR in N (selective signaling; the sequencer's and HERD's responses: one in 64, guide16)",
       SET(cq_mod, uint32_t)},
      {"post_list", T::kInteger, "WRs", 1, 4096, {}, 1, E::kModeled,
       "WRs per post: 1 = WQE-by-MMIO, more = one doorbell and a DMA read of the batch", SET(post_list, uint32_t)},
      {"qp", T::kInteger, "QPs", 1, 1 << 24, {}, kNull, E::kModeled,
       "QPs at the measured NIC (unset: enough to engage every PU)", SET(qp, uint32_t)},
      {"threads", T::kInteger, "threads", 1, 4096, {}, kNull, E::kModeled,
       "threads per process, one core each: the cores used at the measured host (unset: all); kv: rdmalab-kv's "
       "client threads per client process, which change only a host-engine profile's prediction (busy threads "
       "sharing the host's cores; the server's cores are `workers`)",
       [](PointDraft& d, const json& v) {
         if (d.p.mode != "kv") d.p.threads = static_cast<uint32_t>(v.get<int64_t>());
         else d.client_threads = static_cast<uint32_t>(v.get<int64_t>());
       }},
      {"inline_size", T::kInteger, "bytes", 0, 1 << 16, {}, kNull, E::kModeled,
       "payloads up to this size go inline (unset: none by size; kv: HERD's responses, unset 192 B; the "
       "sequencer's 8-byte responses are always inline)",
       [](PointDraft& d, const json& v) { d.inline_size = d.p.inline_size_B = v.get<int64_t>(); }},
      {"sge", T::kInteger, nullptr, 1, 1024, {}, 1, E::kModeled, "SGEs per WR (payload split evenly)",
       SET(sge, uint32_t)},
      {"header_only", T::kBoolean, nullptr, 0, 0, {}, false, E::kModeled,
       "SENDs and WRITEs carry no payload, only a 4-byte immediate",
       [](PointDraft& d, const json& v) { d.header_only = v.get<bool>(); }},
      {"inline_recv", T::kBoolean, nullptr, 0, 0, {}, false, E::kModeled,
       "model only: small payloads land in the CQE (inline-receive)", SET_BOOL(inline_recv)},
      {"lat_method", T::kString, nullptr, 0, 0, {"completion", "pingpong"}, "completion", E::kModeled,
       "completion: a signaled op until its CQE | pingpong: half a round trip",
       [](PointDraft& d, const json& v) { d.p.lat_pingpong = v == "pingpong"; }},
      {"events", T::kBoolean, nullptr, 0, 0, {}, false, E::kNotModeled,
       "lat: sleep on a completion channel; true is not modeled (interrupt and wake-up costs)", SET_BOOL(events)},
      {"stack", T::kString, nullptr, 0, 0, {"rdma", "udp", "tcp", "raw"}, "rdma", E::kNotModeled,
       "rdma (verbs) | udp | tcp (kernel sockets) | raw (raw-packet QP): only rdma is modeled", SET_STR(stack)},
      {"io_batch", T::kInteger, nullptr, 1, 1024, {}, 1, E::kNone,
       "datagrams per sendmmsg or post list of stack udp|raw, which the model does not cover", nullptr},
      {"numa", T::kString, nullptr, 0, 0, {"device", "near", "far"}, "device", E::kNotModeled,
       "source buffers on the device's NUMA node (device, near) or another (far: not modeled, one memory)",
       [](PointDraft& d, const json& v) { d.p.numa = v == "far" ? "far" : "near"; }},
      {"page_offset", T::kInteger, "bytes", -1, 4095, {}, -1, E::kNotModeled,
       "each source buffer starts this far into its own page (-1: packed); > 0 is not modeled (DMAs split at "
       "page boundaries)",
       [](PointDraft& d, const json& v) { d.p.page_offset_B = static_cast<uint32_t>(std::max<int64_t>(0, v.get<int64_t>())); }},
      {"buffers", T::kInteger, nullptr, 0, 1 << 20, {}, 0, E::kNotModeled,
       "source buffers cycled over (0: one per slot of the window); > 1 is not modeled (no cache of buffer "
       "contents)",
       [](PointDraft& d, const json& v) { d.p.buffers = static_cast<uint32_t>(std::max<int64_t>(1, v.get<int64_t>())); }},
      {"distribution", T::kString, nullptr, 0, 0, {"none", "uniform", "zipf"}, kNull, E::kModeled,
       "key popularity (tput: READs address values by key unless none, the default; kv: default uniform)",
       [](PointDraft& d, const json& v) {
         d.unkeyed = v == "none";
         d.p.keyed = !d.unkeyed;
         d.p.distribution = v == "zipf" ? "zipf" : "uniform";
       }},
      {"placement", T::kString, nullptr, 0, 0, {"clustered", "unclustered"}, "clustered", E::kModeled,
       "values in popularity order (clustered) or a random page each (unclustered)",
       [](PointDraft& d, const json& v) {
         d.p.placement = v.get<std::string>();
         d.p.keyed = !d.unkeyed;
       }},
      {"keys", T::kInteger, "keys", 0, kMaxCount, {}, 8 << 20, E::kModeled,
       "distinct keys (0: rdmalab-bench's default, 4 Mi)",
       [](PointDraft& d, const json& v) {
         d.p.keys = v == 0 ? kBenchDefaultKeys : static_cast<uint64_t>(v.get<int64_t>());
         d.p.keyed = !d.unkeyed;
       }},
      {"zipf_theta", T::kNumber, nullptr, 0, 0.9999, {}, 0.99, E::kModeled, "Zipf skew (YCSB: 0.99)",
       SET_NUM(zipf_theta)},
      // --- echo ---
      {"request", T::kString, nullptr, 0, 0, {"write", "send"}, "write", E::kModeled, "echo: request verb",
       [](PointDraft& d, const json& v) { d.request = v.get<std::string>(); }},
      {"response", T::kString, nullptr, 0, 0, {"write", "send"}, "send", E::kModeled, "echo: response verb",
       [](PointDraft& d, const json& v) { d.response = v.get<std::string>(); }},
      {"response_connection", T::kString, nullptr, 0, 0, {"RC", "UC", "UD", "DC"}, kNull, E::kModeled,
       "echo: response transport (unset: UD for SEND responses, else the request's)",
       [](PointDraft& d, const json& v) { d.response_connection = v.get<std::string>(); }},
      {"optimizations", T::kString, nullptr, 0, 0, {"none", "inline", "unsignaled", "uc"}, "none", E::kModeled,
       "model only, echo: herd14's optimizations added to the point (inline, unsignaled responses, UC for RC)",
       [](PointDraft& d, const json& v) { d.optimizations = v.get<std::vector<std::string>>(); }, true},
      {"accesses", T::kInteger, nullptr, 0, 64, {}, 0, E::kModeled, "echo server: random memory accesses per request",
       SET(accesses, uint32_t)},
      {"prefetch", T::kBoolean, nullptr, 0, 0, {}, false, E::kModeled,
       "echo server: prefetch the accesses of the next requests", SET_BOOL(prefetch)},
      {"table_mb", T::kInteger, "MiB", 1, 1 << 16, {}, 64, E::kNone,
       "echo server: the randomly accessed table; the model charges every access as a DRAM miss whatever its size",
       nullptr},
      // --- atomics ---
      {"counters", T::kInteger, nullptr, 1, kMaxCount, {}, 1, E::kModeled, "atomics: counters hit at random (Z)",
       SET(counters, uint64_t)},
      {"counter_stride", T::kInteger, "bytes", 8, 1 << 20, {}, 8, E::kNotModeled,
       "atomics: bytes between counters; other than 8 is not modeled (lock buckets by address bits)",
       SET(counter_stride_B, uint32_t)},
      // --- sequencer ---
      {"design", T::kString, nullptr, 0, 0, {"herd-rpc", "herd-rpc-batch", "herd-rpc-mq", "spec-s0", "atomics"},
       "herd-rpc", E::kModeled,
       "sequencer: HERD-RPC, +doorbell batching, +multi-queue (3 response QPs per core), Spec-S0, or FAA on one "
       "counter", SET_STR(design)},
      {"count", T::kInteger, nullptr, 1, kMaxCount, {}, 1000000, E::kNone,
       "sequencer: integers handed out in total (the run's length)", nullptr},
      {"batch", T::kInteger, "WRs", 1, 4096, {}, kNull, E::kModeled,
       "sequencer: responses per doorbell (1: one post each; unset: the requests a worker finds in a sweep)",
       [](PointDraft& d, const json& v) {
         d.p.post_list = static_cast<uint32_t>(v.get<int64_t>());
         d.p.batch_given = true;
       }},
      // --- key-value systems (rdmalab-kv) ---
      {"system", T::kString, nullptr, 0, 0, {}, "herd", E::kNotModeled,
       "kv: the key-value system (see systems); memcached and redis (kernel TCP) are not modeled", SET_STR(system)},
      {"put_fraction", T::kNumber, nullptr, 0, 1, {}, 0.05, E::kModeled, "kv: fraction of operations that are PUTs",
       SET_NUM(put_fraction)},
      {"get_fraction", T::kNumber, nullptr, 0, 1, {}, kNull, E::kModeled,
       "kv: fraction of operations that are GETs (instead of put_fraction)",
       [](PointDraft& d, const json& v) { d.p.put_fraction = 1 - v.get<double>(); }},
      {"key_size", T::kInteger, "bytes", 1, 1024, {}, 16, E::kModeled, "kv: key bytes", SET(key_B, uint32_t)},
      {"value_size", T::kInteger, "bytes", 0, 1 << 20, {}, 32, E::kModeled, "kv: value bytes", SET(value_B, uint32_t)},
      {"window", T::kInteger, nullptr, 1, 1 << 16, {}, 4, E::kModeled, "kv: requests in flight per client",
       SET(window, uint32_t)},
      {"clients", T::kInteger, "clients", 1, 1 << 20, {}, 1, E::kModeled,
       "kv: clients per client process; clients in all = roles.client x clients (no roles and no clients: 51, "
       "herd14 Sec. 5)",
       [](PointDraft& d, const json& v) { d.clients_per_process = v.get<int64_t>(); }},
      {"workers", T::kInteger, "threads", 1, 4096, {}, kNull, E::kModeled,
       "kv: server worker threads, one core each (HERD: and one key partition; unset: all cores)", SET(threads, uint32_t)},
      {"core", T::kInteger, nullptr, -1, 4095, {}, -1, E::kModeled,
       "kv (HERD): the throughput of worker K alone (herd14 Fig. 14); -1: all", SET(core, int32_t)},
      {"batching", T::kBoolean, nullptr, 0, 0, {}, false, E::kModeled,
       "kv (HERD): answer a sweep's requests with one doorbell (guide16)", SET_BOOL(batching)},
      {"queues", T::kInteger, "QPs", 1, 64, {}, 1, E::kModeled,
       "kv (HERD): response UD QPs per worker (guide16 multi-queue: 3)", SET(queues, uint32_t)},
      {"lock_placement", T::kString, nullptr, 0, 0, {"spread", "same-bits"}, "spread", E::kModeled,
       "kv (DrTM): lock words 8 B apart (spread over the NIC's lock buckets) or sharing their 12 low address bits "
       "(one bucket)",
       [](PointDraft& d, const json& v) { d.p.same_bits_locks = v == "same-bits"; }},
      {"store", T::kString, nullptr, 0, 0, {"emulated", "full"}, "emulated", E::kNotModeled,
       "kv (Pilaf, FaRM): herd14's emulated designs; full (checksummed tables, probing) is not modeled",
       SET_STR(store)},
      {"corrupt", T::kInteger, "keys", 0, 1 << 30, {}, 0, E::kNotModeled,
       "kv, full stores: keys corrupted on purpose to test checksums; > 0 is not modeled", SET(corrupt, uint64_t)},
      {"retry_ms", T::kNumber, "ms", 0.01, 1e6, {}, kNull, E::kNone,
       "kv: resend a request unanswered this long; the model predicts a lossless run", nullptr},
      {"log_mb", T::kInteger, "MiB", 1, 1 << 16, {}, kNull, E::kNone,
       "kv (HERD): cache log per worker; the model charges MICA lookups per operation whatever its size", nullptr},
      {"index_log2", T::kInteger, nullptr, 0, 30, {}, 0, E::kNone,
       "kv (HERD): log2 of index buckets per worker; the model charges MICA lookups per operation", nullptr},
      {"preload", T::kBoolean, nullptr, 0, 0, {}, false, E::kNone,
       "kv: load every key before the run; the model assumes GETs hit", nullptr},
      {"farm_load_factor", T::kNumber, nullptr, 0.05, 4, {}, kNull, E::kNone,
       "kv (FaRM, store full): keys per home bucket; the full store is not modeled", nullptr},
      {"farm_buffer_slots", T::kInteger, nullptr, 0, 1 << 16, {}, 0, E::kNone,
       "kv (FaRM): slots of a client's PUT buffer; the model charges each PUT's WRITE alone", nullptr},
      {"lock_retries", T::kInteger, nullptr, 0, 1 << 30, {}, kNull, E::kNone,
       "kv (DrTM): lock CASes retried before a PUT is refused; the model assumes no contention on a lock word",
       nullptr},
      {"hydradb_miss_path", T::kBoolean, nullptr, 0, 0, {}, false, E::kNone,
       "kv (HydraDB): a client's first GET of a key asks the server; the model predicts the steady state",
       nullptr},
      {"protocol", T::kString, nullptr, 0, 0, {"text", "binary"}, "text", E::kNone,
       "kv (memcached): wire protocol; memcached is not modeled", nullptr},
      {"pipeline", T::kBoolean, nullptr, 0, 0, {}, false, E::kNone,
       "kv (memcached, redis): pipelined TCP connection; TCP systems are not modeled", nullptr},
      {"server_bin", T::kString, nullptr, 0, 0, {}, kNull, E::kNone,
       "kv (memcached, redis): the server program; TCP systems are not modeled", nullptr},
      {"bind", T::kString, nullptr, 0, 0, {}, kNull, E::kNone,
       "kv (memcached, redis): listening address; TCP systems are not modeled", nullptr},
      {"tcp_port", T::kInteger, nullptr, 0, 65535, {}, 0, E::kNone,
       "kv (memcached, redis): server port; TCP systems are not modeled", nullptr},
      // --- run control (rdmalab-bench and rdmalab-kv) ---
      {"iters", T::kInteger, "ops", 1, kMaxCount, {}, kNull, E::kNone,
       "operations per thread or client: the run's length; the model predicts the steady rate", nullptr},
      {"duration", T::kNumber, "s", 0, 1e7, {}, kNull, E::kNone, "measure this long: the run's length", nullptr},
      {"warmup", T::kNumber, "s", 0, 1e7, {}, 0.2, E::kNone, "warm-up before measuring: the model is warm", nullptr},
      {"validate", T::kBoolean, nullptr, 0, 0, {}, false, E::kNone,
       "check the bytes moved; the model assumes correct transfers", nullptr},
      {"seed", T::kInteger, nullptr, 0, 1ll << 62, {}, 1, E::kNone,
       "random seed; the model uses the distributions, not draws", nullptr},
      {"timeout", T::kNumber, "s", 0.1, 1e7, {}, 60, E::kNone, "whole-run deadline", nullptr, false, true},
      {"cpus", T::kString, nullptr, 0, 0, {}, kNull, E::kNone,
       "CPUs for the threads; the model's cores are alike and near the NIC", nullptr},
      {"use_hugepages", T::kBoolean, nullptr, 0, 0, {}, false, E::kNone,
       "hugepages for registered memory; the model's translation cache is charged only by key-addressed points",
       nullptr},
      {"rdma_cm", T::kBoolean, nullptr, 0, 0, {}, false, E::kNone,
       "connect QPs through rdma_cm: connection setup, before measuring", nullptr},
      {"all", T::kBoolean, nullptr, 0, 0, {}, false, E::kNotModeled,
       "sweep sizes 2..2^23 in one run; true is not modeled (a point has one size: sweep size instead)",
       SET_BOOL(all_sizes)},
      // --- the model's own ---
      {"link", T::kString, nullptr, 0, 0, {"ib", "roce"}, "ib", E::kModeled,
       "model only: wire headers of InfiniBand or RoCE (profiles with a roce block)", SET_STR(link)},
      {"window_bound", T::kBoolean, nullptr, 0, 0, {}, true, E::kModeled,
       "model only: Little's law (clients x window outstanding over the unloaded latency) bounds the rate; "
       "false assumes enough clients (the papers' scale)", SET_BOOL(window_bound)},
      {"simulate", T::kBoolean, nullptr, 0, 0, {}, false, E::kModeled,
       "model only: run the discrete-event simulator (latency percentiles, cache effects)", SET_BOOL(simulate)},
      {"sim_ops", T::kInteger, "ops", 1000, 1ll << 34, {}, 1000000, E::kModeled,
       "model only: operations simulated", SET(sim_ops, uint64_t)},
      {"sim_exponential", T::kBoolean, nullptr, 0, 0, {}, false, E::kModeled,
       "model only: exponential instead of deterministic service times in the simulator", SET_BOOL(sim_exponential)},
      // --- pcie: guide16's formula tables ---
      {"formula", T::kString, nullptr, 0, 0, {"transfer", "wqe_header", "wqe_batch"}, "transfer", E::kModeled,
       "pcie: transfer (bytes of an x-byte transfer) | wqe_header (WQE header sizes) | wqe_batch (N WQEs)",
       SET_STR(formula)},
      {"method", T::kString, nullptr, 0, 0, {"dma", "mmio", "doorbell"}, "dma", E::kModeled,
       "pcie: transfer by dma | mmio; wqe_batch by mmio | doorbell", SET_STR(method)},
      {"wqe_type", T::kString, nullptr, 0, 0, {"rc_uc", "ud", "recv"}, "rc_uc", E::kModeled,
       "pcie, wqe_header: the WQE's kind", SET_STR(wqe_type)},
      {"wqes", T::kInteger, "WRs", 1, 1 << 16, {}, 10, E::kModeled, "pcie, wqe_batch: WQEs in the batch (N)",
       SET(wqes, uint32_t)},
      {"wqe_size", T::kInteger, "bytes", 1, 1 << 16, {}, 65, E::kModeled, "pcie, wqe_batch: bytes per WQE (D)",
       SET(wqe_B, uint32_t)},
  };
  for (auto& row : t)
    if (std::string(row.name) == "system")
      for (const auto& s : Systems()) row.choices.push_back(s.name);
  return t;
}

Prediction PredictFormulaMode(const Point&, const Profile&) {
  throw ModelError("mode pcie evaluates a formula (bytes), not a rate: use `predict`, which prints its value");
}

std::vector<ModeDef> BuildModes() {
  const std::vector<std::string> verb = {"verb", "connection", "size", "tx_depth", "cq_mod", "inline_size", "sge",
                                         "header_only"};
  const std::vector<std::string> many = {"direction", "post_list", "qp", "threads"};
  return {
      {"lat", "latency of one operation in flight (rdmalab-bench lat)",
       Cat({verb, {"inline_recv", "lat_method", "events", "stack", "io_batch", "all", "rdma_cm"}, kRunControl,
            {"link", "simulate", "sim_ops", "sim_exponential"}}),
       PredictVerb},
      {"tput", "throughput of one verb at the measured node (rdmalab-bench tput)",
       Cat({verb, many,
            {"inline_recv", "numa", "page_offset", "buffers", "distribution", "placement", "keys", "zipf_theta",
             "stack", "io_batch", "all", "rdma_cm"},
            kRunControl, kModelKnobs}),
       PredictVerb},
      {"echo", "ECHO requests answered by the server: request and response verbs (rdmalab-bench echo)",
       Cat({{"connection", "size", "tx_depth", "cq_mod", "inline_size", "sge", "header_only"}, many,
            {"request", "response", "response_connection", "optimizations", "accesses", "prefetch", "table_mb",
             "all", "rdma_cm"},
            kRunControl, kModelKnobs}),
       PredictVerb},
      {"atomics", "atomics throughput over Z counters (rdmalab-bench atomics)",
       Cat({{"verb", "connection", "tx_depth", "cq_mod", "post_list", "qp", "threads", "counters", "counter_stride",
             "rdma_cm"},
            kRunControl, kModelKnobs}),
       PredictVerb},
      {"sgbatch", "SENDs of several SGEs per WR (rdmalab-bench sgbatch)",
       Cat({verb, many, {"all", "rdma_cm"}, kRunControl, kModelKnobs}), PredictVerb},
      {"sequencer", "integers handed out by HERD-RPC (+batching, +multi-queue), Spec-S0 or atomics (rdmalab-bench "
                    "sequencer)",
       Cat({{"design", "count", "batch", "threads", "tx_depth", "cq_mod", "inline_size", "rdma_cm"}, kRunControl,
            kModelKnobs}),
       PredictSequencer},
      {"kv", "a key-value system's throughput and latency at its server (rdmalab-kv; see systems)",
       Cat({{"system", "put_fraction", "get_fraction", "key_size", "value_size", "window", "clients", "threads",
             "workers", "core", "distribution", "zipf_theta", "keys", "cq_mod", "inline_size", "batching", "queues",
             "lock_placement", "store", "corrupt", "retry_ms", "log_mb", "index_log2", "preload",
             "farm_load_factor", "farm_buffer_slots", "lock_retries", "hydradb_miss_path", "protocol", "pipeline",
             "server_bin", "bind", "tcp_port"},
            kRunControl, kModelKnobs}),
       PredictKv},
      {"pcie", "guide16's PCIe formula tables (Fig. 2b, Table 1, Appendix A): bytes, not a rate (model only)",
       {"formula", "method", "wqe_type", "wqes", "wqe_size", "size"}, PredictFormulaMode},
  };
}

}  // namespace

const std::vector<SystemDef>& Systems() {
  // Every system reads the workload (rdmalab-kv's generator); the rows list what it reads
  // beyond it, as rdmalab-kv's system table does.
  static const std::vector<std::string> workload = {"put_fraction", "get_fraction", "key_size", "value_size", "window",
                                                    "clients", "keys", "distribution", "zipf_theta"};
  auto with = [&](std::vector<std::string> own) { return Cat({workload, own}); };
  static const std::vector<SystemDef> systems = {
      {"herd", "HERD: requests as UC WRITEs, responses as UD SENDs, MICA at the server (herd14)",
       with({"workers", "core", "cq_mod", "inline_size", "batching", "queues", "log_mb", "index_log2", "preload"})},
      {"pilaf", "Pilaf-em-OPT: GETs by READs of a 3-1 cuckoo table, PUTs as UC SENDs to the server",
       with({"workers", "cq_mod", "store", "corrupt"})},
      {"farm", "FaRM-em: GETs by one READ of a hopscotch neighbourhood (H = 6) of items",
       with({"workers", "cq_mod", "preload", "store", "corrupt", "farm_load_factor", "farm_buffer_slots"})},
      {"farm-var", "FaRM-em-VAR: as farm, with pointers to variable-length values (a second READ)",
       with({"workers", "cq_mod", "preload", "store", "corrupt", "farm_load_factor", "farm_buffer_slots"})},
      {"drtm", "DrTM-KV-em: GETs by one READ, PUTs by two atomics on a lock word (guide16 Fig. 10)",
       with({"workers", "cq_mod", "lock_placement", "lock_retries"})},
      {"drtm-write", "DrTM-KV-em whose PUTs also WRITE the value",
       with({"workers", "cq_mod", "lock_placement", "lock_retries"})},
      {"hydradb", "HydraDB-em: GETs by one READ of value and lease, PUTs as RC WRITE request and answer",
       with({"workers", "cq_mod", "hydradb_miss_path"})},
      {"read-based", "model only: the bound guide16 Fig. 9 draws for a READ-based store (2 READs per GET)",
       with({"workers"})},
      {"memcached", "memcached over kernel TCP (not modeled)",
       with({"workers", "preload", "protocol", "pipeline", "server_bin", "bind", "tcp_port"})},
      {"redis", "Redis over kernel TCP (not modeled)",
       with({"workers", "preload", "pipeline", "server_bin", "bind", "tcp_port"})},
  };
  return systems;
}

const std::vector<ParamDef>& Params() {
  static const std::vector<ParamDef> params = BuildParams();
  return params;
}

const std::vector<ModeDef>& Modes() {
  static const std::vector<ModeDef> modes = BuildModes();
  return modes;
}

const ParamDef* FindParam(const std::string& name) {
  for (const auto& p : Params())
    if (name == p.name) return &p;
  return nullptr;
}

std::vector<std::string> ModeNames() {
  std::vector<std::string> out;
  for (const auto& m : Modes()) out.push_back(m.name);
  return out;
}

std::vector<std::string> SystemNames() {
  std::vector<std::string> out;
  for (const auto& s : Systems()) out.push_back(s.name);
  return out;
}

const std::vector<std::string>& Designs() { return FindParam("design")->choices; }

const ModeDef& FindMode(const std::string& name) {
  for (const auto& m : Modes())
    if (name == m.name) return m;
  throw ModelError("mode = '" + name + "' is not valid (" + NearestText(name, ModeNames()) +
                   "valid: " + Join(ModeNames()) + ")");
}

bool ModeTakes(const ModeDef& mode, const std::string& param) {
  return std::find(mode.params.begin(), mode.params.end(), param) != mode.params.end();
}

void ApplyParam(PointDraft& draft, const ModeDef& mode, const std::string& name, const json& value) {
  const ParamDef* def = FindParam(name);
  if (!def)
    throw ModelError("unknown parameter '" + name + "' for mode " + mode.name + " (" + NearestText(name, mode.params) +
                     "valid for " + mode.name + ": " + Join(mode.params) + ")");
  if (!ModeTakes(mode, name)) {
    std::vector<std::string> takers;
    for (const auto& m : Modes())
      if (ModeTakes(m, name)) takers.push_back(m.name);
    throw ModelError("parameter '" + name + "' is not taken by mode " + mode.name + " (modes that take it: " +
                     Join(takers) + "; " + NearestText(name, mode.params) + "valid for " + mode.name + ": " +
                     Join(mode.params) + ")");
  }
  json v = Checked(*def, value);
  if (def->apply) def->apply(draft, v);
}

nlohmann::ordered_json DescribeJson() {
  using json = nlohmann::ordered_json;
  json params = json::array();
  for (const auto& p : Params()) {
    json row = {{"name", p.name}, {"type", TypeName(p.type)}, {"list", p.list},
                {"unit", p.unit ? json(p.unit) : json(nullptr)}};
    if (p.type == T::kInteger) row["min"] = static_cast<int64_t>(p.min), row["max"] = static_cast<int64_t>(p.max);
    if (p.type == T::kNumber) row["min"] = p.min, row["max"] = p.max;
    if (!p.choices.empty()) row["choices"] = p.choices;
    row["default"] = json::parse(p.default_value.dump());
    row["scope"] = p.coordinator ? "coordinator" : "experiment";
    row["effect"] = EffectName(p.effect);
    row["help"] = p.help;
    params.push_back(row);
  }
  json modes = json::array();
  for (const auto& m : Modes()) modes.push_back({{"name", m.name}, {"summary", m.summary}, {"params", m.params}});
  json systems = json::array();
  for (const auto& s : Systems()) systems.push_back({{"name", s.name}, {"summary", s.summary}, {"params", s.params}});
  json doc = json::object();
  doc["schema_version"] = "rdmalab-describe/1";
  doc["program"] = "rdmalab-model";
  doc["backends"] = json::array({"model"});
  doc["params"] = params;
  doc["modes"] = modes;
  doc["systems"] = systems;
  return doc;
}

std::string ParamsHelp() {
  std::ostringstream o;
  for (const auto& p : Params()) {
    std::string kind = TypeName(p.type);
    if (!p.choices.empty()) kind = Join(p.choices);
    if (p.list) kind = "list of " + kind;
    if (p.type == T::kInteger || p.type == T::kNumber) kind += " " + Range(p);
    if (p.unit) kind += " " + std::string(p.unit);
    std::string modes;
    for (const auto& m : Modes())
      if (ModeTakes(m, p.name)) modes += (modes.empty() ? "" : ",") + std::string(m.name);
    o << "  --" << p.name << " (" << kind << "; " << EffectName(p.effect) << "; " << modes << ")\n      " << p.help
      << "\n";
  }
  return o.str();
}

}  // namespace rdmalab::model
