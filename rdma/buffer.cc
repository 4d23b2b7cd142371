#include "rdma/buffer.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "rdma/error.h"

namespace rdmalab {
namespace {

constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
constexpr std::size_t kPageBytes = 4096;
constexpr int kMpolPreferred = 1;  // <numaif.h>, without a dependency on libnuma

std::size_t RoundUp(std::size_t bytes, std::size_t unit) { return (bytes + unit - 1) / unit * unit; }

}  // namespace

Buffer Buffer::Allocate(std::size_t bytes, bool hugepages, int numa_node) {
  if (bytes == 0) Fail("buffer size 0: a registered buffer needs at least 1 byte");
  Buffer buffer;
  buffer.size_ = bytes;
  buffer.hugepages_ = hugepages;
  buffer.mapped_ = RoundUp(bytes, hugepages ? kHugePageBytes : kPageBytes);
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (hugepages ? MAP_HUGETLB : 0);
  void* address = mmap(nullptr, buffer.mapped_, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (address == MAP_FAILED) {
    const int error_number = errno;
    if (hugepages) {
      Fail("cannot map ", buffer.mapped_, " bytes of 2 MiB hugepages (", std::strerror(error_number),
           "): reserve them first, e.g. echo ", buffer.mapped_ / kHugePageBytes,
           " > /proc/sys/vm/nr_hugepages, or drop --use_hugepages");
    }
    FailErrno("mmap of " + std::to_string(buffer.mapped_) + " bytes", error_number);
  }
  buffer.data_ = static_cast<std::uint8_t*>(address);
  if (numa_node >= 0 && numa_node < 64) {
    // Preferred, not bound: placement is a performance hint, never a reason to fail.
    const unsigned long node_mask = 1ul << numa_node;
    syscall(SYS_mbind, address, buffer.mapped_, kMpolPreferred, &node_mask, 64, 0);
  }
  // Touch every page now so that first-touch faults never land inside a measurement.
  for (std::size_t offset = 0; offset < buffer.mapped_; offset += kPageBytes) buffer.data_[offset] = 0;
  return buffer;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    this->~Buffer();
    data_ = other.data_;
    size_ = other.size_;
    mapped_ = other.mapped_;
    hugepages_ = other.hugepages_;
    other.data_ = nullptr;
    other.size_ = other.mapped_ = 0;
  }
  return *this;
}

Buffer::~Buffer() {
  if (data_ != nullptr) munmap(data_, mapped_);
  data_ = nullptr;
}

}  // namespace rdmalab
