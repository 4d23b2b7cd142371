#include "benchmarks/bench/sequencer_check.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

using nlohmann::json;

// 384 KiB of bitmap per chunk: 512 KiB of base64, half the rendezvous' 1 MiB line limit.
constexpr std::size_t kChunkBytes = std::size_t{384} << 10;
static_assert(kChunkBytes % 3 == 0 && kChunkBytes % 8 == 0, "chunks split on base64 groups and whole words");
constexpr std::uint64_t kMaxCount = std::uint64_t{1} << 33;  // 1 GiB of bitmap per process
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string Base64Encode(const std::uint8_t* data, std::size_t bytes) {
  std::string out;
  out.reserve((bytes + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes; i += 3) {
    const std::uint32_t group = (std::uint32_t{data[i]} << 16) | (i + 1 < bytes ? std::uint32_t{data[i + 1]} << 8 : 0) |
                                (i + 2 < bytes ? data[i + 2] : 0u);
    out += kAlphabet[(group >> 18) & 63];
    out += kAlphabet[(group >> 12) & 63];
    out += i + 1 < bytes ? kAlphabet[(group >> 6) & 63] : '=';
    out += i + 2 < bytes ? kAlphabet[group & 63] : '=';
  }
  return out;
}

std::vector<std::uint8_t> Base64Decode(const std::string& text) {
  if (text.size() % 4 != 0) Fail("malformed base64 from a peer: length ", text.size(), " is not a multiple of 4");
  std::vector<std::uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t group = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + static_cast<std::size_t>(k)];
      const int value = c == '=' ? (++pad, 0) : Sextet(c);
      if (value < 0 || (c != '=' && pad > 0)) Fail("malformed base64 from a peer at offset ", i + k);
      group = (group << 6) | static_cast<std::uint32_t>(value);
    }
    out.push_back(static_cast<std::uint8_t>(group >> 16));
    if (pad < 2) out.push_back(static_cast<std::uint8_t>(group >> 8));
    if (pad < 1) out.push_back(static_cast<std::uint8_t>(group));
  }
  return out;
}

}  // namespace

void CheckIntegerCount(std::uint64_t count) {
  if (count > kMaxCount) {
    Fail("--count ", count, " exceeds ", kMaxCount, ": every process keeps a bitmap of --count bits for the "
         "exactly-once check");
  }
}

void PublishIntegers(Session& session, const IntegerSet& set, std::uint64_t received, std::uint64_t local_duplicates) {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(set.words().data());
  const std::size_t total = set.words().size() * sizeof(std::uint64_t);
  const std::size_t chunks = (total + kChunkBytes - 1) / kChunkBytes;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t offset = c * kChunkBytes;
    session.Put("integers/" + std::to_string(c), Base64Encode(bytes + offset, std::min(kChunkBytes, total - offset)));
  }
  session.Put("integers", {{"received", received}, {"local_duplicates", local_duplicates}, {"chunks", chunks},
                           {"bytes", total}});
}

json GatherAndCheck(Session& session, std::uint64_t count) {
  std::vector<std::uint64_t> seen((count + 63) / 64, 0);
  const std::size_t total = seen.size() * sizeof(std::uint64_t);
  std::uint64_t integers = 0, duplicates = 0;
  for (const auto& peer : session.PeerNames()) {
    const json summary = session.Get(peer, "integers");
    integers += summary.at("received").get<std::uint64_t>();
    duplicates += summary.at("local_duplicates").get<std::uint64_t>();
    if (summary.at("bytes").get<std::size_t>() != total) {
      Fail(peer, " kept a bitmap of ", summary.at("bytes").get<std::size_t>(), " bytes; --count ", count, " needs ",
           total);
    }
    const auto chunks = summary.at("chunks").get<std::size_t>();
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::vector<std::uint8_t> chunk = Base64Decode(session.Get(peer, "integers/" + std::to_string(c)).get<std::string>());
      const std::size_t offset = c * kChunkBytes;
      if (chunk.size() != std::min(kChunkBytes, total - offset)) {
        Fail(peer, "'s bitmap chunk ", c, " has ", chunk.size(), " bytes; expected ", std::min(kChunkBytes, total - offset));
      }
      for (std::size_t w = 0; w < chunk.size() / sizeof(std::uint64_t); ++w) {
        std::uint64_t word;
        std::memcpy(&word, chunk.data() + w * sizeof(std::uint64_t), sizeof(word));
        std::uint64_t& mine = seen[offset / sizeof(std::uint64_t) + w];
        duplicates += static_cast<std::uint64_t>(std::popcount(mine & word));
        mine |= word;
      }
    }
  }
  std::uint64_t distinct = 0;
  for (std::uint64_t word : seen) distinct += static_cast<std::uint64_t>(std::popcount(word));
  const std::uint64_t missing = count - std::min(count, distinct);
  return {{"ok", duplicates == 0 && missing == 0}, {"integers", integers}, {"duplicates", duplicates},
          {"missing", missing}, {"count", count}};
}

}  // namespace rdmalab::bench
