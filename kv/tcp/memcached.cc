#include "kv/tcp/memcached.h"

#include <cstring>
#include <vector>

#include "kv/workload/keyhash.h"
#include "rdma/error.h"

namespace rdmalab::kv::tcp {
namespace {

template <std::size_t N>
bool LineIs(const std::uint8_t* data, std::size_t line_bytes, const char (&text)[N]) {
  return line_bytes == N - 1 && std::memcmp(data, text, N - 1) == 0;
}

template <std::size_t N>
bool StartsWith(const std::uint8_t* data, std::size_t line_bytes, const char (&text)[N]) {
  return line_bytes >= N - 1 && std::memcmp(data, text, N - 1) == 0;
}

constexpr std::uint8_t kRequestMagic = 0x80;
constexpr std::uint8_t kResponseMagic = 0x81;
constexpr std::uint8_t kOpGet = 0x00;
constexpr std::uint8_t kOpSet = 0x01;
constexpr std::uint16_t kStatusOk = 0x0000;
constexpr std::uint16_t kStatusKeyNotFound = 0x0001;
constexpr std::uint16_t kStatusNotStored = 0x0005;
// No reply to our requests carries more than a value of at most 1000 bytes, or a message.
constexpr std::uint32_t kMaxReplyBodyBytes = 1 << 20;

void PutBe16(std::uint8_t* out, std::uint16_t v) {
  out[0] = static_cast<std::uint8_t>(v >> 8);
  out[1] = static_cast<std::uint8_t>(v);
}
void PutBe32(std::uint8_t* out, std::uint32_t v) {
  PutBe16(out, static_cast<std::uint16_t>(v >> 16));
  PutBe16(out + 2, static_cast<std::uint16_t>(v));
}
std::uint16_t Be16(const std::uint8_t* in) { return static_cast<std::uint16_t>(in[0] << 8 | in[1]); }
std::uint32_t Be32(const std::uint8_t* in) { return std::uint32_t{Be16(in)} << 16 | Be16(in + 2); }

std::size_t BinaryHeader(std::uint8_t* out, std::uint8_t opcode, std::uint32_t key_bytes, std::uint32_t extras_bytes,
                         std::uint32_t value_bytes) {
  std::memset(out, 0, MemcachedBinary::kHeaderBytes);
  out[0] = kRequestMagic;
  out[1] = opcode;
  PutBe16(out + 2, static_cast<std::uint16_t>(key_bytes));
  out[4] = static_cast<std::uint8_t>(extras_bytes);
  PutBe32(out + 8, extras_bytes + key_bytes + value_bytes);
  return MemcachedBinary::kHeaderBytes;
}

const char* BinaryStatusName(std::uint16_t status) {
  switch (status) {
    case 0x0001: return "key not found";
    case 0x0002: return "key exists";
    case 0x0003: return "value too large";
    case 0x0004: return "invalid arguments";
    case 0x0005: return "item not stored";
    case 0x0081: return "unknown command";
    case 0x0082: return "out of memory";
    default: return "unknown status";
  }
}

}  // namespace

std::size_t MemcachedText::EncodeGet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes) {
  std::size_t n = PutText(out, "get ");
  WriteKeyText(key_index, key_bytes, reinterpret_cast<char*>(out + n));
  n += key_bytes;
  return n + PutText(out + n, "\r\n");
}

std::size_t MemcachedText::EncodeSet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes,
                                     const std::uint8_t* value, std::uint32_t value_bytes) {
  std::size_t n = PutText(out, "set ");
  WriteKeyText(key_index, key_bytes, reinterpret_cast<char*>(out + n));
  n += key_bytes;
  n += PutText(out + n, " 0 0 ");
  return n + PutSizedValue(out + n, value, value_bytes);
}

Reply MemcachedText::Parse(const std::uint8_t* data, std::size_t size, bool get) {
  Reply reply;
  std::size_t line = 0;
  if (!FirstLine(data, size, &reply, &line)) return reply;
  const std::size_t header = reply.bytes;
  if (!get) {
    if (LineIs(data, line, "STORED")) reply.status = ReplyStatus::kStored;
    if (LineIs(data, line, "NOT_STORED")) reply.status = ReplyStatus::kNotStored;
    return reply;
  }
  if (LineIs(data, line, "END")) {
    reply.status = ReplyStatus::kMiss;
    return reply;
  }
  // "VALUE <key> <flags> <bytes>"
  if (!StartsWith(data, line, "VALUE ")) return reply;
  const void* key_end = std::memchr(data + 6, ' ', line - 6);
  if (key_end == nullptr) return reply;
  std::size_t at = static_cast<std::size_t>(static_cast<const std::uint8_t*>(key_end) - data) + 1;
  std::uint32_t flags = 0, value_bytes = 0;
  if (!ReadDecimal(data, line, &at, &flags) || at >= line || data[at++] != ' ' ||
      !ReadDecimal(data, line, &at, &value_bytes) || at != line) {
    return reply;
  }
  static constexpr char kTrailer[] = "\r\nEND\r\n";
  const std::size_t total = header + value_bytes + sizeof(kTrailer) - 1;
  if (size < total) {
    reply.status = ReplyStatus::kIncomplete;
    return reply;
  }
  if (std::memcmp(data + header + value_bytes, kTrailer, sizeof(kTrailer) - 1) != 0) return reply;
  reply.status = ReplyStatus::kHit;
  reply.bytes = static_cast<std::uint32_t>(total);
  reply.value = data + header;
  reply.value_bytes = value_bytes;
  return reply;
}

