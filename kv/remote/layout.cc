#include <algorithm>
#include <cmath>
#include <vector>

#include "kv/cache/mica.h"
#include "kv/core/client_core.h"
#include "kv/remote/cuckoo.h"
#include "kv/remote/remote.h"
#include "kv/workload/workload.h"
#include "rdma/error.h"

namespace rdmalab::kv::remote {

Design DesignOf(const std::string& system) {
  if (const auto& design = FindSystem(system).remote) return *design;
  std::string valid;
  for (const auto& read_based : Systems()) {
    if (read_based.remote) valid += (valid.empty() ? "" : ", ") + std::string(read_based.name);
  }
  Fail("system '", system, "' is not a READ-based system (", valid, ")");
}

Layout LayoutOf(const Options& o, std::uint32_t clients) {
  Layout l;
  l.design = DesignOf(o.system);
  l.keys = o.keys;
  l.value_bytes = static_cast<std::uint32_t>(o.value_size);
  l.clients = clients;
  const std::uint64_t sv = l.value_bytes;
  std::uint64_t end = 0;
  const auto place = [&end](std::uint64_t bytes) {
    const std::uint64_t at = end;
    end = (end + bytes + 63) / 64 * 64;
    return at;
  };
  // FaRM's neighbourhood READ of entry k covers entries k..k+H-1: H-1 spare entries at the end.
  const std::uint64_t entry_count = l.keys + kNeighbourhood - 1;
  switch (l.design) {
    case Design::kPilaf:
      l.full = o.store == "full";
      l.entry_bytes = l.full ? l.value_bytes + kCrcBytes : l.value_bytes;
      l.bucket_count = l.full ? static_cast<std::uint64_t>(static_cast<double>(l.keys) / kCuckooFill) + kCuckooHashes
                              : std::max<std::uint64_t>(l.keys / 3 + 1, 2);
      l.buckets = place(l.bucket_count * kPilafBucketBytes);
      l.entries = place(l.keys * l.entry_bytes);
      break;
    case Design::kFarm:
    case Design::kFarmVar: {
      const bool var = l.design == Design::kFarmVar;
      l.full = o.store == "full";
      l.preload = o.preload;
      if (l.full) {
        l.bucket_count = std::max<std::uint64_t>(
            static_cast<std::uint64_t>(std::ceil(static_cast<double>(l.keys) / o.farm_load_factor)), 1);
        l.entry_bytes = HopscotchBucketBytes(l.HopscotchPayloadBytes());
        l.entries = place(HopscotchBuckets(l.bucket_count) * l.entry_bytes);
      } else {
        l.entry_bytes = kKeyBytes + (var ? kPointerBytes : l.value_bytes);
        l.entries = place(entry_count * l.entry_bytes);
      }
      if (var) l.values = place(l.keys * (l.full ? sv + kCrcBytes : sv));
      break;
    }
    case Design::kDrtm:
    case Design::kDrtmWrite:
      l.entry_bytes = l.value_bytes;
      l.entries = place(l.keys * sv);
      l.lock_stride = o.lock_placement == "same-bits" ? kLockStrideSameBitsBytes : kLockStrideSpreadBytes;
      l.locks = place(std::uint64_t{kLockWords} * l.lock_stride);
      break;
    case Design::kHydraDb:
      l.entry_bytes = (l.value_bytes + kLeaseBytes + 7) / 8 * 8;
      l.entries = place(l.keys * l.entry_bytes);
      break;
  }
  if (l.design == Design::kFarm || l.design == Design::kFarmVar || l.design == Design::kHydraDb) {
    l.ring_slots = l.design == Design::kHydraDb ? static_cast<std::uint32_t>(o.window)
                                                : static_cast<std::uint32_t>(o.farm_buffer_slots);
    l.slot_bytes = SlotBytes(l.value_bytes);
    l.requests = place(std::uint64_t{clients} * l.ring_slots * l.slot_bytes);
  }
  l.bytes = std::max<std::uint64_t>(end, 64);
  return l;
}

std::uint64_t Layout::ValueOffset(std::uint64_t k) const {
  switch (design) {
    case Design::kFarm:
      return entries + k * entry_bytes + kKeyBytes;
    case Design::kFarmVar:
      return values + k * (full ? value_bytes + kCrcBytes : value_bytes);
    default:
      return entries + k * entry_bytes;
  }
}

void PreloadTable(const Layout& l, std::uint8_t* store, HopscotchTable& table) {
  if (!l.preload) return;
  std::vector<std::uint8_t> value(l.value_bytes);
  for (std::uint64_t k = 0; k < l.keys; ++k) {
    FillValue(k, kPreloadWriter, 0, value.data(), l.value_bytes);
    if (StoreInTable(l, store, table, static_cast<std::uint32_t>(k), value.data()) == HopscotchTable::Put::kFull) {
      Fail("the hopscotch table of ", l.bucket_count, " home buckets (H = ", kHopscotchNeighbourhood,
           ", --farm-load-factor ", static_cast<double>(l.keys) / static_cast<double>(l.bucket_count),
           ") has no place for key ", k, " of ", l.keys, " after ", table.displacements(),
           " displacements: lower --farm-load-factor");
    }
  }
}

namespace {

void CorruptHopscotch(const Layout& l, std::uint8_t* store, std::uint64_t keys) {
  const HopscotchTable table(store + l.entries, l.bucket_count, l.HopscotchPayloadBytes());
  for (std::uint64_t k = 0; k < std::min(keys, l.keys); ++k) {
    std::uint8_t* bucket = table.Find(KeyHashOf(k));
    if (bucket == nullptr) continue;  // not loaded (--preload=false)
    if (k % 2 == 1) {
      bucket[k % kKeyBytes] ^= 0x5A;
    } else if (l.design == Design::kFarm) {
      bucket[kKeyBytes + k % l.value_bytes] ^= 0x5A;
    } else {
      store[l.ValueOffset(k) + k % l.value_bytes] ^= 0x5A;
    }
  }
}

}  // namespace

void Preload(const Layout& l, std::uint8_t* store) {
  if (l.full && (l.design == Design::kFarm || l.design == Design::kFarmVar)) return;  // PreloadTable's
  std::vector<std::uint8_t> value(l.value_bytes);
  for (std::uint64_t k = 0; k < l.keys; ++k) {
    const KeyHash key = KeyHashOf(k);
    FillValue(k, kPreloadWriter, 0, value.data(), l.value_bytes);
    std::memcpy(store + l.ValueOffset(k), value.data(), l.value_bytes);
    std::uint8_t* entry = store + l.entries + k * l.entry_bytes;
    if (l.design == Design::kFarm || l.design == Design::kFarmVar) std::memcpy(entry, &key, kKeyBytes);
    if (l.design == Design::kFarmVar) {
      const std::uint64_t pointer = l.ValueOffset(k);
      std::memcpy(entry + kKeyBytes, &pointer, kPointerBytes);
    }
    if (l.design == Design::kHydraDb) {
      const std::uint64_t lease = 1;
      std::memcpy(entry + l.value_bytes, &lease, kLeaseBytes);
    }
    if (l.full) SealExtent(entry, l.value_bytes);
  }
  if (l.full) BuildCuckoo(store + l.buckets, l.bucket_count, l.keys, l.entries, l.entry_bytes);
}

void StoreValue(const Layout& l, std::uint8_t* store, std::uint32_t key_index, const std::uint8_t* value) {
  std::memcpy(store + l.ValueOffset(key_index), value, l.value_bytes);
  if (l.full) SealExtent(store + l.ValueOffset(key_index), l.value_bytes);
}

HopscotchTable::Put StoreInTable(const Layout& l, std::uint8_t* store, HopscotchTable& table, std::uint32_t key_index,
                                 const std::uint8_t* value) {
  if (l.design == Design::kFarm) return table.Store(KeyHashOf(key_index), value);
  // FaRM-VAR: the extent first, so that a client following a new bucket finds a sealed value.
  const std::uint64_t extent = l.ValueOffset(key_index);
  std::memcpy(store + extent, value, l.value_bytes);
  SealExtent(store + extent, l.value_bytes);
  return table.Store(KeyHashOf(key_index), reinterpret_cast<const std::uint8_t*>(&extent));
}

void Corrupt(const Layout& l, std::uint8_t* store, std::uint64_t keys) {
  if (!l.full) Fail("--corrupt ", keys, " needs --store full (emulated entries carry no checksum)");
  if (l.design == Design::kFarm || l.design == Design::kFarmVar) {
    CorruptHopscotch(l, store, keys);
    return;
  }
  // Even keys: a byte of the value in their extent; odd keys: a byte of their bucket.
  for (std::uint64_t k = 0; k < std::min(keys, l.keys); ++k) {
    if (k % 2 == 0) {
      store[l.ValueOffset(k) + k % l.value_bytes] ^= 0x5A;
      continue;
    }
    for (std::uint32_t h = 0; h < kCuckooHashes; ++h) {
      std::uint8_t* bucket = store + l.buckets + CuckooBucket(KeyHashOf(k), h, l.bucket_count) * kPilafBucketBytes;
      if (ParseBucket(bucket).key == KeyHashOf(k)) {
        bucket[k % kBucketCrcOffset] ^= 0x5A;
        break;
      }
    }
  }
}

void CheckRemote(Options& o) {
  if (o.key_size != static_cast<int>(kKeyBytes)) {
    Fail("--key-size ", o.key_size, ": ", o.system, " keys are 16-byte keyhashes (16)");
  }
  if (o.window > static_cast<int>(kMaxReadWindow)) {
    Fail("--window ", o.window, " exceeds ", kMaxReadWindow, ", the READs and atomics one RC QP keeps in flight (",
         o.system, ")");
  }
  if (o.keys >= kMaxKeys) Fail("--keys ", o.keys, " exceeds ", o.system, "'s limit of ", kMaxKeys - 1);
  if (o.farm_buffer_slots == 0) o.farm_buffer_slots = 2 * o.window;
  const bool farm = o.system == "farm" || o.system == "farm-var";
  if (o.store == "full" && o.system != "pilaf" && !farm) {
    Fail("--store full is built for pilaf, farm and farm-var; ", o.system, " runs emulated (--store emulated)");
  }
  const bool farm_full = farm && o.store == "full";
  if (farm_full && o.workers != 1) {
    Fail("--workers ", o.workers, ": FaRM full's hopscotch table has one writer, the server's one worker (--workers 1)");
  }
  if (!o.preload && !farm_full) {
    Fail("--preload=false empties FaRM full's hopscotch table (and HERD's cache); ", o.system, " with --store ", o.store,
         " always loads every key");
  }
  if (o.farm_load_factor != Options{}.farm_load_factor && !farm_full) {
    Fail("--farm-load-factor sizes FaRM full's hopscotch table (--system farm|farm-var --store full); ", o.system,
         " with --store ", o.store, " has none");
  }
  if (o.hydradb_miss_path && o.system != "hydradb") Fail("--hydradb-miss-path is HydraDB's; --system is ", o.system);
}

}  // namespace rdmalab::kv::remote
