// Writing a PUT (or lookup) message into a window slot's message buffer.
#pragma once

#include <cstring>

#include "kv/core/client_core.h"
#include "kv/remote/remote.h"

namespace rdmalab::kv::remote {

// Returns the message's bytes (header and value).
inline std::uint32_t EncodeMessage(std::uint8_t* out, const Request& request, MessageKind kind) {
  MessageHeader header{request.id, static_cast<std::uint32_t>(request.key_index), kind, request.value_bytes,
                       request.key};
  std::memcpy(out, &header, sizeof(header));
  if (request.value_bytes != 0) std::memcpy(out + sizeof(header), request.value, request.value_bytes);
  return static_cast<std::uint32_t>(sizeof(header)) + request.value_bytes;
}

}  // namespace rdmalab::kv::remote
