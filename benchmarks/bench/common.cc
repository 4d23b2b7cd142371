#include "benchmarks/bench/common.h"

namespace rdmalab::bench {

Region MakeRegion(const Session& session, std::size_t bytes) {
  return MakeRegion(session, bytes, session.options().use_hugepages);
}

void FillPattern(std::uint8_t* data, std::uint32_t bytes, std::uint32_t tag) {
  for (std::uint32_t i = 0; i < bytes; ++i) data[i] = PatternByte(tag, i);
}

std::uint64_t PatternMismatches(const std::uint8_t* data, std::uint32_t bytes, std::uint32_t tag) {
  std::uint64_t bad = 0;
  for (std::uint32_t i = 0; i < bytes; ++i) bad += data[i] != PatternByte(tag, i);
  return bad;
}

}  // namespace rdmalab::bench
