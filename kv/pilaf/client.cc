// Pilaf-em-OPT's client (spec: systems.md): a GET READs a 32-byte cuckoo bucket, READs the
// second bucket for 6 GETs in 10 (3-1 cuckoo hashing's 1.6 bucket READs on average), only
// once the first has completed, then READs the SV-byte value: 2.6 RC READs per GET. A PUT is
// a UC SEND of the key and value, inline, signaled one in --cq-mod, answered by a UC SEND.
// --store full: the buckets are a real 3-1 cuckoo table (kv/remote/cuckoo.h); a GET READs the
// key's 3 candidate buckets in turn until one holds the key, then the extent it points to,
// checking each READ's CRC64; a failing check is READ again (a race with the server's
// update), and one that keeps failing is counted as corrupt memory and answered as a miss.
#include "kv/core/systems.h"
#include "kv/remote/client.h"
#include "kv/remote/cuckoo.h"
#include "kv/remote/message.h"

namespace rdmalab::kv {
namespace remote {
namespace {

enum PilafStep : std::uint32_t { kFirstBucket, kSecondBucket, kValue, kThirdBucket };

class PilafTransport : public TransportBase {
 public:
  PilafTransport(Session& session, std::uint32_t client, const Layout& layout, ClientTotals* totals)
      : TransportBase(session, client, layout, totals),
        extents_(session.options().window),
        sealed_(session.options().window, session.clock()) {}

  // A lost PUT or answer (UC) is sent again; GETs travel over RC and are never lost.
  static constexpr bool kLosesMessages = true;
  void Issue(const Request& request) {
    pending_[SlotOf(request.id)] = request;
    sealed_.Start(SlotOf(request.id));
    if (request.get && layout_.full) {
      ReadCuckooBucket(request, 0);
    } else if (request.get) {
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
  // Pilaf full: bucket h (0..2) of the request's key.
  void ReadCuckooBucket(const Request& request, std::uint32_t h) {
    const std::uint64_t bucket = layout_.buckets + CuckooBucket(request.key, h, layout_.bucket_count) * kPilafBucketBytes;
    const std::uint32_t step = h == 0 ? kFirstBucket : h == 1 ? kSecondBucket : kThirdBucket;
    connection_.Read(ReadWrId(request.id, step), bucket, connection_.ReadBuffer(SlotOf(request.id)), kPilafBucketBytes);
    ++totals_->verbs.wrs[kPilafBucketRead];
  }
  void ReadExtent(std::uint32_t id, std::uint64_t extent) {
    extents_[SlotOf(id)] = extent;
    connection_.Read(ReadWrId(id, kValue), extent, connection_.ReadBuffer(SlotOf(id)), layout_.entry_bytes);
    ++totals_->verbs.wrs[kPilafValueRead];
  }
  // Pilaf full: one completion of a GET's READs; returns whether the GET is answered in `out`.
  bool FullStep(std::uint32_t id, std::uint32_t step, Response& out);
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

  std::vector<std::uint64_t> extents_;   // Pilaf full, per window slot: the extent being READ
  SealedReads sealed_;                   // Pilaf full: READs made again after a failed CRC64
  std::uint32_t second_bucket_credit_ = 0;  // tenths: a GET adds 6 and READs the second bucket at 10
};

bool PilafTransport::FullStep(std::uint32_t id, std::uint32_t step, Response& out) {
  const std::uint32_t slot = SlotOf(id);
  const Request& request = pending_[slot];
  const std::uint8_t* read = connection_.ReadBuffer(slot);
  if (step == kValue) {
    if (!ExtentChecks(read, layout_.value_bytes)) {
      if (sealed_.Again(slot, totals_)) {
        ReadExtent(id, extents_[slot]);
        return false;
      }
      out = Response{id, false, nullptr, 0};
      return true;
    }
    out = Response{id, true, read, layout_.value_bytes};
    return true;
  }
  const std::uint32_t h = step == kFirstBucket ? 0 : step == kSecondBucket ? 1 : 2;
  const CuckooBucketView bucket = ParseBucket(read);
  if (!bucket.checks) {
    if (sealed_.Again(slot, totals_)) {
      ReadCuckooBucket(request, h);
      return false;
    }
    out = Response{id, false, nullptr, 0};
    return true;
  }
  if (bucket.key == request.key) {
    ReadExtent(id, bucket.extent);
    return false;
  }
  if (h + 1 < kCuckooHashes) {
    ReadCuckooBucket(request, h + 1);
    return false;
  }
  out = Response{id, false, nullptr, 0};  // in none of its buckets: a miss
  return true;
}

int PilafTransport::Poll(Response* out, int max) {
  int n = 0;
  connection_.ForEachDone(max, [&](std::uint32_t id, std::uint32_t, std::uint32_t step) {
    if (layout_.full) {
      if (FullStep(id, step, out[n])) {
        ++n;
        ++totals_->verbs.gets;
      }
      return;
    }
    switch (step) {
      case kFirstBucket:
      case kSecondBucket: {
        const bool second = step == kFirstBucket &&
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
  });
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
