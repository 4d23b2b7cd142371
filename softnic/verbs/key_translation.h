// Key translation, the one key check of the send engine, its fast paths and the ibv_wr_*
// batch: a key of a device's MR table, checked and turned into this process's addresses
// (key_translation.cc), and the cached translations the fast paths look keys up in.
#pragma once

#include "softnic/verbs/internal.h"

namespace softnic {

// Key checks: a translation is valid for [first, first + length) while its MR
// table entry is still at the generation it was read at (layout.h, MrEntry).
bool TranslateKey(Runtime* runtime, uint32_t device, uint32_t key, uint32_t needed_access,
                  uint32_t pd_id, bool local, KeyTranslation* out);

// `address` through a translation: the range check alone. A translation just made
// (TranslateKey) is used so, without LookupKey's generation check: a change begun since is
// one the operation has already met before.
[[gnu::always_inline]] inline uint8_t* TranslatedAddress(const KeyTranslation& t, uint64_t address, uint64_t bytes) {
  if (address < t.first || bytes > t.length || address - t.first > t.length - bytes) return nullptr;
  return reinterpret_cast<uint8_t*>(address + t.bias);
}

[[gnu::always_inline]] inline uint8_t* LookupKey(const KeyTranslation& t, uint32_t key, uint64_t address,
                                                uint64_t bytes) {
  if (t.key != key || t.entry->generation.load(std::memory_order_acquire) != t.generation) {
    return nullptr;
  }
  return TranslatedAddress(t, address, bytes);
}

// Cold: translates `key` into `cache` and looks the range up; null if refused.
uint8_t* TranslateIntoCache(Runtime* runtime, uint32_t device, uint32_t key, uint32_t needed_access,
                            uint32_t pd_id, bool local, KeyTranslation* cache, uint64_t address, uint64_t bytes);

}  // namespace softnic
