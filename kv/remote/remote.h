// The READ-based systems of kv/README.md (Pilaf-em-OPT, FaRM-em, FaRM-em-VAR, DrTM-KV-em,
// HydraDB-em): what their server's store region holds and where, the PUT messages and their
// answers, and the constants the designs fix. Server (server.cc) and clients (kv/pilaf,
// kv/farm, kv/drtm, kv/hydradb) share this layout; nothing here posts a verb.
//
// Emulation, as herd14 emulates Pilaf and FaRM: the server keeps no hash table. Key k's
// entry sits at a fixed place (entry k), so a client knows where to READ without a lookup,
// but what it READs is real: the value the last PUT stored (or the preloaded one), so GETs
// are checked like HERD's. Bucket READs (Pilaf) read real memory whose content is ignored.
// --store full (Pilaf, FaRM, FaRM-VAR): real hash tables whose entries the client checks:
// Pilaf's 3-1 cuckoo table (cuckoo.h), FaRM's hopscotch table (hopscotch.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kv/core/options.h"
#include "kv/core/systems.h"
#include "kv/remote/hopscotch.h"
#include "kv/remote/verb_tally.h"
#include "kv/workload/keyhash.h"

namespace rdmalab::kv::remote {

using Design = RemoteDesign;
Design DesignOf(const std::string& system);  // from the system table (kv/core/systems.cc)

constexpr std::uint32_t kKeyBytes = sizeof(KeyHash);  // SK: the 16-byte keyhash
constexpr std::uint32_t kPointerBytes = 8;            // SP
constexpr std::uint32_t kNeighbourhood = kHopscotchNeighbourhood;  // FaRM's H
constexpr std::uint32_t kPilafBucketBytes = 32;
// Pilaf-em-OPT: 3-1 cuckoo hashing needs the second bucket for 60% of GETs (1.6 bucket READs).
constexpr std::uint32_t kPilafSecondBucketPerTen = 6;
constexpr std::uint32_t kLeaseBytes = 8;  // HydraDB's validity word after the value
constexpr std::uint32_t kLockWords = 4096;  // Connect-IB's atomic lock buckets (12 address bits)
constexpr std::uint32_t kLockStrideSameBitsBytes = 4096;  // every lock word shares the 12 low bits
constexpr std::uint32_t kLockStrideSpreadBytes = 8;
constexpr std::uint32_t kMaxReadWindow = 16;  // outstanding READs/atomics per RC QP (max_rd_atomic)
constexpr std::uint64_t kMaxKeys = 1ull << 31;

// A PUT (or HydraDB's address lookup) as the client sends it: SK+SV bytes behind this
// header, which carries what the emulated store needs (the client core's request id, echoed
// in the answer, and the key's index, the entry's place).
enum class MessageKind : std::uint32_t { kPut = 1, kLookup = 2 };
struct MessageHeader {
  std::uint32_t id;
  std::uint32_t key_index;
  MessageKind kind;
  std::uint32_t value_bytes;
  KeyHash key;
};
static_assert(sizeof(MessageHeader) == 32);

// The answer: a SEND (Pilaf) or a WRITE into the client's answer slot SlotOf(id) (FaRM,
// HydraDB). `consumed` is how many messages the server has taken from this client's
// circular buffer (the client's credit); `entry_offset` answers a lookup. The id comes last:
// a WRITE lands in increasing address order, so a client that sees the id sees the rest.
constexpr std::uint32_t kStatusStored = 1;
constexpr std::uint32_t kStatusTableFull = 2;  // FaRM full: the hopscotch table found no place for the key
struct Answer {
  std::uint64_t entry_offset;
  std::uint32_t status;
  std::uint32_t consumed;
  std::uint32_t pad;
  std::uint32_t id;
};
static_assert(sizeof(Answer) == 24);

// A circular-buffer slot (FaRM, HydraDB): the message, then, in the slot's last 4 bytes, a
// stamp (the message's number in this client's stream + 1) that the server polls. WRITEs
// land in increasing address order and the server zeroes the stamp when it takes the
// message, so a stamp equal to the expected one means the whole message has landed.
inline std::uint32_t SlotBytes(std::uint32_t value_bytes) {
  return (sizeof(MessageHeader) + value_bytes + 4 + 7) / 8 * 8;
}
inline std::uint32_t StampOf(std::uint64_t message_number) {
  return static_cast<std::uint32_t>(message_number % 0xFFFFFFFFull) + 1;
}

// The server's store region, offsets from its start.
struct Layout {
  Design design = Design::kPilaf;
  std::uint64_t keys = 0;
  std::uint32_t value_bytes = 0;
  std::uint32_t entry_bytes = 0;       // entry k at entries + k * entry_bytes
  std::uint64_t entries = 0;           // FaRM: key+value; FaRM-VAR: key+pointer; HydraDB: value+lease; else value
                                       // (FaRM full: the hopscotch table's buckets)
  std::uint64_t values = 0;            // FaRM-VAR: the out-of-table values (SV each; full: sealed extents)
  std::uint64_t buckets = 0;           // Pilaf: the cuckoo buckets READ before the value
  std::uint64_t bucket_count = 0;      // Pilaf: cuckoo buckets; FaRM full: hopscotch home buckets
  std::uint64_t locks = 0;             // DrTM: kLockWords lock words
  std::uint32_t lock_stride = 0;
  std::uint64_t requests = 0;          // FaRM, HydraDB: per client, `ring_slots` slots
  std::uint32_t ring_slots = 0;
  std::uint32_t slot_bytes = 0;
  std::uint32_t clients = 0;
  bool full = false;  // --store full: Pilaf's cuckoo table and sealed extents, FaRM's hopscotch table
  bool preload = true;  // FaRM full: --preload=false starts with an empty table
  std::uint64_t bytes = 0;

