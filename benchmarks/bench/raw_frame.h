// The Ethernet II / IPv4 / UDP headers that --stack raw writes in front of each datagram
// (raw_packet.cc), apart so that their bytes are tested without a raw-packet NIC.
#pragma once

#include <array>
#include <cstdint>

namespace rdmalab::bench {

constexpr std::uint32_t kEthernetHeaderBytes = 14;
constexpr std::uint32_t kIpv4HeaderBytes = 20;
constexpr std::uint32_t kUdpHeaderBytes = 8;
constexpr std::uint32_t kFrameHeaderBytes = kEthernetHeaderBytes + kIpv4HeaderBytes + kUdpHeaderBytes;
static_assert(kFrameHeaderBytes == 42, "Ethernet II + IPv4 without options + UDP");

struct FrameAddress {
  std::array<std::uint8_t, 6> mac{};
  std::uint32_t ipv4 = 0;  // network order
  std::uint16_t udp_port = 0;
};

// The IPv4 header checksum (RFC 791) of a 20-byte header, in network order as it is stored.
std::uint16_t Ipv4Checksum(const std::uint8_t* header);

// Ethernet II, IPv4 (no options, don't fragment, TTL 64) and UDP headers of a frame from
// `from` to `to` carrying `payload_bytes`; the UDP checksum is 0 (none), which IPv4 allows.
void WriteHeaders(std::uint8_t* frame, const FrameAddress& from, const FrameAddress& to, std::uint32_t payload_bytes);

}  // namespace rdmalab::bench
