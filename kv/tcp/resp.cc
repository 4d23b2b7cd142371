#include "kv/tcp/resp.h"

#include <cstring>
#include <string>
#include <vector>

#include "kv/workload/keyhash.h"
#include "rdma/error.h"

namespace rdmalab::kv::tcp {
namespace {

// "$<n>\r\n<n bytes>\r\n" with the key text as the bytes.
std::size_t PutKey(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes) {
  std::size_t n = PutText(out, "$");
  n += WriteDecimal(out + n, key_bytes);
  n += PutText(out + n, "\r\n");
  WriteKeyText(key_index, key_bytes, reinterpret_cast<char*>(out + n));
  n += key_bytes;
  return n + PutText(out + n, "\r\n");
}

}  // namespace

std::size_t Resp::EncodeGet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes) {
  const std::size_t n = PutText(out, "*2\r\n$3\r\nGET\r\n");
  return n + PutKey(out + n, key_index, key_bytes);
}

std::size_t Resp::EncodeSet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes,
                            const std::uint8_t* value, std::uint32_t value_bytes) {
  std::size_t n = PutText(out, "*3\r\n$3\r\nSET\r\n");
  n += PutKey(out + n, key_index, key_bytes);
  n += PutText(out + n, "$");
  return n + PutSizedValue(out + n, value, value_bytes);
}

Reply Resp::Parse(const std::uint8_t* data, std::size_t size, bool get) {
  Reply reply;
  std::size_t line = 0;
  if (!FirstLine(data, size, &reply, &line)) return reply;
  const std::size_t header = reply.bytes;
  if (!get) {
    if (line == 3 && std::memcmp(data, "+OK", 3) == 0) reply.status = ReplyStatus::kStored;
    return reply;
  }
  if (data[0] != '$') return reply;
  if (line == 3 && data[1] == '-' && data[2] == '1') {
    reply.status = ReplyStatus::kMiss;
    return reply;
  }
  std::size_t at = 1;
  std::uint32_t value_bytes = 0;
  if (!ReadDecimal(data, line, &at, &value_bytes) || at != line) return reply;
  const std::size_t total = header + value_bytes + 2;
  if (size < total) {
    reply.status = ReplyStatus::kIncomplete;
    return reply;
  }
  if (data[total - 2] != '\r' || data[total - 1] != '\n') return reply;
  reply.status = ReplyStatus::kHit;
  reply.bytes = static_cast<std::uint32_t>(total);
  reply.value = data + header;
  reply.value_bytes = value_bytes;
  return reply;
}

nlohmann::json RedisInfo(const Endpoint& endpoint, const std::string& section, int timeout_ms) {
  constexpr std::size_t kInfoBytes = 1 << 16;
  const std::string request =
      "*2\r\n$4\r\nINFO\r\n$" + std::to_string(section.size()) + "\r\n" + section + "\r\n";
  FileDescriptor fd = Connect(endpoint);
  SendAll(fd.get(), reinterpret_cast<const std::uint8_t*>(request.data()), request.size(), endpoint, timeout_ms);
  std::vector<std::uint8_t> buffer(kInfoBytes);
  std::size_t size = 0;
  Reply reply;
  while ((reply = Resp::Parse(buffer.data(), size, true)).status == ReplyStatus::kIncomplete) {
    if (size == buffer.size()) Fail(endpoint.Describe(), " sent more than ", kInfoBytes, " bytes of INFO");
    size = ReceiveSome(fd.get(), buffer.data(), size, buffer.size(), endpoint, timeout_ms);
  }
  if (reply.status != ReplyStatus::kHit) {
    Fail(endpoint.Describe(), " answered INFO ", section, " with ", Resp::Describe(buffer.data(), size));
  }
  nlohmann::json info = nlohmann::json::object();
  const std::string text(reinterpret_cast<const char*>(reply.value), reply.value_bytes);
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find("\r\n", at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 2;
    const std::size_t colon = line.find(':');
    if (line.empty() || line[0] == '#' || colon == std::string::npos) continue;
    const std::string name = line.substr(0, colon), value = line.substr(colon + 1);
    info[name] = StatisticValue(value);
  }
  return info;
}

}  // namespace rdmalab::kv::tcp
