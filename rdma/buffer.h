// Registered-memory backing: anonymous memory, on 2 MiB hugepages when asked, placed on a
// NUMA node when one is given. Page-aligned, zero-filled, unmapped on destruction.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rdmalab {

class Buffer {
 public:
  // Fails with the reason (e.g. "no free 2 MiB hugepages: echo N > /proc/sys/vm/nr_hugepages")
  // when hugepages are asked for and unavailable; never falls back silently.
  static Buffer Allocate(std::size_t bytes, bool hugepages, int numa_node = -1);

  Buffer() = default;
  Buffer(Buffer&& other) noexcept { *this = static_cast<Buffer&&>(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  std::uint8_t* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool hugepages() const noexcept { return hugepages_; }

 private:
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t mapped_ = 0;
  bool hugepages_ = false;
};

}  // namespace rdmalab
