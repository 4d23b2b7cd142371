// What the READ-based systems' clients share: the ring writer of FaRM's and HydraDB's PUTs
// (a per-client circular buffer at the server, WRITTEN slot by slot, credits returned by the
// server's answers, PUTs held back while the buffer is full), and the client process that
// connects every transport, runs the client core and hands its verb tally to the server.
#pragma once

#include <memory>
#include <vector>

#include "kv/core/client_core.h"
#include "kv/core/client_process.h"
#include "kv/remote/connection.h"
#include "rdma/clock.h"
#include "kv/remote/remote.h"

namespace rdmalab::kv::remote {

// An RC READ's wr_id: the request id, and the step of the request it completes (Connection::PollRc
// hands both back).
inline std::uint64_t ReadWrId(std::uint32_t id, std::uint32_t step) { return std::uint64_t{step} << 32 | id; }

class RingWriter {
 public:
  RingWriter(Connection& connection, const Layout& layout, std::uint32_t client, std::uint32_t window);
  // Sends the message of window slot `slot` (already in the connection's message buffer,
  // `bytes` long) now, or once the server has freed a ring slot.
  void Send(std::uint32_t slot, std::uint32_t id);
  // Answers that arrived for messages in flight; returns how many it wrote to `out`.
  int Poll(Answer* out, int max);
  std::uint64_t backpressure_waits() const { return backpressure_waits_; }

 private:
  void Write(std::uint32_t slot);

  Connection& connection_;
  const Layout& layout_;
  std::uint32_t client_;
  std::uint64_t written_ = 0, consumed_ = 0;
  std::vector<std::uint32_t> waiting_;  // window slots whose message waits for a free ring slot (FIFO)
  std::uint32_t waiting_head_ = 0, waiting_count_ = 0;
  std::vector<std::uint32_t> expected_;  // per window slot: the id whose answer is awaited, 0: none
  std::uint64_t backpressure_waits_ = 0;
};

// What a client's transport counts beyond the client core (single writer: its thread).
struct ClientTotals {
  VerbTally verbs;
  std::uint64_t torn_rereads = 0;        // value READs that raced with a PUT's copy and were made again
  std::uint64_t checksum_failures = 0;   // full stores: GETs whose bucket or extent kept failing its CRC64
  std::uint64_t backpressure_waits = 0;  // FaRM: PUTs that waited for a free ring slot
  std::uint64_t lock_retries = 0;        // DrTM: lock CASes that found the lock taken
  std::uint64_t lock_failures = 0;       // DrTM: PUTs refused after --lock-retries
  std::uint64_t table_full = 0;          // FaRM full: PUTs refused, the hopscotch table had no place
  void Add(const ClientTotals& other);
  nlohmann::json Json() const;
  static ClientTotals FromJson(const nlohmann::json& json);
  // Into a row: "verbs" (VerbsJson) and the counts; a note when PUTs were refused.
  void Report(const Options& options, ResultRow& row, nlohmann::json& notes) const;
};

// A READ may race with the server's copy of a PUT into the same entry and return half of
// each value. The real designs detect it (FaRM: per-cache-line versions; Pilaf: CRC64; DrTM
// and HydraDB: versions or leases); the emulation detects it by the value's own check
// (kv/workload) and READs again, at most kMaxTornRereads times, so that only a value that
// stays wrong reaches the client core's validation.
constexpr std::uint32_t kMaxTornRereads = 16;

// The full stores' READs sealed by a CRC64: one that fails is made again, for as long as
// kSealedRereadMs after the GET's first failure; then the memory is taken as corrupt
// (counted) and the GET is answered as a miss, never with its bytes. A count would not do:
// a hot key's updates fail READs many times in a row, and a server preempted in the middle
// of an update (more busy pollers than cores) leaves it torn for a time slice or more (20 ms
// was not enough on 2 cores shared with builds).
constexpr std::uint64_t kSealedRereadMs = 250;
class SealedReads {
 public:
  SealedReads(std::uint32_t window, const TscClock& clock)
      : clock_(clock), give_up_ticks_(clock.NsToTicks(kSealedRereadMs * 1'000'000)), slots_(window) {}
  void Start(std::uint32_t slot) { slots_[slot].rereads = 0; }
  // After a failed check: true to READ again (counted as torn), false to give up (counted as corrupt).
  bool Again(std::uint32_t slot, ClientTotals* totals) {
    Slot& s = slots_[slot];
    const std::uint64_t now = clock_.Now();
    if (s.rereads++ == 0) s.first_failure = now;
    if (now - s.first_failure < give_up_ticks_) {
      ++totals->torn_rereads;
      return true;
    }
    ++totals->checksum_failures;
    return false;
  }

