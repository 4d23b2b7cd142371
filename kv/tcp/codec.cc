#include "kv/tcp/codec.h"

#include <cstdlib>
#include <cstring>

namespace rdmalab::kv::tcp {

bool FirstLine(const std::uint8_t* data, std::size_t size, Reply* reply, std::size_t* line_bytes) {
  const auto* newline = static_cast<const std::uint8_t*>(std::memchr(data, '\n', size));
  if (newline == nullptr) {
    reply->status = size > kMaxReplyLineBytes ? ReplyStatus::kError : ReplyStatus::kIncomplete;
    return false;
  }
  reply->status = ReplyStatus::kError;
  const auto at = static_cast<std::size_t>(newline - data);
  if (at == 0 || data[at - 1] != '\r') return false;
  *line_bytes = at - 1;
  reply->bytes = static_cast<std::uint32_t>(at + 1);
  return true;
}

std::string PrintableLine(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kShownBytes = 120;
  std::string line;
  for (std::size_t i = 0; i < size && i < kShownBytes && data[i] != '\r' && data[i] != '\n'; ++i) {
    const unsigned char c = data[i];
    if (c >= 0x20 && c < 0x7F) {
      line += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      line += "\\x";
      line += kHex[c >> 4];
      line += kHex[c & 15];
    }
  }
  if (line.empty()) return size == 0 ? "nothing" : "an empty line";
  return "'" + line + "'";
}

std::string TextFraming::Describe(const std::uint8_t* data, std::size_t size) { return PrintableLine(data, size); }

nlohmann::json StatisticValue(const std::string& text) {
  char* rest = nullptr;
  const unsigned long long number = std::strtoull(text.c_str(), &rest, 10);
  return !text.empty() && *rest == '\0' ? nlohmann::json(number) : nlohmann::json(text);
}

}  // namespace rdmalab::kv::tcp
