// The client core every key-value system plugs its transport into: W requests in flight
// per client, many clients per thread (each with its own transport: QPs or connections),
// keys and operations from the workload, values checked against what was PUT, latency in
// the rdma/ histogram, retries after a timeout (same request id, so the server may see a
// request twice and the client ignores the second answer), and a deadline on everything.
//
// A transport is any type with (called from its client's thread only; no virtual call):
//   void Issue(const Request& request);   // first send; the window guarantees room
//   void Resend(const Request& request);  // the same request again after --retry-ms
//   static constexpr bool kLosesMessages;  // false: never resent, never counted as retried
//   int Poll(Response* out, int max);     // answers that arrived; values valid until the next Poll
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kv/workload/keyhash.h"
#include "kv/workload/workload.h"
#include "rdma/clock.h"
#include "rdma/histogram.h"
#include "rdma/result_row.h"

namespace rdmalab::kv {

// A request id carries its window slot in the low bits, so an answer finds its slot
// without a search, and a sequence number above them, so a late answer to an earlier
// request in the same slot is recognized as stale.
constexpr std::uint32_t kSlotBits = 8;
constexpr std::uint32_t kMaxWindow = 1u << kSlotBits;
inline std::uint32_t SlotOf(std::uint32_t id) { return id & (kMaxWindow - 1); }

struct Request {
  std::uint32_t id = 0;
  bool get = true;
  std::uint64_t key_index = 0;
  KeyHash key{};
  const std::uint8_t* value = nullptr;  // PUT
  std::uint32_t value_bytes = 0;        // PUT
};

struct Response {
  std::uint32_t id = 0;
  bool found = false;  // GET: hit; PUT: stored
  const std::uint8_t* value = nullptr;
  std::uint32_t value_bytes = 0;
};

struct ClientCounts {
  std::uint64_t completed = 0;  // measured: answered inside the measured interval
  std::uint64_t gets = 0, puts = 0, get_hits = 0, get_misses = 0, puts_refused = 0;
  std::uint64_t checked = 0, wrong_key = 0, corrupt = 0;
  std::uint64_t retries = 0, stale_answers = 0, unanswered = 0;
  std::uint64_t all_completed = 0;  // warm-up and drain included
  void Add(const ClientCounts& other);
};

struct ClientPlan {
  std::uint32_t window = 4;
  std::uint32_t value_bytes = 32;
  bool validate = false;
  std::uint64_t ops_per_client = 0;  // 0: run for measure_ns
  std::uint64_t warmup_ns = 0;
  std::uint64_t measure_ns = 0;
  std::uint64_t retry_ns = 100'000'000;
  std::uint64_t drain_ns = 2'000'000'000;  // after the last issue, how long answers may take
  std::uint64_t dead_after_ns = 1'000'000'000;  // nothing answered this long: the server is dead; 0: never
};

// Why a client process stops before its end: the server died (its answers stopped, its QPs
// failed, its rendezvous connection closed) or a transport failed. The first reason wins;
// every client thread looks at it on its housekeeping turns and stops.
class RunCut {
 public:
  void Cut(const std::string& reason);
  bool cut() const { return cut_.load(std::memory_order_acquire); }
  std::string reason() const;

 private:
  std::atomic<bool> cut_{false};
  mutable std::mutex mutex_;
  std::string reason_;
};

// One client's state beside its transport: the window, its values, its counts.
struct ClientState {
  ClientState(const WorkloadConfig& workload, std::uint32_t global_id, const ClientPlan& plan);
  struct Slot {
    Request request;
    std::uint64_t first_sent = 0;  // ticks
    std::uint64_t last_sent = 0;
    std::uint32_t sequence = 0;
    bool busy = false;
  };
  Workload workload;
  std::uint32_t global_id;
  std::vector<Slot> slots;
  std::vector<std::uint8_t> values;  // one PUT value per window slot
  std::uint32_t next_sequence = 1;
  std::uint32_t in_flight = 0;
  std::uint64_t issued_measured = 0;  // requests issued that count toward ops_per_client
  bool issuing = true;
  ClientCounts counts;
  std::uint64_t first_measured = 0, last_measured = 0;  // ticks of the measured interval
};

// TscClock::TicksToNs in fixed point, 32 fractional bits: a multiply and a shift per
// answer measured instead of a round trip through double.
class TickScale {
 public:
  explicit TickScale(const TscClock& clock)
      : ns_per_tick_q32_(static_cast<std::uint64_t>(clock.NsPerTick() * 0x1.0p32 + 0.5)) {}
  std::uint64_t ToNs(std::uint64_t ticks) const {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(ticks) * ns_per_tick_q32_) >> 32);
  }

 private:
  std::uint64_t ns_per_tick_q32_;
};

