// kv/tcp's protocols without a store: requests as memcached and Redis expect them, and
// every reply parsed only once whole, however it is split, with values of every byte
// value (binary safe), and errors recognized as errors.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kv/tcp/memcached.h"
#include "kv/tcp/resp.h"
#include "kv/workload/keyhash.h"

namespace rdmalab::kv::tcp {
namespace {

constexpr std::uint64_t kKey = 12345;
constexpr std::uint32_t kKeyBytes = 20;

// Every byte value, and the protocols' own delimiters inside the value.
std::string AwkwardValue() {
  std::string value = "\r\nEND\r\n$-1\r\n+OK\r\n";
  for (int b = 0; b < 256; ++b) value += static_cast<char>(b);
  return value;
}

const std::uint8_t* Bytes(const std::string& s) { return reinterpret_cast<const std::uint8_t*>(s.data()); }

std::string BinaryReply(std::uint8_t opcode, std::uint16_t status, const std::string& extras, const std::string& body) {
  std::string reply(24, '\0');
  reply[0] = static_cast<char>(0x81);
  reply[1] = static_cast<char>(opcode);
  reply[4] = static_cast<char>(extras.size());
  reply[6] = static_cast<char>(status >> 8);
  reply[7] = static_cast<char>(status);
  const std::uint32_t total = static_cast<std::uint32_t>(extras.size() + body.size());
  for (int i = 0; i < 4; ++i) reply[8 + i] = static_cast<char>(total >> (24 - 8 * i));
  return reply + extras + body;
}

// Parses `reply` followed by a second reply's first bytes, after checking that every proper
// prefix of it reads as incomplete; returns the parse of the whole, and its value in *value.
template <typename Codec>
Reply ParseWhole(const std::string& reply, bool get, std::string* value = nullptr) {
  for (std::size_t cut = 0; cut < reply.size(); ++cut) {
    const Reply partial = Codec::Parse(Bytes(reply), cut, get);
    EXPECT_EQ(partial.status, ReplyStatus::kIncomplete) << "cut at " << cut << " of " << reply.size();
    if (partial.status != ReplyStatus::kIncomplete) break;
  }
  const std::string followed = reply + "$3\r\nEND";
  const Reply whole = Codec::Parse(Bytes(followed), followed.size(), get);
  if (whole.status != ReplyStatus::kError) {
    EXPECT_EQ(whole.bytes, reply.size());
  }
  if (value != nullptr) value->assign(reinterpret_cast<const char*>(whole.value), whole.value_bytes);
  return whole;
}

template <typename Codec>
void ExpectHit(const std::string& reply, const std::string& value) {
  std::string got;
  ASSERT_EQ(ParseWhole<Codec>(reply, true, &got).status, ReplyStatus::kHit);
  EXPECT_EQ(got, value);
}

// What Codec writes for a GET of kKey and for a SET of kKey to `value`.
template <typename Codec>
std::pair<std::string, std::string> EncodedGetAndSet(const std::string& value) {
  std::vector<std::uint8_t> out(Codec::RequestBytes(kKeyBytes, static_cast<std::uint32_t>(value.size())));
  const std::size_t get_bytes = Codec::EncodeGet(out.data(), kKey, kKeyBytes);
  std::string get(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(get_bytes));
  const std::size_t set_bytes =
      Codec::EncodeSet(out.data(), kKey, kKeyBytes, Bytes(value), static_cast<std::uint32_t>(value.size()));
  return {get, std::string(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(set_bytes))};
}

TEST(KvTcpCodecs, MemcachedTextRequests) {
  const std::string key = KeyText(kKey, kKeyBytes), value = AwkwardValue();
  const auto [get, set] = EncodedGetAndSet<MemcachedText>(value);
  EXPECT_EQ(get, "get " + key + "\r\n");
  EXPECT_EQ(set, "set " + key + " 0 0 " + std::to_string(value.size()) + "\r\n" + value + "\r\n");
}

TEST(KvTcpCodecs, MemcachedTextReplies) {
  const std::string value = AwkwardValue();
  ExpectHit<MemcachedText>("VALUE k 0 " + std::to_string(value.size()) + "\r\n" + value + "\r\nEND\r\n", value);
  ExpectHit<MemcachedText>("VALUE k 7 0\r\n\r\nEND\r\n", "");
  EXPECT_EQ(ParseWhole<MemcachedText>("END\r\n", true).status, ReplyStatus::kMiss);
  EXPECT_EQ(ParseWhole<MemcachedText>("STORED\r\n", false).status, ReplyStatus::kStored);
  EXPECT_EQ(ParseWhole<MemcachedText>("NOT_STORED\r\n", false).status, ReplyStatus::kNotStored);
  for (const char* error : {"SERVER_ERROR out of memory\r\n", "ERROR\r\n", "CLIENT_ERROR bad data chunk\r\n"}) {
    EXPECT_EQ(ParseWhole<MemcachedText>(error, true).status, ReplyStatus::kError) << error;
    EXPECT_EQ(ParseWhole<MemcachedText>(error, false).status, ReplyStatus::kError) << error;
  }
  EXPECT_EQ(ParseWhole<MemcachedText>("STORED\r\n", true).status, ReplyStatus::kError);  // not a GET's answer
  EXPECT_EQ(ParseWhole<MemcachedText>("VALUE k 0 3\r\nabcXXXXXXX", true).status, ReplyStatus::kError);
  EXPECT_EQ(MemcachedText::Parse(Bytes("END\n"), 4, true).status, ReplyStatus::kError);
  const std::string endless(kMaxReplyLineBytes + 1, 'x');
  EXPECT_EQ(MemcachedText::Parse(Bytes(endless), endless.size(), true).status, ReplyStatus::kError);
  EXPECT_EQ(MemcachedText::Describe(Bytes("SERVER_ERROR out of memory\r\nrest"), 32), "'SERVER_ERROR out of memory'");
}

TEST(KvTcpCodecs, MemcachedBinaryRequests) {
  const std::string key = KeyText(kKey, kKeyBytes), value = "v\r\n\0x";
  std::vector<std::uint8_t> out(MemcachedBinary::RequestBytes(kKeyBytes, 8));
  std::size_t n = MemcachedBinary::EncodeGet(out.data(), kKey, kKeyBytes);
  ASSERT_EQ(n, 24 + kKeyBytes);
  EXPECT_EQ(out[0], 0x80);
  EXPECT_EQ(out[1], 0x00);
  EXPECT_EQ(out[3], kKeyBytes);
  EXPECT_EQ(out[11], kKeyBytes);  // total body: the key
  EXPECT_EQ(std::string(out.begin() + 24, out.begin() + static_cast<std::ptrdiff_t>(n)), key);
  n = MemcachedBinary::EncodeSet(out.data(), kKey, kKeyBytes, Bytes(value), static_cast<std::uint32_t>(value.size()));
  ASSERT_EQ(n, 24 + 8 + kKeyBytes + value.size());
  EXPECT_EQ(out[1], 0x01);
  EXPECT_EQ(out[4], 8);  // extras: flags and expiry
  EXPECT_EQ(out[11], 8 + kKeyBytes + value.size());
  EXPECT_EQ(std::string(out.begin() + 32 + kKeyBytes, out.begin() + static_cast<std::ptrdiff_t>(n)), value);
}

TEST(KvTcpCodecs, MemcachedBinaryReplies) {
  const std::string value = AwkwardValue();
  ExpectHit<MemcachedBinary>(BinaryReply(0x00, 0, std::string(4, '\0'), value), value);
  EXPECT_EQ(ParseWhole<MemcachedBinary>(BinaryReply(0x00, 1, "", "Not found"), true).status, ReplyStatus::kMiss);
  EXPECT_EQ(ParseWhole<MemcachedBinary>(BinaryReply(0x01, 0, "", ""), false).status, ReplyStatus::kStored);
  EXPECT_EQ(ParseWhole<MemcachedBinary>(BinaryReply(0x01, 5, "", "Not stored."), false).status,
            ReplyStatus::kNotStored);
  const std::string out_of_memory = BinaryReply(0x01, 0x82, "", "Out of memory");
  EXPECT_EQ(ParseWhole<MemcachedBinary>(out_of_memory, false).status, ReplyStatus::kError);
  EXPECT_EQ(MemcachedBinary::Describe(Bytes(out_of_memory), out_of_memory.size()),
            "opcode 0x01, status 0x0082 (out of memory): 'Out of memory'");
  EXPECT_EQ(ParseWhole<MemcachedBinary>(BinaryReply(0x01, 0, "", ""), true).status, ReplyStatus::kError);
  const std::string text = "ERROR\r\n" + std::string(24, ' ');
  EXPECT_EQ(MemcachedBinary::Parse(Bytes(text), text.size(), true).status, ReplyStatus::kError);
}

TEST(KvTcpCodecs, RespRequests) {
  const std::string key = KeyText(kKey, kKeyBytes), value = AwkwardValue();
  const auto [get, set] = EncodedGetAndSet<Resp>(value);
  EXPECT_EQ(get, "*2\r\n$3\r\nGET\r\n$20\r\n" + key + "\r\n");
  EXPECT_EQ(set, "*3\r\n$3\r\nSET\r\n$20\r\n" + key + "\r\n$" + std::to_string(value.size()) + "\r\n" + value + "\r\n");
}

TEST(KvTcpCodecs, RespReplies) {
  const std::string value = AwkwardValue();
  ExpectHit<Resp>("$" + std::to_string(value.size()) + "\r\n" + value + "\r\n", value);
  ExpectHit<Resp>("$0\r\n\r\n", "");
  EXPECT_EQ(ParseWhole<Resp>("$-1\r\n", true).status, ReplyStatus::kMiss);
  EXPECT_EQ(ParseWhole<Resp>("+OK\r\n", false).status, ReplyStatus::kStored);
  EXPECT_EQ(ParseWhole<Resp>("-ERR wrong\r\n", true).status, ReplyStatus::kError);
  EXPECT_EQ(ParseWhole<Resp>("-OOM command not allowed\r\n", false).status, ReplyStatus::kError);
  EXPECT_EQ(ParseWhole<Resp>("+OK\r\n", true).status, ReplyStatus::kError);
  EXPECT_EQ(ParseWhole<Resp>("$3\r\nabcXX", true).status, ReplyStatus::kError);
  EXPECT_EQ(ParseWhole<Resp>("$x\r\n", true).status, ReplyStatus::kError);
}

}  // namespace
}  // namespace rdmalab::kv::tcp
