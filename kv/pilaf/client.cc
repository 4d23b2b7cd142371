// Pilaf-em-OPT's client (spec: systems.md): a GET READs a 32-byte cuckoo bucket, READs the
// second bucket for 6 GETs in 10 (3-1 cuckoo hashing's 1.6 bucket READs on average), only
// once the first has completed, then READs the SV-byte value: 2.6 RC READs per GET. A PUT is
// a UC SEND of the key and value, inline, signaled one in --cq-mod, answered by a UC SEND.
#include "kv/core/systems.h"
#include "kv/remote/client.h"
#include "kv/remote/message.h"

namespace rdmalab::kv {
namespace remote {
namespace {

enum PilafStep : std::uint32_t { kFirstBucket, kSecondBucket, kValue };

class PilafTransport {
 public:
  PilafTransport(Session& session, std::uint32_t client, const Layout& layout, ClientTotals* totals)
      : layout_(layout), connection_(session, client, layout), totals_(totals), pending_(session.options().window), torn_(session.options().window) {}
  Connection& connection() { return connection_; }

  // A lost PUT or answer (UC) is sent again; GETs travel over RC and are never lost.
  static constexpr bool kLosesMessages = true;
  void Issue(const Request& request) {
    pending_[SlotOf(request.id)] = request;
    if (request.get) {
      ReadBucket(request, kFirstBucket);
    } else {
      SendPut(request);
    }
  }
  void Resend(const Request& request) {
    if (!request.get) SendPut(request);
  }
  int Poll(Response* out, int max);

 private:
  void ReadBucket(const Request& request, PilafStep step) {
    const std::uint64_t hash = step == kFirstBucket ? request.key.lo : request.key.hi;
    const std::uint64_t bucket = layout_.buckets + (hash % layout_.bucket_count) * kPilafBucketBytes;
    connection_.Read(ReadWrId(request.id, step), bucket, connection_.ReadBuffer(SlotOf(request.id)), kPilafBucketBytes);
    ++totals_->verbs.wrs[kPilafBucketRead];
  }
  void ReadValue(std::uint32_t id, std::uint32_t key_index) {
    connection_.Read(ReadWrId(id, kValue), layout_.ValueOffset(key_index), connection_.ReadBuffer(SlotOf(id)),
                     layout_.value_bytes);
    ++totals_->verbs.wrs[kPilafValueRead];
  }
  void SendPut(const Request& request) {
    std::uint8_t* message = connection_.MessageBuffer(SlotOf(request.id));
    const std::uint32_t bytes = EncodeMessage(message, request, MessageKind::kPut);
    while (!connection_.MessageRoom()) connection_.ReapMessages();
    connection_.SendMessage(message, bytes);
    ++totals_->verbs.wrs[kPilafPutSend];
  }

  const Layout& layout_;
  Connection connection_;
  ClientTotals* totals_;
  std::vector<Request> pending_;  // per window slot: the GET whose READs are under way
  TornReads torn_;
  std::uint32_t second_bucket_credit_ = 0;  // tenths: a GET adds 6 and READs the second bucket at 10
};

int PilafTransport::Poll(Response* out, int max) {
  ibv_wc completions[kPollBatch];
  int n = 0;
  const int reads = connection_.PollRc(completions, max);
  for (int i = 0; i < reads; ++i) {
    const std::uint32_t id = static_cast<std::uint32_t>(completions[i].wr_id);
    switch (StepOf(completions[i].wr_id)) {
      case kFirstBucket:
      case kSecondBucket: {
        const bool second = StepOf(completions[i].wr_id) == kFirstBucket &&
                            (second_bucket_credit_ += kPilafSecondBucketPerTen) >= 10;
        Request& pending = pending_[SlotOf(id)];
        if (second) {
          second_bucket_credit_ -= 10;
          ReadBucket(pending, kSecondBucket);
        } else {
          ReadValue(id, static_cast<std::uint32_t>(pending.key_index));
        }
        break;
      }
      default:
        if (torn_.Again(SlotOf(id), pending_[SlotOf(id)].key_index, connection_.ReadBuffer(SlotOf(id)),
                        layout_.value_bytes, totals_)) {
          ReadValue(id, static_cast<std::uint32_t>(pending_[SlotOf(id)].key_index));
          break;
        }
        out[n++] = Response{id, true, connection_.ReadBuffer(SlotOf(id)), layout_.value_bytes};
        ++totals_->verbs.gets;
        break;
    }
  }
  Answer answers[kPollBatch];
  const int received = connection_.PollAnswers(answers, max - n);
  for (int i = 0; i < received; ++i) out[n++] = PutAnswered(answers[i], kPilafAnswerSend, totals_);
  connection_.ReapMessages();
  return n;
}

}  // namespace
}  // namespace remote

Report RunPilafClient(Session& session) { return remote::RunRemoteClient<remote::PilafTransport>(session); }

}  // namespace rdmalab::kv