// Fills the next request of `slot`: an operation from the workload, a fresh id, the value
// of a PUT. Inline, as AcceptResponse: both run once per request, where a call's frame
// (saving and restoring the registers the loop holds) cost ~20 instructions each.
[[gnu::always_inline]] inline void PrepareRequest(ClientState& client, std::uint32_t slot, std::uint32_t value_bytes) {
  ClientState::Slot& s = client.slots[slot];
  const Op op = client.workload.Next();
  s.sequence = client.next_sequence++;
  s.busy = true;
  ++client.in_flight;
  Request& r = s.request;
  r.id = (s.sequence << kSlotBits) | slot;
  r.get = op.get;
  r.key_index = op.key_index;
  r.key = KeyHashOf(op.key_index);
  if (op.get) {
    r.value = nullptr;
    r.value_bytes = 0;
  } else {
    std::uint8_t* value = client.values.data() + std::size_t{slot} * value_bytes;
    FillValue(op.key_index, client.global_id, s.sequence, value, value_bytes);
    r.value = value;
    r.value_bytes = value_bytes;
  }
}

void CountValueCheck(ClientCounts& counts, ValueCheck check);

// Accounts an answer: returns false when it is stale (an earlier request of that slot, or a
// duplicate). `client` was built from `plan` (its window).
inline bool AcceptResponse(ClientState& client, const Response& response, const ClientPlan& plan, std::uint64_t now,
                           bool measuring, const TickScale& scale, LatencyHistogram& latency) {
  ClientCounts& counts = client.counts;
  const std::uint32_t slot_index = SlotOf(response.id);
  if (slot_index >= plan.window) {
    ++counts.stale_answers;
    return false;
  }
  ClientState::Slot& slot = client.slots[slot_index];
  if (!slot.busy || slot.request.id != response.id) {
    ++counts.stale_answers;
    return false;
  }
  slot.busy = false;
  --client.in_flight;
  ++counts.all_completed;
  const bool get = slot.request.get;
  if (get) {
    if (response.found && plan.validate) {
      CountValueCheck(counts, CheckValue(slot.request.key_index, response.value, response.value_bytes, plan.value_bytes));
    }
  } else if (!response.found) {
    ++counts.puts_refused;
  }
  if (!measuring) return true;
  ++counts.completed;
  if (get) {
    ++counts.gets;
    ++(response.found ? counts.get_hits : counts.get_misses);
  } else {
    ++counts.puts;
  }
  if (client.first_measured == 0) client.first_measured = now;
  client.last_measured = now;
  latency.Record(scale.ToNs(now - slot.first_sent));
  return true;
}

struct ThreadOutcome {
  LatencyHistogram latency;
  std::uint64_t start = 0, end = 0;  // ticks of the measured interval of the thread's clients
};

// "the server stopped answering: ..." for a thread whose requests went unanswered too long.
std::string SilenceReason(const std::vector<ClientState>& clients, const ClientPlan& plan);

