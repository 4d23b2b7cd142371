// Redis's RESP2 as a codec for the TCP transport (codec.h): commands are arrays of bulk
// strings (binary safe by length), GET answers a bulk string or the null bulk "$-1",
// SET answers "+OK"; "-ERR ..." is an error reply. And the server role's `INFO`.
#pragma once

#include <nlohmann/json.hpp>

#include "kv/tcp/codec.h"
#include "kv/tcp/socket.h"

namespace rdmalab::kv::tcp {

struct Resp : TextFraming {
  static constexpr const char* kName = "RESP";
  static std::size_t EncodeGet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes);
  static std::size_t EncodeSet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes,
                               const std::uint8_t* value, std::uint32_t value_bytes);
  static Reply Parse(const std::uint8_t* data, std::size_t size, bool get);
};

// `INFO <section>` over a connection of its own: every "name:value" line, numbers as numbers.
nlohmann::json RedisInfo(const Endpoint& endpoint, const std::string& section, int timeout_ms);

}  // namespace rdmalab::kv::tcp
