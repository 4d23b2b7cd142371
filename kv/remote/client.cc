#include "kv/remote/client.h"

#include <utility>

namespace rdmalab::kv::remote {

using nlohmann::json;

RingWriter::RingWriter(Connection& connection, const Layout& layout, std::uint32_t client, std::uint32_t window)
    : connection_(connection), layout_(layout), client_(client), waiting_(window), expected_(window, 0) {}

void RingWriter::Write(std::uint32_t slot) {
  std::uint8_t* message = connection_.MessageBuffer(slot);
  const std::uint32_t stamp = StampOf(written_);
  std::memcpy(message + layout_.slot_bytes - 4, &stamp, 4);
  while (!connection_.MessageRoom()) connection_.ReapMessages();
  connection_.WriteMessage(layout_.SlotOffset(client_, written_), message, layout_.slot_bytes);
  ++written_;
}

void RingWriter::Send(std::uint32_t slot, std::uint32_t id) {
  expected_[slot] = id;
  connection_.ClearAnswer(slot);
  if (waiting_count_ == 0 && written_ - consumed_ < layout_.ring_slots) {
    Write(slot);
    return;
  }
  ++backpressure_waits_;
  waiting_[(waiting_head_ + waiting_count_) % waiting_.size()] = slot;
  ++waiting_count_;
}

int RingWriter::Poll(Answer* out, int max) {
  int n = 0;
  for (std::uint32_t slot = 0; slot < expected_.size() && n < max; ++slot) {
    if (expected_[slot] == 0) continue;
    const volatile Answer* answer = connection_.AnswerSlot(slot);
    if (answer->id != expected_[slot]) continue;
    std::atomic_signal_fence(std::memory_order_acquire);
    out[n].id = answer->id;
    out[n].status = answer->status;
    out[n].consumed = answer->consumed;
    out[n].entry_offset = answer->entry_offset;
    consumed_ = std::max<std::uint64_t>(consumed_, answer->consumed);
    expected_[slot] = 0;
    ++n;
  }
  while (waiting_count_ != 0 && written_ - consumed_ < layout_.ring_slots) {
    Write(waiting_[waiting_head_]);
    waiting_head_ = (waiting_head_ + 1) % static_cast<std::uint32_t>(waiting_.size());
    --waiting_count_;
  }
  connection_.ReapMessages();
  return n;
}

// Every count beside the verbs, as its JSON names it: Add, Json and FromJson walk this list.
constexpr std::pair<const char*, std::uint64_t ClientTotals::*> kTotalFields[] = {
    {"torn_rereads", &ClientTotals::torn_rereads}, {"checksum_failures", &ClientTotals::checksum_failures},
    {"backpressure_waits", &ClientTotals::backpressure_waits}, {"lock_retries", &ClientTotals::lock_retries},
    {"lock_failures", &ClientTotals::lock_failures}, {"table_full", &ClientTotals::table_full}};

void ClientTotals::Add(const ClientTotals& o) {
  verbs.Add(o.verbs);
  for (const auto& [name, field] : kTotalFields) this->*field += o.*field;
}

json ClientTotals::Json() const {
  json out = {{"verbs", verbs.Json()}};
  for (const auto& [name, field] : kTotalFields) out[name] = this->*field;
  return out;
}

ClientTotals ClientTotals::FromJson(const json& j) {
  ClientTotals t;
  t.verbs = VerbTally::FromJson(j.at("verbs"));
  for (const auto& [name, field] : kTotalFields) t.*field = j.at(name);
  return t;
}

void ClientTotals::Report(const Options& o, ResultRow& row, json& notes) const {
  row.extra["verbs"] = VerbsJson(VerbClassesOf(o), verbs);
  row.extra["verbs_per_op"] = row.extra["verbs"]["verbs_per_op"];
  row.extra["server_pcie_bytes_per_op"] = row.extra["verbs"]["server_pcie_bytes_per_op"];
  row.extra["torn_rereads"] = torn_rereads;
  row.extra["checksum_failures"] = checksum_failures;
  if (checksum_failures != 0) {
    notes.push_back(std::to_string(checksum_failures) + " GETs found a bucket or value failing its CRC64 after " +
                    std::to_string(kSealedRereadMs) + " ms of READs: the server's memory is corrupt; answered as misses");
  }
  row.extra["backpressure_waits"] = backpressure_waits;
  row.extra["lock_retries"] = lock_retries;
  row.extra["lock_failures"] = lock_failures;
  if (lock_failures != 0) {
    notes.push_back(std::to_string(lock_failures) + " PUTs refused: their lock was still taken after --lock-retries " +
                    std::to_string(o.lock_retries) + " retries");
  }
  row.extra["table_full"] = table_full;
  if (table_full != 0) {
    notes.push_back(std::to_string(table_full) + " PUTs refused: the hopscotch table had no bucket within H = " +
                    std::to_string(kHopscotchNeighbourhood) + " of their key's home (table full; --farm-load-factor)");
  }
  if (backpressure_waits != 0) {
    notes.push_back(std::to_string(backpressure_waits) + " PUTs waited for a free slot of the server's circular buffer");
  }
}

}  // namespace rdmalab::kv::remote
