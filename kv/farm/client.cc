// FaRM-em and FaRM-em-VAR's client (spec: systems.md). FaRM-em: a GET is one RC READ of the
// key's hopscotch neighbourhood, H = 6 entries of key and value (6*(SK+SV) bytes), the value
// found by its key among them. FaRM-em-VAR: the neighbourhood holds key and pointer
// (6*(SK+SP)), then a second READ fetches the SV-byte value. A PUT (both) is a UC WRITE of
// key and value into this client's circular buffer at the server (RingWriter), answered by
// the server's UC WRITE into the client's answer slot; a full buffer holds PUTs back.
#include "kv/core/systems.h"
#include "kv/remote/client.h"
#include "kv/remote/message.h"

namespace rdmalab::kv {
namespace remote {
namespace {

enum FarmStep : std::uint32_t { kReadNeighbourhood, kReadValue };

class FarmTransport {
 public:
  FarmTransport(Session& session, std::uint32_t client, const Layout& layout, ClientTotals* totals)
      : layout_(layout),
        connection_(session, client, layout),
        ring_(connection_, layout, client, static_cast<std::uint32_t>(session.options().window)),
        totals_(totals),
        pending_(session.options().window),
        pointers_(session.options().window),
        torn_(session.options().window),
        var_(layout.design == Design::kFarmVar) {}
  ~FarmTransport() { totals_->backpressure_waits += ring_.backpressure_waits(); }
  Connection& connection() { return connection_; }

  // A lost UC WRITE would leave a hole in the server's circular buffer that no resend fills
  // (FaRM assumes a lossless fabric): with drops, the run ends with the PUT unanswered.
  static constexpr bool kLosesMessages = false;
  void Issue(const Request& request) {
    const std::uint32_t slot = SlotOf(request.id);
    if (request.get) {
      pending_[slot] = request;
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
    connection_.Read(ReadWrId(request.id, kReadNeighbourhood), layout_.entries + request.key_index * layout_.entry_bytes,
                     connection_.ReadBuffer(SlotOf(request.id)), kNeighbourhood * layout_.entry_bytes);
    ++totals_->verbs.wrs[kFarmNeighbourhoodRead];
  }
  void ReadValue(std::uint32_t id, std::uint64_t pointer) {
    pointers_[SlotOf(id)] = pointer;
    connection_.Read(ReadWrId(id, kReadValue), pointer, connection_.ReadBuffer(SlotOf(id)), layout_.value_bytes);
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

  const Layout& layout_;
  Connection connection_;
  RingWriter ring_;
  ClientTotals* totals_;
  std::vector<Request> pending_;  // per window slot: the GET under way
  std::vector<std::uint64_t> pointers_;  // FaRM-VAR, per window slot: where its value is
  TornReads torn_;
  bool var_;
};

int FarmTransport::Poll(Response* out, int max) {
  Connection::Done completions[kPollBatch];
  int n = 0;
  const int reads = connection_.PollRc(completions, max);
  for (int i = 0; i < reads; ++i) {
    const auto [id, slot, step] = completions[i];
    if (step == kReadNeighbourhood) {
      const std::uint8_t* entry = Find(slot);
      if (entry != nullptr && var_) {
        std::uint64_t pointer = 0;
        std::memcpy(&pointer, entry + kKeyBytes, kPointerBytes);
        ReadValue(id, pointer);
        continue;
      }
      if (entry != nullptr && torn_.Again(slot, pending_[slot].key_index, entry + kKeyBytes, layout_.value_bytes, totals_)) {
        ReadNeighbourhood(pending_[slot]);
        continue;
      }
      out[n++] = Response{id, entry != nullptr, entry ? entry + kKeyBytes : nullptr, entry ? layout_.value_bytes : 0};
    } else {
      if (torn_.Again(slot, pending_[slot].key_index, connection_.ReadBuffer(slot), layout_.value_bytes, totals_)) {
        ReadValue(id, pointers_[slot]);
        continue;
      }
      out[n++] = Response{id, true, connection_.ReadBuffer(slot), layout_.value_bytes};
    }
    ++totals_->verbs.gets;
  }
  Answer answers[kPollBatch];
  const int received = ring_.Poll(answers, std::min(max - n, kPollBatch));
  for (int i = 0; i < received; ++i) out[n++] = PutAnswered(answers[i], kFarmAnswerWrite, totals_);
  return n;
}

}  // namespace
}  // namespace remote

Report RunFarmClient(Session& session) { return remote::RunRemoteClient<remote::FarmTransport>(session); }

}  // namespace rdmalab::kv
