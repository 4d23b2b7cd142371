// HydraDB-em's client (spec: systems.md, from the NoSQL survey): a GET is one RC READ of the
// value and the word-size lease after it, found valid (the client's cache of remote
// addresses hits); with --hydradb-miss-path a client's first GET of a key asks the server
// (an RC WRITE of a lookup into its ring, answered by an RC WRITE of the entry's address)
// and later GETs READ it. A PUT is an RC WRITE of key and value into the client's ring at
// the server, answered by the server's RC WRITE; messages are inline.
#include "kv/core/systems.h"
#include "kv/remote/client.h"
#include "kv/remote/message.h"

namespace rdmalab::kv {
namespace remote {
namespace {

class HydraTransport : public TransportBase {
 public:
  HydraTransport(Session& session, std::uint32_t client, const Layout& layout, ClientTotals* totals)
      : TransportBase(session, client, layout, totals),
        ring_(connection_, layout, client, static_cast<std::uint32_t>(session.options().window)),
        miss_path_(session.options().hydradb_miss_path),
        known_(miss_path_ ? layout.keys : 0, false) {}

  static constexpr bool kLosesMessages = false;  // RC only
  void Issue(const Request& request) {
    const std::uint32_t slot = SlotOf(request.id);
    pending_[slot] = request;
    if (request.get && (!miss_path_ || known_[request.key_index])) {
      Read(request.id, layout_.entries + request.key_index * layout_.entry_bytes);
      return;
    }
    EncodeMessage(connection_.MessageBuffer(slot), request, request.get ? MessageKind::kLookup : MessageKind::kPut);
    ring_.Send(slot, request.id);
    ++totals_->verbs.wrs[request.get ? kHydraLookupWrite : kHydraPutWrite];
  }
  void Resend(const Request&) {}
  int Poll(Response* out, int max);

 private:
  void Read(std::uint32_t id, std::uint64_t entry_offset) {
    connection_.Read(id, entry_offset, connection_.ReadBuffer(SlotOf(id)), layout_.value_bytes + kLeaseBytes);
    ++totals_->verbs.wrs[kHydraValueRead];
  }

  RingWriter ring_;
  bool miss_path_;
  std::vector<bool> known_;  // --hydradb-miss-path: keys whose address this client has
};

int HydraTransport::Poll(Response* out, int max) {
  int n = 0;
  connection_.ForEachDone(max, [&](std::uint32_t id, std::uint32_t slot, std::uint32_t) {
    const std::uint8_t* entry = connection_.ReadBuffer(slot);
    const std::uint64_t key_index = pending_[slot].key_index;
    if (torn_.Again(slot, key_index, entry, layout_.value_bytes, totals_)) {
      Read(id, layout_.entries + key_index * layout_.entry_bytes);
      return;
    }
    std::uint64_t lease = 0;
    std::memcpy(&lease, entry + layout_.value_bytes, kLeaseBytes);
    out[n++] = Response{id, lease != 0, entry, layout_.value_bytes};
    ++totals_->verbs.gets;
  });
  Answer answers[kPollBatch];
  const int received = ring_.Poll(answers, std::min(max - n, kPollBatch));
  for (int i = 0; i < received; ++i) {
    const Request& request = pending_[SlotOf(answers[i].id)];
    if (request.get) {
      ++totals_->verbs.wrs[kHydraLookupAnswer];
      known_[request.key_index] = true;
      Read(answers[i].id, answers[i].entry_offset);
      continue;
    }
    out[n++] = PutAnswered(answers[i], kHydraAnswerWrite, totals_);
  }
  return n;
}

}  // namespace
}  // namespace remote

Report RunHydraDbClient(Session& session) { return remote::RunRemoteClient<remote::HydraTransport>(session); }

}  // namespace rdmalab::kv
