// Memory that is shared before it is registered, of every kind a verbs program uses:
// SysV segments with and without SHM_HUGETLB, MAP_SHARED files, memfds, hugetlbfs files and
// huge-page memfds. Each is created with its first mapping fenced by PROT_NONE guard
// pages, and can be mapped again in this process or attached in another. Huge pages are
// reserved through /proc/sys/vm/nr_hugepages when there are too few and we may; hugetlbfs
// is mounted in a temporary directory when none is mounted and we may. Otherwise the kind
// is unavailable, with the reason. No GoogleTest here: the safety fuzz uses it too.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace conformance {

enum class SharedKind : uint32_t { kSysv, kSysvHuge, kFile, kMemfd, kHugetlbfsFile, kHugeMemfd };
const std::vector<SharedKind>& AllSharedKinds();
std::string SharedKindName(SharedKind kind);
bool IsHuge(SharedKind kind);

constexpr size_t kHugePageBytes = 2 << 20;  // x86's default huge page

// What another process needs to attach the memory (trivially copyable). Memfds travel
// as a descriptor beside it (Channel::SendFd).
struct SharedHandle {
  SharedKind kind = SharedKind::kSysv;
  int32_t shmid = -1;
  uint64_t bytes = 0;
  char path[256] = {};
};

class SharedArea {
 public:
  // `bytes` (a huge-page multiple for huge kinds) of `kind`; `sysv_key` names a SysV
  // segment (IPC_PRIVATE when 0). Null with *reason; *unavailable tells that the machine
  // lacks the kind (no huge pages, no hugetlbfs, no permission) rather than that it broke.
  static std::unique_ptr<SharedArea> Create(SharedKind kind, size_t bytes, key_t sysv_key, std::string* reason,
                                              bool* unavailable);
  ~SharedArea();  // unmaps everything mapped here, removes the segment or file
  SharedArea(const SharedArea&) = delete;
  SharedArea& operator=(const SharedArea&) = delete;

  uint8_t* data() const { return first_; }  // the first mapping, between guard pages
  size_t bytes() const { return bytes_; }
  // Another mapping of the same memory in this process; null with *error.
  uint8_t* MapAgain(std::string* error);
  const SharedHandle& handle() const { return handle_; }
  int fd() const { return fd_; }  // memfds: the descriptor; -1 otherwise
  // Closes the memfd's descriptor: then nothing but the mapping names the memory.
  void CloseFd();

 private:
  SharedArea() = default;
  SharedHandle handle_;
  size_t bytes_ = 0;
  int fd_ = -1;
  uint8_t* first_ = nullptr;
  void* reservation_ = nullptr;
  size_t reservation_bytes_ = 0;
  std::vector<uint8_t*> extra_;  // MapAgain's mappings
  std::string mount_;            // a hugetlbfs mounted for this memory, unmounted with it
};

// Maps memory another process created (`fd` for memfds, else ignored). Null with *error.
uint8_t* AttachShared(const SharedHandle& handle, int fd, std::string* error);
void DetachShared(const SharedHandle& handle, uint8_t* address);

}  // namespace conformance