// Runs the clients of one thread to completion: fill every window, poll, account, reissue,
// retry what went unanswered, stop issuing at the goal, drain. A transport's failure, or no
// answer for plan.dead_after_ns, cuts the run (`cut`); another's cut ends this thread too.
// What was measured until then stays in `clients` and `outcome`.
template <typename Transport>
void RunClients(std::vector<std::unique_ptr<Transport>>& transports, std::vector<ClientState>& clients,
                const ClientPlan& given_plan, const TscClock& clock, std::uint64_t deadline_ticks, RunCut& cut,
                ThreadOutcome& outcome) {
  // A copy whose address no transport sees: the hot loop keeps its fields in registers
  // rather than reloading them after every call that may write memory.
  const ClientPlan plan = given_plan;
  constexpr int kPollMax = 16;
  constexpr std::uint32_t kHousekeepingMask = 0xFF;  // loop turns between clock reads for retries
  constexpr std::uint32_t kQuietPeriodsBeforeYield = 2;
  const std::uint64_t start = clock.Now();
  const std::uint64_t measure_start = start + clock.NsToTicks(plan.warmup_ns);
  const std::uint64_t measure_end = plan.ops_per_client ? ~std::uint64_t{0} : measure_start + clock.NsToTicks(plan.measure_ns);
  const std::uint64_t retry_ticks = clock.NsToTicks(plan.retry_ns);
  const std::uint64_t drain_ticks = clock.NsToTicks(plan.drain_ns);
  const std::uint64_t dead_after_ticks = plan.dead_after_ns ? clock.NsToTicks(plan.dead_after_ns) : ~std::uint64_t{0};
  const TickScale scale(clock);
  std::uint64_t now = start, drain_deadline = ~std::uint64_t{0}, last_answer = start;
  outcome.start = measure_start;
  // The hot loop reads these from locals: through the vectors, every turn reloaded their
  // bounds (the transports' calls may write any memory as far as the compiler knows).
  ClientState* const client_data = clients.data();
  const std::size_t client_count = clients.size();
  std::unique_ptr<Transport>* const transport_data = transports.data();
  try {
    for (std::size_t c = 0; c < client_count; ++c) {
      for (std::uint32_t s = 0; s < plan.window; ++s) {
        PrepareRequest(client_data[c], s, plan.value_bytes);
        client_data[c].slots[s].first_sent = client_data[c].slots[s].last_sent = now;
        transport_data[c]->Issue(client_data[c].slots[s].request);
      }
    }
    Response responses[kPollMax];
    bool answered = false;  // since the last housekeeping
    std::uint32_t quiet_periods = 0;
    for (std::uint32_t turn = 0;; ++turn) {
      bool busy = false;
      for (std::size_t c = 0; c < client_count; ++c) {
        ClientState& client = client_data[c];
        if (client.in_flight == 0 && !client.issuing) continue;
        busy = true;
        Transport& transport = *transport_data[c];
        const int n = transport.Poll(responses, kPollMax);
        if (n == 0) continue;
        answered = true;
        now = last_answer = clock.Now();
        const bool measuring = now >= measure_start && now < measure_end;
        const bool past_start = now >= measure_start;
        if (now >= measure_end) client.issuing = false;
        for (int i = 0; i < n; ++i) {
          if (!AcceptResponse(client, responses[i], plan, now, measuring, scale, outcome.latency)) continue;
          if (!client.issuing) continue;
          if (past_start) {
            if (plan.ops_per_client != 0 && client.issued_measured >= plan.ops_per_client) {
              client.issuing = false;
              continue;
            }
            ++client.issued_measured;
          }
          const std::uint32_t slot = SlotOf(responses[i].id);
          PrepareRequest(client, slot, plan.value_bytes);
          ClientState::Slot& sent = client.slots[slot];
          sent.first_sent = sent.last_sent = now;
          transport.Issue(sent.request);
        }
      }
      if (!busy) break;
      if ((turn & kHousekeepingMask) != 0) continue;
      // Many periods without an answer: the server may share this CPU (more busy pollers
      // than cores), so let it run rather than spin out the time slice.
      quiet_periods = answered ? 0 : quiet_periods + 1;
      if (quiet_periods >= kQuietPeriodsBeforeYield) sched_yield();
      answered = false;
      now = clock.Now();
      if (cut.cut() || now >= deadline_ticks) break;
      if (now - last_answer >= dead_after_ticks) {
        cut.Cut(SilenceReason(clients, plan));
        break;
      }
      bool any_issuing = false;
      for (std::size_t c = 0; c < client_count; ++c) {
        ClientState& client = client_data[c];
        if (now >= measure_end) client.issuing = false;
        any_issuing |= client.issuing;
        if constexpr (Transport::kLosesMessages) {
          for (auto& slot : client.slots) {
            if (slot.busy && now - slot.last_sent >= retry_ticks) {
              slot.last_sent = now;
              ++client.counts.retries;
              transport_data[c]->Resend(slot.request);
            }
          }
        }
      }
      if (!any_issuing && drain_deadline == ~std::uint64_t{0}) drain_deadline = now + drain_ticks;
      if (now >= drain_deadline) break;
    }
  } catch (const std::exception& error) {
    cut.Cut(error.what());
  }
  std::uint64_t end = outcome.start;
  for (auto& client : clients) {
    client.counts.unanswered += client.in_flight;
    end = std::max(end, client.last_measured);
  }
  outcome.end = end;
}

// The process's row from its clients: rate over the measured interval of all threads,
// latency merged, one per_peer entry per client ("client/<process>.<client>").
ResultRow ClientRow(const std::vector<ClientState>& clients, const std::vector<ThreadOutcome>& threads,
                    std::uint32_t value_bytes, int process_index, const TscClock& clock);
nlohmann::json CountsJson(const ClientCounts& counts);
ClientCounts CountsFromJson(const nlohmann::json& json);
// {"enabled", "ok", "checked", "wrong_key", "corrupt"} over the clients.
nlohmann::json ValidationJson(bool enabled, const ClientCounts& total);

}  // namespace rdmalab::kv
