// memcached's two protocols (protocol.txt and the binary protocol of memcached 1.4+, which
// 1.6 still serves on the same port) as codecs for the TCP transport (codec.h), and the
// `stats` exchange of the server role.
#pragma once

#include <nlohmann/json.hpp>

#include "kv/tcp/codec.h"
#include "kv/tcp/socket.h"

namespace rdmalab::kv::tcp {

// "get <key>\r\n"; "set <key> 0 0 <n>\r\n<n bytes>\r\n" (framed by length: binary safe).
struct MemcachedText : TextFraming {
  static constexpr const char* kName = "memcached text protocol";
  static std::size_t EncodeGet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes);
  static std::size_t EncodeSet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes,
                               const std::uint8_t* value, std::uint32_t value_bytes);
  static Reply Parse(const std::uint8_t* data, std::size_t size, bool get);
};

// 24-byte big-endian headers; GET (0x00) and SET (0x01, 8 bytes of extras: flags, expiry).
struct MemcachedBinary {
  static constexpr const char* kName = "memcached binary protocol";
  static constexpr std::size_t kHeaderBytes = 24;
  static constexpr std::size_t kSetExtrasBytes = 8;
  static std::size_t RequestBytes(std::uint32_t key_bytes, std::uint32_t value_bytes) {
    return kHeaderBytes + kSetExtrasBytes + key_bytes + value_bytes;
  }
  // A GET reply carries 4 bytes of flags; an error reply a message in place of the value.
  static std::size_t ReplyBytes(std::uint32_t key_bytes, std::uint32_t value_bytes) {
    return kHeaderBytes + key_bytes + value_bytes + kFramingBytes;
  }
  static std::size_t EncodeGet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes);
  static std::size_t EncodeSet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes,
                               const std::uint8_t* value, std::uint32_t value_bytes);
  static Reply Parse(const std::uint8_t* data, std::size_t size, bool get);
  static std::string Describe(const std::uint8_t* data, std::size_t size);
};

// memcached's `stats` over a connection of its own (text protocol, whatever the run's):
// every "STAT name value" line, numbers as numbers.
nlohmann::json MemcachedStats(const Endpoint& endpoint, int timeout_ms);

}  // namespace rdmalab::kv::tcp
