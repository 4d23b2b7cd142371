// What every TCP store's protocol (memcached text, memcached binary, RESP) provides to the
// transport, duck-typed so the transport is a template and its hot path has no virtual call:
//
//   static constexpr const char* kName;   // "memcached text protocol"
//   static std::size_t RequestBytes(std::uint32_t key_bytes, std::uint32_t value_bytes);   // at most
//   static std::size_t ReplyBytes(std::uint32_t key_bytes, std::uint32_t value_bytes);     // at most
//   static std::size_t EncodeGet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes);
//   static std::size_t EncodeSet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes,
//                                const std::uint8_t* value, std::uint32_t value_bytes);
//   static Reply Parse(const std::uint8_t* data, std::size_t size, bool get);  // the first reply in data
//   static std::string Describe(const std::uint8_t* data, std::size_t size);   // a reply, for errors
//
// Encoders write the key text of keyhash.h (WriteKeyText) and the value as bytes (binary
// safe: every protocol frames values by length). Parse reads a reply from its first byte
// each time it is called, so a reply split over several reads is simply parsed again once
// more bytes have arrived; it allocates nothing and never reads beyond `size`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace rdmalab::kv::tcp {

enum class ReplyStatus : std::uint8_t {
  kIncomplete,  // more bytes needed
  kHit,         // GET found the key: value, value_bytes
  kMiss,        // GET: no such key
  kStored,      // SET done
  kNotStored,   // SET refused by the store (counted as puts_refused, not an error)
  kError,       // a protocol error or an error reply: the run fails naming it
};

struct Reply {
  ReplyStatus status = ReplyStatus::kIncomplete;
  std::uint32_t bytes = 0;  // the whole reply, once complete
  const std::uint8_t* value = nullptr;
  std::uint32_t value_bytes = 0;
};

// A reply line longer than this is not one any of our requests can get.
inline constexpr std::size_t kMaxReplyLineBytes = 512;
// Room for the protocol text around a key and a value in one request or reply.
inline constexpr std::size_t kFramingBytes = 64;

// Decimal digits of v at out; returns how many.
inline std::size_t WriteDecimal(std::uint8_t* out, std::uint32_t v) {
  std::uint8_t digits[10];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<std::uint8_t>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (std::size_t i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  return n;
}

// Parses the digits at data[*at..end) (at least one, at most 9) and advances *at; false if none.
inline bool ReadDecimal(const std::uint8_t* data, std::size_t end, std::size_t* at, std::uint32_t* value) {
  std::uint32_t v = 0;
  std::size_t i = *at;
  while (i < end && i - *at < 9 && data[i] >= '0' && data[i] <= '9') v = v * 10 + (data[i++] - '0');
  if (i == *at) return false;
  *at = i;
  *value = v;
  return true;
}

// The text protocols (memcached text, RESP): a few dozen bytes of text around key and value,
// error replies described by their first line.
struct TextFraming {
  static std::size_t RequestBytes(std::uint32_t key_bytes, std::uint32_t value_bytes) {
    return key_bytes + value_bytes + kFramingBytes;
  }
  static std::size_t ReplyBytes(std::uint32_t key_bytes, std::uint32_t value_bytes) {
    return key_bytes + value_bytes + kFramingBytes;
  }
  static std::string Describe(const std::uint8_t* data, std::size_t size);
};

template <std::size_t N>
std::size_t PutText(std::uint8_t* out, const char (&text)[N]) {
  std::memcpy(out, text, N - 1);
  return N - 1;
}

// "<n>\r\n<n bytes>\r\n": how both text protocols frame a value by its length.
inline std::size_t PutSizedValue(std::uint8_t* out, const std::uint8_t* value, std::uint32_t value_bytes) {
  std::size_t n = WriteDecimal(out, value_bytes);
  n += PutText(out + n, "\r\n");
  std::memcpy(out + n, value, value_bytes);
  n += value_bytes;
  return n + PutText(out + n, "\r\n");
}

// The first line of a text reply: true with its length (without "\r\n") in *line_bytes and
// *reply set to kError over the line's bytes, for the caller to settle; false with *reply
// kIncomplete (no whole line yet) or kError (too long, or no '\r' before the '\n').
bool FirstLine(const std::uint8_t* data, std::size_t size, Reply* reply, std::size_t* line_bytes);
// The first line of data, printable and bounded, for error messages: "SERVER_ERROR out of memory".
std::string PrintableLine(const std::uint8_t* data, std::size_t size);
// A statistic as the store printed it: a number when it is one, else the text.
nlohmann::json StatisticValue(const std::string& text);

}  // namespace rdmalab::kv::tcp
