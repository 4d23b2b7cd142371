#include "kv/workload/keyhash.h"

namespace rdmalab::kv {

void WriteKeyText(std::uint64_t key_index, std::uint32_t key_bytes, char* out) {
  constexpr char kHexDigits[] = "0123456789abcdef";
  constexpr std::uint32_t kDigitsPerWord = 16;
  const KeyHash key = KeyHashOf(key_index);
  std::uint64_t word = key.lo;
  for (std::uint32_t i = 0; i < key_bytes; ++i) {
    const std::uint32_t digit = i % kDigitsPerWord;
    if (digit == 0 && i != 0) word = i == kDigitsPerWord ? key.hi : SplitMix64Mix(word ^ key.lo);
    // Most significant digit first, so that a 16-character key reads as lo in hex.
    out[i] = kHexDigits[(word >> (60 - 4 * digit)) & 0xf];
  }
}

std::string KeyText(std::uint64_t key_index, std::uint32_t key_bytes) {
  std::string text(key_bytes, '\0');
  WriteKeyText(key_index, key_bytes, text.data());
  return text;
}

}  // namespace rdmalab::kv