 private:
  struct Slot {
    std::uint32_t rereads = 0;
    std::uint64_t first_failure = 0;  // ticks
  };
  const TscClock& clock_;
  std::uint64_t give_up_ticks_;
  std::vector<Slot> slots_;
};
class TornReads {
 public:
  explicit TornReads(std::uint32_t window) : rereads_(window, 0) {}
  // True: READ again. Counts it.
  bool Again(std::uint32_t slot, std::uint64_t key_index, const std::uint8_t* value, std::uint32_t bytes,
             ClientTotals* totals) {
    if (CheckValue(key_index, value, bytes, bytes) != ValueCheck::kCorrupt || rereads_[slot] >= kMaxTornRereads) {
      rereads_[slot] = 0;
      return false;
    }
    ++rereads_[slot];
    ++totals->torn_rereads;
    return true;
  }

 private:
  std::vector<std::uint32_t> rereads_;
};

// What every transport of a remote design holds: the store's layout, the client's
// connection, the totals it counts into, the request under way in each window slot and the
// torn-read detector. A transport derives from it and adds its own state.
class TransportBase {
 public:
  TransportBase(Session& session, std::uint32_t client, const Layout& layout, ClientTotals* totals)
      : layout_(layout),
        connection_(session, client, layout),
        totals_(totals),
        pending_(session.options().window),
        torn_(session.options().window) {}
  Connection& connection() { return connection_; }

 protected:
  const Layout& layout_;
  Connection connection_;
  ClientTotals* totals_;
  std::vector<Request> pending_;  // per window slot: the request under way
  TornReads torn_;
};

// A PUT's answer as the client core's response, counted with the WR that carried it.
inline Response PutAnswered(const Answer& answer, std::uint8_t answer_verb, ClientTotals* totals) {
  ++totals->verbs.wrs[answer_verb];
  ++totals->verbs.puts;
  if (answer.status == kStatusTableFull) ++totals->table_full;
  return Response{answer.id, answer.status == kStatusStored, nullptr, 0};
}

// A transport type is built as Transport(session, global client id, layout, &totals) and
// has connection(). {"clients": [Describe()...]} goes to the server, its "remote" comes
// back; after the run the process's totals go to the server as "totals".
template <typename Transport>
Report RunRemoteClient(Session& session) {
  using nlohmann::json;
  const Options& o = session.options();
  const Layout layout = LayoutOf(o, static_cast<std::uint32_t>(o.clients * o.peers));
  std::vector<ClientTotals> totals(o.clients);
  std::vector<std::unique_ptr<Transport>> transports;
  json described = json::array();
  for (int j = 0; j < o.clients; ++j) {
    transports.push_back(std::make_unique<Transport>(session, GlobalClientId(session, j), layout, &totals[j]));
    described.push_back(transports.back()->connection().Describe());
  }
  session.Put("remote", {{"clients", described}});
  const json server = session.Get("server/0", "remote");
  const RemoteRegion store = RemoteRegion::FromJson(server.at("store"));
  const json& mine = server.at("clients").at(session.index());
  for (int j = 0; j < o.clients; ++j) transports[j]->connection().Connect(mine.at(j), store);
  Report report = RunClientProcess(session, transports);
  ClientTotals total;
  for (const auto& t : totals) total.Add(t);
  if (report.cut_short.empty()) session.Put("totals", total.Json());
  total.Report(o, report.rows.front(), report.notes);
  return report;
}

}  // namespace rdmalab::kv::remote
