// Key translation: a key of a device's MR table checked (registered, access, PD) and turned
// into this process's addresses, read between two loads of the entry's generation
// (layout.h). The send engine (send.cc), its fast paths (send_fast.h) and the ibv_wr_*
// batch call it; it calls nothing of theirs.
#include "softnic/verbs/key_translation.h"

#include <sched.h>

namespace softnic {
namespace {

enum class KeyRead { kTranslated, kRefused, kChanging };

// One read of the entry between two loads of its generation (layout.h).
KeyRead ReadKey(Runtime* runtime, uint32_t device, uint32_t key, uint32_t needed_access, uint32_t pd_id,
                bool local, KeyTranslation* out) {
  uint32_t index = key & (kMaxMrsPerDevice - 1);
  const MrEntry& mr = runtime->fabric()->devices[device].mrs[index];
  uint64_t generation = mr.generation.load(std::memory_order_acquire);
  if ((generation & 1) != 0) return KeyRead::kChanging;
  bool usable = mr.key.load(std::memory_order_relaxed) == key &&
                (mr.access & needed_access) == needed_access && mr.pd_id == pd_id;
  KeyTranslation translation;
  translation.key = key;
  translation.entry = &mr;
  translation.generation = generation;
  translation.first = mr.addr;
  translation.length = mr.length;
  uint64_t va = mr.va;
  uint64_t page_base = mr.page_base;
  uint64_t translation_generation = mr.translation_generation;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (mr.generation.load(std::memory_order_relaxed) != generation) return KeyRead::kChanging;
  if (!usable) return KeyRead::kRefused;
  uint8_t* base = local ? reinterpret_cast<uint8_t*>(page_base)
                        : runtime->MrBase(device, index, mr, translation_generation, generation);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (mr.generation.load(std::memory_order_relaxed) != generation) return KeyRead::kChanging;
  if (base == nullptr) return KeyRead::kRefused;
  translation.bias = reinterpret_cast<uintptr_t>(base) + (va - page_base) - translation.first;
  *out = translation;
  return KeyRead::kTranslated;
}

}  // namespace

// The one key check of the engine: the key is registered on `device`, carries
// `needed_access`, belongs to `pd_id`. Local keys translate to the owner's own addresses
// (a PD never spans processes, so a matching PD means the MR is ours). A change of the
// entry under way is waited out, as a sequence lock's reader retries: an operation racing
// a rereg meets the region as it was or as it becomes, never neither (the writer holds the
// entry for a few stores, but may be preempted there). Only an entry left changing past
// kKeyChangeWaitNs (its owner died mid-change, until the reclaim) refuses the key.
bool TranslateKey(Runtime* runtime, uint32_t device, uint32_t key, uint32_t needed_access,
                  uint32_t pd_id, bool local, KeyTranslation* out) {
  constexpr uint64_t kKeyChangeWaitNs = 1'000'000'000;
  uint64_t deadline_ns = 0;
  for (;;) {
    KeyRead read = ReadKey(runtime, device, key, needed_access, pd_id, local, out);
    if (read != KeyRead::kChanging) return read == KeyRead::kTranslated;
    uint64_t now_ns = NowNs();
    if (deadline_ns == 0) deadline_ns = now_ns + kKeyChangeWaitNs;
    if (now_ns > deadline_ns) return false;
    sched_yield();
  }
}

uint8_t* TranslateIntoCache(Runtime* runtime, uint32_t device, uint32_t key, uint32_t needed_access,
                            uint32_t pd_id, bool local, KeyTranslation* cache, uint64_t address, uint64_t bytes) {
  if (!TranslateKey(runtime, device, key, needed_access, pd_id, local, cache)) return nullptr;
  return TranslatedAddress(*cache, address, bytes);
}

}  // namespace softnic