  // Where key k's value bytes are (FaRM full: nowhere fixed, its bucket holds them).
  std::uint64_t ValueOffset(std::uint64_t k) const;
  // FaRM full: the bucket payload (value or extent offset) and the first READ of key's GET.
  std::uint32_t HopscotchPayloadBytes() const { return design == Design::kFarmVar ? kPointerBytes : value_bytes; }
  std::uint64_t NeighbourhoodOffset(const KeyHash& key) const {
    return entries + HopscotchHome(key, bucket_count) * entry_bytes;
  }
  std::uint64_t LockOffset(std::uint64_t k) const { return locks + (k % kLockWords) * lock_stride; }
  std::uint64_t SlotOffset(std::uint32_t client, std::uint64_t message_number) const {
    return requests + (std::uint64_t{client} * ring_slots + message_number % ring_slots) * slot_bytes;
  }
};
Layout LayoutOf(const Options& options, std::uint32_t clients);
// Fills the store: every key's entry with its preloaded value (and key, pointer, lease);
// FaRM full: nothing (PreloadTable).
void Preload(const Layout& layout, std::uint8_t* store);
// FaRM full: inserts every key into the hopscotch table, as PUTs insert them (unless
// layout.preload is false); fails naming the key the table has no place for.
void PreloadTable(const Layout& layout, std::uint8_t* store, HopscotchTable& table);
// A PUT's value into key k's place (the emulated store's and Pilaf full's whole PUT).
void StoreValue(const Layout& layout, std::uint8_t* store, std::uint32_t key_index, const std::uint8_t* value);
// FaRM full's PUT: the value into key k's bucket (FaRM) or its sealed extent, whose offset goes
// into the bucket (FaRM-VAR), inserting the key if it is new.
HopscotchTable::Put StoreInTable(const Layout& layout, std::uint8_t* store, HopscotchTable& table,
                                 std::uint32_t key_index, const std::uint8_t* value);

// Full stores, server: flips one byte of the first `keys` keys: the checksum test. Even keys:
// a byte of the value (Pilaf and FaRM-VAR: in the extent; FaRM: in the bucket); odd keys: of
// the bucket (Pilaf: its bucket; FaRM: its key, so that only the miss path's checks catch it).
void Corrupt(const Layout& layout, std::uint8_t* store, std::uint64_t keys);

// The checks every READ-based system makes of the options (fails naming the conflict).
void CheckRemote(Options& options);


// Each design's verb classes (verb_classes.cc), indexed by these names in its tally.
enum PilafVerbs : std::uint8_t { kPilafBucketRead, kPilafValueRead, kPilafPutSend, kPilafAnswerSend };
enum FarmVerbs : std::uint8_t { kFarmNeighbourhoodRead, kFarmValueRead, kFarmPutWrite, kFarmAnswerWrite, kFarmHomeRead };
enum DrtmVerbs : std::uint8_t { kDrtmValueRead, kDrtmLockCas, kDrtmValueWrite, kDrtmUnlockCas };
enum HydraVerbs : std::uint8_t { kHydraValueRead, kHydraPutWrite, kHydraAnswerWrite, kHydraLookupWrite, kHydraLookupAnswer };
std::vector<VerbClass> VerbClassesOf(const Options& options);

}  // namespace rdmalab::kv::remote
