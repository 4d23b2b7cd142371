// DrTM-KV-em's client (spec: systems.md, guide16's emulation): a GET is one RC READ of the
// value (the client's cache of the index always hits); a PUT takes the key's lock word with
// a CAS (0 -> this client), and releases it with a second CAS; `drtm-write`, the labelled
// variant, WRITEs the value between the two. A CAS that finds the lock taken is retried at
// once, at most --lock-retries times (counted); then the PUT is refused (counted, reported).
// Lock words are kLockWords apart by 8 bytes, or by 4096 (--lock-placement same-bits: every
// lock word shares its 12 low address bits, the case Connect-IB serializes).
#include "kv/core/systems.h"
#include "kv/remote/client.h"

namespace rdmalab::kv {
namespace remote {
namespace {

enum DrtmStep : std::uint32_t { kReadValue, kLock, kUnlock };

class DrtmTransport : public TransportBase {
 public:
  DrtmTransport(Session& session, std::uint32_t client, const Layout& layout, ClientTotals* totals)
      : TransportBase(session, client, layout, totals),
        owner_(std::uint64_t{client} + 1),
        lock_retries_(static_cast<std::uint32_t>(session.options().lock_retries)),
        write_value_(layout.design == Design::kDrtmWrite),
        attempts_(session.options().window, 0) {}

  static constexpr bool kLosesMessages = false;  // RC only
  void Issue(const Request& request) {
    const std::uint32_t slot = SlotOf(request.id);
    pending_[slot] = request;
    if (request.get) {
      Read(request);
      return;
    }
    attempts_[slot] = 0;
    Lock(request);
  }
  void Resend(const Request&) {}
  int Poll(Response* out, int max);

 private:
  void Read(const Request& request) {
    connection_.Read(ReadWrId(request.id, kReadValue), layout_.ValueOffset(request.key_index),
                     connection_.ReadBuffer(SlotOf(request.id)), layout_.value_bytes);
    ++totals_->verbs.wrs[kDrtmValueRead];
  }
  void Lock(const Request& request) {
    connection_.Cas(ReadWrId(request.id, kLock), layout_.LockOffset(request.key_index), 0, owner_, SlotOf(request.id));
    ++totals_->verbs.wrs[kDrtmLockCas];
  }
  void WriteAndUnlock(const Request& request) {
    const std::uint32_t slot = SlotOf(request.id);
    if (write_value_) {
      std::uint8_t* value = connection_.MessageBuffer(slot);
      std::memcpy(value, request.value, request.value_bytes);
      connection_.WriteUnsignaled(layout_.ValueOffset(request.key_index), value, request.value_bytes);
      ++totals_->verbs.wrs[kDrtmValueWrite];
    }
    connection_.Cas(ReadWrId(request.id, kUnlock), layout_.LockOffset(request.key_index), owner_, 0, slot);
    ++totals_->verbs.wrs[kDrtmUnlockCas];
  }

  std::uint64_t owner_;
  std::uint32_t lock_retries_;
  bool write_value_;
  std::vector<std::uint32_t> attempts_;  // per window slot: lock CASes that found the lock taken
};

int DrtmTransport::Poll(Response* out, int max) {
  int n = 0;
  connection_.ForEachDone(max, [&](std::uint32_t id, std::uint32_t slot, std::uint32_t step) {
    switch (step) {
      case kReadValue:
        if (torn_.Again(slot, pending_[slot].key_index, connection_.ReadBuffer(slot), layout_.value_bytes, totals_)) {
          Read(pending_[slot]);
          break;
        }
        out[n++] = Response{id, true, connection_.ReadBuffer(slot), layout_.value_bytes};
        ++totals_->verbs.gets;
        break;
      case kLock:
        if (*connection_.AtomicResult(slot) == 0) {
          WriteAndUnlock(pending_[slot]);
        } else if (attempts_[slot]++ < lock_retries_) {
          ++totals_->lock_retries;
          Lock(pending_[slot]);
        } else {
          ++totals_->lock_failures;
          ++totals_->verbs.puts;
          out[n++] = Response{id, false, nullptr, 0};
        }
        break;
      default:
        if (*connection_.AtomicResult(slot) != owner_) {
          Fail("DrTM unlock found lock word ", *connection_.AtomicResult(slot), " where this client (", owner_,
               ") held the lock: another writer broke the lock protocol");
        }
        out[n++] = Response{id, true, nullptr, 0};
        ++totals_->verbs.puts;
        break;
    }
  });
  return n;
}

}  // namespace
}  // namespace remote

Report RunDrtmClient(Session& session) { return remote::RunRemoteClient<remote::DrtmTransport>(session); }

}  // namespace rdmalab::kv
