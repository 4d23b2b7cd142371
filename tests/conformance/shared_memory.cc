#include "shared_memory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/shm.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace conformance {
namespace {

constexpr size_t kPageBytes = 4096;
constexpr const char* kNrHugePages = "/proc/sys/vm/nr_hugepages";
constexpr uint64_t kHugePageKb = kHugePageBytes / 1024;

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

uint64_t MeminfoValue(const std::string& field) {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  uint64_t value = 0;
  while (meminfo >> name >> value) {
    if (name == field + ":") return value;
    meminfo.ignore(256, '\n');
  }
  return 0;
}

// Held while huge pages are counted, reserved and allocated, so that tests running at
// once (ctest -j) do not both count the same free pages.
class HugePageLock {
 public:
  HugePageLock() {
    std::string path = "/dev/shm/rdmalab-hugepages-" + std::to_string(getuid()) + ".lock";
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~HugePageLock() {
    if (fd_ >= 0) close(fd_);
  }
  HugePageLock(const HugePageLock&) = delete;
  HugePageLock& operator=(const HugePageLock&) = delete;

 private:
  int fd_ = -1;
};

uint64_t AvailableHugePages() { return MeminfoValue("HugePages_Free") - MeminfoValue("HugePages_Rsvd"); }

// "" when `pages` huge pages are available, reserving more if needed and permitted; else
// why not. Caller holds HugePageLock.
std::string ReserveHugePages(size_t pages) {
  if (MeminfoValue("Hugepagesize") != kHugePageKb) {
    return "the default huge page is " + std::to_string(MeminfoValue("Hugepagesize")) + " kB, not " +
           std::to_string(kHugePageKb) + " kB";
  }
  uint64_t available = AvailableHugePages();
  if (available >= pages) return "";
  uint64_t total = MeminfoValue("HugePages_Total");
  if (FILE* file = std::fopen(kNrHugePages, "w")) {
    std::fprintf(file, "%llu\n", static_cast<unsigned long long>(total + pages - available));
    std::fclose(file);
  }
  available = AvailableHugePages();
  if (available >= pages) return "";
  return "needs " + std::to_string(pages) + " free 2 MiB huge pages, " + std::to_string(available) +
         " are, and writing " + kNrHugePages + " did not reserve more (it needs root; or reserve them: echo 64 > " +
         kNrHugePages + ")";
}

bool IsHugetlbfsMount(const std::string& options) {
  return options.find("pagesize=") == std::string::npos || options.find("pagesize=2M") != std::string::npos;
}

// A writable hugetlbfs of 2 MiB pages: one already mounted, or one mounted here (*mounted
// set; the caller unmounts it). "" with *reason when neither.
std::string FindHugetlbfs(std::string* mounted, std::string* reason) {
  std::ifstream mounts("/proc/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, directory, type, options;
    fields >> device >> directory >> type >> options;
    if (type == "hugetlbfs" && IsHugetlbfsMount(options) && access(directory.c_str(), W_OK) == 0) return directory;
  }
  char directory[] = "/tmp/rdmalab-hugetlbfs-XXXXXX";
  if (mkdtemp(directory) == nullptr) {
    *reason = Errno("no hugetlbfs is mounted, and mkdtemp failed");
    return "";
  }
  if (mount("none", directory, "hugetlbfs", 0, "pagesize=2M,mode=0700") != 0) {
    *reason = Errno(std::string("no writable hugetlbfs is mounted, and mounting one on ") + directory +
                    " failed (it needs root)");
    rmdir(directory);
    return "";
  }
  *mounted = directory;
  return directory;
}

bool IsSysvKind(SharedKind kind) { return kind == SharedKind::kSysv || kind == SharedKind::kSysvHuge; }

}  // namespace

const std::vector<SharedKind>& AllSharedKinds() {
  static const std::vector<SharedKind> kinds = {SharedKind::kSysv,          SharedKind::kSysvHuge,
                                                SharedKind::kFile,          SharedKind::kMemfd,
                                                SharedKind::kHugetlbfsFile, SharedKind::kHugeMemfd};
  return kinds;
}

std::string SharedKindName(SharedKind kind) {
  switch (kind) {
    case SharedKind::kSysv: return "SysV";
    case SharedKind::kSysvHuge: return "SysVHugetlb";
    case SharedKind::kFile: return "SharedFile";
    case SharedKind::kMemfd: return "Memfd";
    case SharedKind::kHugetlbfsFile: return "HugetlbfsFile";
    case SharedKind::kHugeMemfd: return "HugetlbMemfd";
  }
  return "?";
}

bool IsHuge(SharedKind kind) {
  return kind == SharedKind::kSysvHuge || kind == SharedKind::kHugetlbfsFile || kind == SharedKind::kHugeMemfd;
}

std::unique_ptr<SharedArea> SharedArea::Create(SharedKind kind, size_t bytes, key_t sysv_key, std::string* reason,
                                                   bool* unavailable) {
  *unavailable = false;
  std::unique_ptr<SharedArea> memory(new SharedArea());
  memory->handle_.kind = kind;
  memory->handle_.bytes = bytes;
  memory->bytes_ = bytes;
  const size_t align = IsHuge(kind) ? kHugePageBytes : kPageBytes;
  std::unique_ptr<HugePageLock> lock;
  if (IsHuge(kind)) {
    lock = std::make_unique<HugePageLock>();
    *reason = ReserveHugePages(bytes / kHugePageBytes);
    if (!reason->empty()) {
      *unavailable = true;
      return nullptr;
    }
  }
  // The first mapping sits between guard pages, at the alignment the kind needs.
  memory->reservation_bytes_ = bytes + align + kPageBytes;
  void* reservation = mmap(nullptr, memory->reservation_bytes_, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reservation == MAP_FAILED) {
    *reason = Errno("reserving address space");
    return nullptr;
  }
  memory->reservation_ = reservation;
  auto* first = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(reservation) + kPageBytes + align - 1) /
                                           align * align);
  if (IsSysvKind(kind)) {
    int flags = IPC_CREAT | IPC_EXCL | 0600 | (kind == SharedKind::kSysvHuge ? SHM_HUGETLB : 0);
    memory->handle_.shmid = shmget(sysv_key, bytes, flags);
    if (memory->handle_.shmid < 0) {
      *reason = Errno("shmget(" + std::to_string(bytes) + " bytes)");
      if (errno == EPERM && kind == SharedKind::kSysvHuge) {
        *reason += " (SHM_HUGETLB needs CAP_IPC_LOCK or the group in /proc/sys/vm/hugetlb_shm_group)";
        *unavailable = true;
      }
      return nullptr;
    }
    if (shmat(memory->handle_.shmid, first, SHM_REMAP) != first) {
      *reason = Errno("shmat");
      return nullptr;
    }
    memory->first_ = first;
    return memory;
  }
  int fd = -1;
  if (kind == SharedKind::kMemfd || kind == SharedKind::kHugeMemfd) {
    fd = memfd_create("rdmalab-shared", MFD_CLOEXEC | (kind == SharedKind::kHugeMemfd ? MFD_HUGETLB : 0));
    memory->fd_ = fd;
  } else {
    std::string directory;
    if (kind == SharedKind::kHugetlbfsFile) {
      directory = FindHugetlbfs(&memory->mount_, reason);
      if (directory.empty()) {
        *unavailable = true;
        return nullptr;
      }
    } else {
      const char* tmp = std::getenv("TMPDIR");
      directory = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string path = directory + "/rdmalab-shared-XXXXXX";
    if (path.size() >= sizeof(memory->handle_.path)) {
      *reason = "path " + path + " is too long";
      return nullptr;
    }
    std::strcpy(memory->handle_.path, path.c_str());
    fd = mkostemp(memory->handle_.path, O_CLOEXEC);
    if (fd < 0) memory->handle_.path[0] = '\0';
  }
  if (fd < 0) {
    *reason = Errno("creating the " + SharedKindName(kind) + " file");
    return nullptr;
  }
  bool mapped = ftruncate(fd, off_t(bytes)) == 0 &&
                mmap(first, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == first;
  if (!mapped) *reason = Errno("sizing and mapping the " + SharedKindName(kind) + " file");
  // Files are left to their path: registration must find them without a descriptor.
  if (memory->fd_ < 0) close(fd);
  if (!mapped) return nullptr;
  memory->first_ = first;
  return memory;
}

SharedArea::~SharedArea() {
  for (uint8_t* mapping : extra_) DetachShared(handle_, mapping);
  if (first_ != nullptr && IsSysvKind(handle_.kind)) shmdt(first_);
  if (reservation_ != nullptr) munmap(reservation_, reservation_bytes_);
  if (handle_.shmid >= 0) shmctl(handle_.shmid, IPC_RMID, nullptr);
  if (handle_.path[0] != '\0') unlink(handle_.path);
  CloseFd();
  if (!mount_.empty()) {
    umount2(mount_.c_str(), MNT_DETACH);
    rmdir(mount_.c_str());
  }
}

void SharedArea::CloseFd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

uint8_t* SharedArea::MapAgain(std::string* error) {
  uint8_t* mapping = AttachShared(handle_, fd_, error);
  if (mapping != nullptr) extra_.push_back(mapping);
  return mapping;
}

uint8_t* AttachShared(const SharedHandle& handle, int fd, std::string* error) {
  if (IsSysvKind(handle.kind)) {
    void* address = shmat(handle.shmid, nullptr, 0);
    if (address != reinterpret_cast<void*>(-1)) return static_cast<uint8_t*>(address);
    *error = Errno("shmat(shmid " + std::to_string(handle.shmid) + ")");
    return nullptr;
  }
  bool own_fd = handle.path[0] != '\0';
  if (own_fd) fd = open(handle.path, O_RDWR | O_CLOEXEC);
  void* address = fd < 0 ? MAP_FAILED : mmap(nullptr, handle.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) *error = Errno("mapping the " + SharedKindName(handle.kind) + " again");
  if (own_fd && fd >= 0) close(fd);
  return address == MAP_FAILED ? nullptr : static_cast<uint8_t*>(address);
}

void DetachShared(const SharedHandle& handle, uint8_t* address) {
  if (IsSysvKind(handle.kind)) {
    shmdt(address);
  } else {
    munmap(address, handle.bytes);
  }
}

}  // namespace conformance