std::size_t MemcachedBinary::EncodeGet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes) {
  const std::size_t n = BinaryHeader(out, kOpGet, key_bytes, 0, 0);
  WriteKeyText(key_index, key_bytes, reinterpret_cast<char*>(out + n));
  return n + key_bytes;
}

std::size_t MemcachedBinary::EncodeSet(std::uint8_t* out, std::uint64_t key_index, std::uint32_t key_bytes,
                                       const std::uint8_t* value, std::uint32_t value_bytes) {
  std::size_t n = BinaryHeader(out, kOpSet, key_bytes, kSetExtrasBytes, value_bytes);
  std::memset(out + n, 0, kSetExtrasBytes);  // flags 0, no expiry
  n += kSetExtrasBytes;
  WriteKeyText(key_index, key_bytes, reinterpret_cast<char*>(out + n));
  n += key_bytes;
  std::memcpy(out + n, value, value_bytes);
  return n + value_bytes;
}

Reply MemcachedBinary::Parse(const std::uint8_t* data, std::size_t size, bool get) {
  Reply reply;
  if (size < kHeaderBytes) return reply;
  reply.status = ReplyStatus::kError;
  const std::uint32_t body = Be32(data + 8);
  if (data[0] != kResponseMagic || data[1] != (get ? kOpGet : kOpSet) || body > kMaxReplyBodyBytes) return reply;
  if (size < kHeaderBytes + body) {
    reply.status = ReplyStatus::kIncomplete;
    return reply;
  }
  reply.bytes = static_cast<std::uint32_t>(kHeaderBytes + body);
  const std::uint16_t status = Be16(data + 6);
  if (!get) {
    if (status == kStatusOk) reply.status = ReplyStatus::kStored;
    if (status == kStatusNotStored) reply.status = ReplyStatus::kNotStored;
    return reply;
  }
  if (status == kStatusKeyNotFound) {
    reply.status = ReplyStatus::kMiss;
    return reply;
  }
  const std::uint32_t skipped = data[4] + std::uint32_t{Be16(data + 2)};  // extras (flags), key
  if (status != kStatusOk || skipped > body) return reply;
  reply.status = ReplyStatus::kHit;
  reply.value = data + kHeaderBytes + skipped;
  reply.value_bytes = body - skipped;
  return reply;
}

std::string MemcachedBinary::Describe(const std::uint8_t* data, std::size_t size) {
  if (size < kHeaderBytes || data[0] != kResponseMagic) {
    return PrintableLine(data, size) + " (not a binary protocol reply)";
  }
  char head[96];
  const std::uint16_t status = Be16(data + 6);
  std::snprintf(head, sizeof(head), "opcode 0x%02x, status 0x%04x (%s)", data[1], status, BinaryStatusName(status));
  const std::size_t body = std::min<std::size_t>(Be32(data + 8), size - kHeaderBytes);
  const std::size_t skipped = std::min<std::size_t>(body, data[4] + std::size_t{Be16(data + 2)});
  std::string described = head;
  if (status != kStatusOk && body > skipped) {
    described += ": " + PrintableLine(data + kHeaderBytes + skipped, body - skipped);
  }
  return described;
}

nlohmann::json MemcachedStats(const Endpoint& endpoint, int timeout_ms) {
  constexpr std::size_t kStatsBytes = 1 << 16;
  static constexpr char kRequest[] = "stats\r\n";
  FileDescriptor fd = Connect(endpoint);
  SendAll(fd.get(), reinterpret_cast<const std::uint8_t*>(kRequest), sizeof(kRequest) - 1, endpoint, timeout_ms);
  std::vector<std::uint8_t> buffer(kStatsBytes);
  std::size_t size = 0, parsed = 0;
  nlohmann::json stats = nlohmann::json::object();
  for (;;) {
    if (size == buffer.size()) Fail(endpoint.Describe(), " sent more than ", kStatsBytes, " bytes of stats");
    size = ReceiveSome(fd.get(), buffer.data(), size, buffer.size(), endpoint, timeout_ms);
    Reply line_end;
    std::size_t line_bytes = 0;
    while (FirstLine(buffer.data() + parsed, size - parsed, &line_end, &line_bytes)) {
      const std::string line(reinterpret_cast<const char*>(buffer.data() + parsed), line_bytes);
      parsed += line_end.bytes;
      if (line == "END") return stats;
      const std::size_t space = line.find(' ', 5);
      if (line.rfind("STAT ", 0) != 0 || space == std::string::npos) {
        Fail(endpoint.Describe(), " answered `stats` with '", line, "'");
      }
      stats[line.substr(5, space - 5)] = StatisticValue(line.substr(space + 1));
    }
    if (line_end.status == ReplyStatus::kError) {
      Fail(endpoint.Describe(), " answered `stats` with ", PrintableLine(buffer.data() + parsed, size - parsed));
    }
  }
}

}  // namespace rdmalab::kv::tcp
