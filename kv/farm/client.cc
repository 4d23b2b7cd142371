// FaRM-em and FaRM-em-VAR's client (spec: systems.md). FaRM-em: a GET is one RC READ of the
// key's hopscotch neighbourhood, H = 6 entries of key and value (6*(SK+SV) bytes), the value
// found by its key among them. FaRM-em-VAR: the neighbourhood holds key and pointer
// (6*(SK+SP)), then a second READ fetches the SV-byte value. A PUT (both) is a UC WRITE of
// key and value into this client's circular buffer at the server (RingWriter), answered by
// the server's UC WRITE into the client's answer slot; a full buffer holds PUTs back.
// --store full: the neighbourhood is the real one of the server's hopscotch table
// (kv/remote/hopscotch.h), READ at the key's home bucket, each bucket 16 bytes longer
// (version and CRC64); a torn or corrupt bucket or extent is READ again, and a miss is
// answered only once the home's version is seen unchanged before and after a READ that found
// no key: a second neighbourhood READ, then a READ of the home bucket (hopscotch.h's rules).
#include "kv/core/systems.h"
#include "kv/remote/client.h"
#include "kv/remote/crc64.h"
#include "kv/remote/message.h"

namespace rdmalab::kv {
namespace remote {
namespace {

enum FarmStep : std::uint32_t { kReadNeighbourhood, kReadValue, kReadHome };
constexpr std::uint64_t kNoVersion = 1;  // odd: never a version a miss can rest on

class FarmTransport : public TransportBase {
 public:
  FarmTransport(Session& session, std::uint32_t client, const Layout& layout, ClientTotals* totals)
      : TransportBase(session, client, layout, totals),
        ring_(connection_, layout, client, static_cast<std::uint32_t>(session.options().window)),
        pointers_(session.options().window),
        sealed_(session.options().window, session.clock()),
        absent_versions_(session.options().window, kNoVersion),
        var_(layout.design == Design::kFarmVar),
        value_read_bytes_(layout.full && var_ ? layout.value_bytes + kCrcBytes : layout.value_bytes) {}
  ~FarmTransport() { totals_->backpressure_waits += ring_.backpressure_waits(); }

  // A lost UC WRITE would leave a hole in the server's circular buffer that no resend fills
  // (FaRM assumes a lossless fabric): with drops, the run ends with the PUT unanswered.
  static constexpr bool kLosesMessages = false;
  void Issue(const Request& request) {
    const std::uint32_t slot = SlotOf(request.id);
    if (request.get) {
      pending_[slot] = request;
      sealed_.Start(slot);
      absent_versions_[slot] = kNoVersion;
      ReadNeighbourhood(request);
      return;
    }
    EncodeMessage(connection_.MessageBuffer(slot), request, MessageKind::kPut);
    ring_.Send(slot, request.id);
    ++totals_->verbs.wrs[kFarmPutWrite];
  }
  void Resend(const Request&) {}
  int Poll(Response* out, int max);

 private:
  void ReadNeighbourhood(const Request& request) {
    const std::uint64_t at = layout_.full ? layout_.NeighbourhoodOffset(request.key)
                                          : layout_.entries + request.key_index * layout_.entry_bytes;
    connection_.Read(ReadWrId(request.id, kReadNeighbourhood), at, connection_.ReadBuffer(SlotOf(request.id)),
                     kNeighbourhood * layout_.entry_bytes);
    ++totals_->verbs.wrs[kFarmNeighbourhoodRead];
  }
  // Full: the home bucket alone, after a neighbourhood READ that found no key.
  void ReadHome(std::uint32_t id) {
    connection_.Read(ReadWrId(id, kReadHome), layout_.NeighbourhoodOffset(pending_[SlotOf(id)].key),
                     connection_.ReadBuffer(SlotOf(id)), layout_.entry_bytes);
    ++totals_->verbs.wrs[kFarmHomeRead];
  }
  void ReadValue(std::uint32_t id, std::uint64_t pointer) {
    pointers_[SlotOf(id)] = pointer;
    connection_.Read(ReadWrId(id, kReadValue), pointer, connection_.ReadBuffer(SlotOf(id)), value_read_bytes_);
    ++totals_->verbs.wrs[kFarmValueRead];
  }
  // The entry among the H whose key is the request's, or nullptr.
  const std::uint8_t* Find(std::uint32_t slot) const {
    const std::uint8_t* entries = connection_.ReadBuffer(slot);
    for (std::uint32_t e = 0; e < kNeighbourhood; ++e) {
      if (std::memcmp(entries + e * layout_.entry_bytes, &pending_[slot].key, kKeyBytes) == 0) return entries + e * layout_.entry_bytes;
    }
    return nullptr;
  }
  // One completed READ of a GET: true when the GET is answered in `out`, false when a
  // further READ is under way.
  bool Emulated(std::uint32_t id, std::uint32_t step, Response& out);
  bool Full(std::uint32_t id, std::uint32_t step, Response& out);

