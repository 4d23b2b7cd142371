#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "benchmarks/bench/raw_frame.h"

namespace rdmalab::bench {
namespace {

std::uint16_t At16(const std::uint8_t* bytes) { return static_cast<std::uint16_t>(bytes[0] << 8 | bytes[1]); }

FrameAddress Address(const char* ipv4, std::uint8_t last_mac_byte, std::uint16_t port) {
  FrameAddress a;
  a.mac = {0x02, 0, 0, 0, 0, last_mac_byte};
  inet_pton(AF_INET, ipv4, &a.ipv4);
  a.udp_port = port;
  return a;
}

TEST(RawFrame, Ipv4ChecksumMatchesTheTextbookHeader) {
  // The textbook header 192.168.0.1 -> 192.168.0.199, 115 bytes, DF, TTL 64, UDP: checksum 0xb861.
  std::array<std::uint8_t, kFrameHeaderBytes> frame{};
  WriteHeaders(frame.data(), Address("192.168.0.1", 1, 9000), Address("192.168.0.199", 2, 9001),
               115 - kIpv4HeaderBytes - kUdpHeaderBytes);
  const std::uint8_t* ip = frame.data() + kEthernetHeaderBytes;
  const std::array<std::uint8_t, 20> expected = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                                                 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(ip[i], expected[i]) << "IPv4 header byte " << i;
  EXPECT_EQ(Ipv4Checksum(ip), 0) << "a header with its checksum sums to 0xffff";
}

TEST(RawFrame, EthernetAndUdpHeadersAddressThePeer) {
  std::array<std::uint8_t, kFrameHeaderBytes> frame{};
  const FrameAddress from = Address("10.0.0.1", 0x11, 18515), to = Address("10.0.0.2", 0x22, 18516);
  WriteHeaders(frame.data(), from, to, 64);
  EXPECT_EQ(frame[5], 0x22);   // destination MAC first
  EXPECT_EQ(frame[11], 0x11);  // then the source's
  EXPECT_EQ(At16(frame.data() + 12), 0x0800);
  const std::uint8_t* udp = frame.data() + kEthernetHeaderBytes + kIpv4HeaderBytes;
  EXPECT_EQ(At16(udp), 18515);
  EXPECT_EQ(At16(udp + 2), 18516);
  EXPECT_EQ(At16(udp + 4), kUdpHeaderBytes + 64);
  EXPECT_EQ(At16(udp + 6), 0);
  EXPECT_EQ(At16(frame.data() + kEthernetHeaderBytes + 2), kIpv4HeaderBytes + kUdpHeaderBytes + 64);
}

}  // namespace
}  // namespace rdmalab::bench