  RingWriter ring_;
  std::vector<std::uint64_t> pointers_;  // FaRM-VAR, per window slot: where its value is
  SealedReads sealed_;                        // full: READs made again after a failed CRC64
  std::vector<std::uint64_t> absent_versions_;  // full, per window slot: the home's version before the READ under way
  bool var_;
  std::uint32_t value_read_bytes_;
};

bool FarmTransport::Emulated(std::uint32_t id, std::uint32_t step, Response& out) {
  const std::uint32_t slot = SlotOf(id);
  if (step == kReadNeighbourhood) {
    const std::uint8_t* entry = Find(slot);
    if (entry != nullptr && var_) {
      std::uint64_t pointer = 0;
      std::memcpy(&pointer, entry + kKeyBytes, kPointerBytes);
      ReadValue(id, pointer);
      return false;
    }
    if (entry != nullptr && torn_.Again(slot, pending_[slot].key_index, entry + kKeyBytes, layout_.value_bytes, totals_)) {
      ReadNeighbourhood(pending_[slot]);
      return false;
    }
    out = Response{id, entry != nullptr, entry ? entry + kKeyBytes : nullptr, entry ? layout_.value_bytes : 0};
    return true;
  }
  if (torn_.Again(slot, pending_[slot].key_index, connection_.ReadBuffer(slot), layout_.value_bytes, totals_)) {
    ReadValue(id, pointers_[slot]);
    return false;
  }
  out = Response{id, true, connection_.ReadBuffer(slot), layout_.value_bytes};
  return true;
}

bool FarmTransport::Full(std::uint32_t id, std::uint32_t step, Response& out) {
  const std::uint32_t slot = SlotOf(id);
  const std::uint8_t* read = connection_.ReadBuffer(slot);
  if (step == kReadHome) {
    const std::uint64_t after = HomeVersion(read, layout_.HopscotchPayloadBytes());
    if (after == absent_versions_[slot]) {
      out = Response{id, false, nullptr, 0};  // no entry of the home moved while the READ found no key
      return true;
    }
    absent_versions_[slot] = after % 2 == 0 ? after : kNoVersion;
    ReadNeighbourhood(pending_[slot]);
    return false;
  }
  if (step == kReadValue) {
    if (ExtentChecks(read, layout_.value_bytes)) {
      out = Response{id, true, read, layout_.value_bytes};
      return true;
    }
    if (sealed_.Again(slot, totals_)) {
      ReadValue(id, pointers_[slot]);
      return false;
    }
    out = Response{id, false, nullptr, 0};
    return true;
  }
  const NeighbourhoodScan scan = ScanNeighbourhood(read, pending_[slot].key, layout_.HopscotchPayloadBytes());
  switch (scan.outcome) {
    case NeighbourhoodScan::kFound:
      if (var_) {
        std::uint64_t pointer = 0;
        std::memcpy(&pointer, scan.payload, kPointerBytes);
        ReadValue(id, pointer);
        return false;
      }
      out = Response{id, true, scan.payload, layout_.value_bytes};
      return true;
    case NeighbourhoodScan::kTorn:
      if (sealed_.Again(slot, totals_)) {
        ReadNeighbourhood(pending_[slot]);
        return false;
      }
      out = Response{id, false, nullptr, 0};
      return true;
    case NeighbourhoodScan::kAbsent:
      // This READ's version was read before the next READ is posted: READ again with it as the
      // version before. A READ that found no key with the version before unchanged is checked
      // against the version after. A changed version means a move raced; moves are finite (an
      // insert makes at most kHopscotchProbeBuckets), so this ends.
      if (absent_versions_[slot] != scan.home_version) {
        absent_versions_[slot] = scan.home_version;
        ReadNeighbourhood(pending_[slot]);
        return false;
      }
      ReadHome(id);
      return false;
  }
  return false;
}

int FarmTransport::Poll(Response* out, int max) {
  int n = 0;
  connection_.ForEachDone(max, [&](std::uint32_t id, std::uint32_t, std::uint32_t step) {
    if (layout_.full ? Full(id, step, out[n]) : Emulated(id, step, out[n])) {
      ++n;
      ++totals_->verbs.gets;
    }
  });
  Answer answers[kPollBatch];
  const int received = ring_.Poll(answers, std::min(max - n, kPollBatch));
  for (int i = 0; i < received; ++i) out[n++] = PutAnswered(answers[i], kFarmAnswerWrite, totals_);
  return n;
}

}  // namespace
}  // namespace remote

Report RunFarmClient(Session& session) { return remote::RunRemoteClient<remote::FarmTransport>(session); }

}  // namespace rdmalab::kv
