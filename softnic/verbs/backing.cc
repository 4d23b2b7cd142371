#include "softnic/verbs/backing.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "softnic/fabric/object.h"

namespace softnic {
namespace {

constexpr uint32_t kBasePageShift = 12;
constexpr uint32_t kMaxPageShift = 30;  // 1 GiB, x86's largest huge page
static_assert(size_t{1} << kBasePageShift == kPageBytes);
constexpr const char* kSysvPrefix = "/SYSV";  // the name the kernel gives SysV segments
constexpr const char* kDeletedSuffix = " (deleted)";

bool IsSysv(const Vma& vma) { return vma.path.rfind(kSysvPrefix, 0) == 0; }
uint32_t Log2(uint64_t value) { return 63 - uint32_t(__builtin_clzll(value)); }
uint64_t RoundUp(uint64_t value, uint64_t unit) { return (value + unit - 1) / unit * unit; }

bool EndsWith(const std::string& text, const char* suffix) {
  size_t n = std::strlen(suffix);
  return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

// The page size of the mapping that starts at `start`, where PROCMAP_QUERY did not say:
// nothing else tells whether a SysV segment is SHM_HUGETLB. smaps is read only as far as
// that mapping.
uint32_t KernelPageShift(uintptr_t start) {
  FILE* smaps = std::fopen("/proc/self/smaps", "re");
  if (smaps == nullptr) return kBasePageShift;
  uint32_t shift = kBasePageShift;
  char* line = nullptr;
  size_t capacity = 0;
  bool inside = false;
  while (getline(&line, &capacity, smaps) > 0) {
    unsigned long first = 0, last = 0, kilobytes = 0;
    if (std::sscanf(line, "%lx-%lx ", &first, &last) == 2) {
      if (inside) break;
      inside = first == start;
    } else if (inside && std::sscanf(line, "KernelPageSize: %lu kB", &kilobytes) == 1 && kilobytes != 0) {
      shift = Log2(uint64_t{kilobytes} * 1024);
      break;
    }
  }
  std::free(line);
  std::fclose(smaps);
  return shift;
}

bool IsFile(int fd, const Vma& vma) {
  struct stat status;
  return fd >= 0 && fstat(fd, &status) == 0 && status.st_dev == vma.device && status.st_ino == vma.inode;
}

int OpenIfBacking(const std::string& path, const Vma& vma) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (IsFile(fd, vma)) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// A read-write descriptor of the file behind `vma`, or -1. In order: /proc/self/map_files
// (needs CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN, and reaches shared anonymous memory
// too), the mapped path while it still names that file, a descriptor this process holds.
int OpenBacking(const Vma& vma) {
  char name[64];
  std::snprintf(name, sizeof(name), "/proc/self/map_files/%" PRIxPTR "-%" PRIxPTR, vma.start, vma.first_end);
  int fd = OpenIfBacking(name, vma);
  if (fd >= 0) return fd;
  if (!vma.path.empty() && vma.path[0] == '/' && !EndsWith(vma.path, kDeletedSuffix)) {
    fd = OpenIfBacking(vma.path, vma);
    if (fd >= 0) return fd;
  }
  DIR* open_files = opendir("/proc/self/fd");
  if (open_files == nullptr) return -1;
  while (dirent* entry = readdir(open_files)) {
    if (entry->d_name[0] == '.') continue;
    std::string path = std::string("/proc/self/fd/") + entry->d_name;
    struct stat status;
    if (stat(path.c_str(), &status) != 0 || status.st_dev != vma.device || status.st_ino != vma.inode) continue;
    fd = OpenIfBacking(path, vma);  // a new open file description, read-write whatever the held one is
    if (fd >= 0) break;
  }
  closedir(open_files);
  return fd;
}

// The first reference on a backing: a SysV hold, or a published descriptor.
bool CreateSharedBacking(Runtime* runtime, const Vma& vma, bool sysv, SharedBacking* backing) {
  if (sysv) {
    int shmid = int(vma.inode);
    shmid_ds status;
    void* hold = shmctl(shmid, IPC_STAT, &status) == 0 ? shmat(shmid, nullptr, SHM_RDONLY) : reinterpret_cast<void*>(-1);
    if (hold == reinterpret_cast<void*>(-1)) {
      int err = errno;
      Warn("ibv_reg_mr: cannot attach SysV segment shmid %d (mapped at %#" PRIxPTR "): %s", shmid, vma.start,
           std::strerror(err));
      errno = err;
      return false;
    }
    backing->id = uint64_t(shmid);
    backing->page_shift = vma.page_bytes != 0 ? Log2(vma.page_bytes) : KernelPageShift(vma.start);
    backing->segment_bytes = RoundUp(status.shm_segsz, uint64_t{1} << backing->page_shift);
    backing->hold = hold;
    return true;
  }
  int fd = OpenBacking(vma);
  if (fd < 0) {
    Warn("ibv_reg_mr: the shared mapping at [%#" PRIxPTR ", %#" PRIxPTR ") of '%s' (device %u:%u, inode %" PRIu64
         ") cannot be reopened for peers: no descriptor of it is open, its path no longer names it, and "
         "/proc/self/map_files needs CAP_CHECKPOINT_RESTORE. Keep a descriptor open while registering it, or "
         "use a memfd instead of MAP_SHARED | MAP_ANONYMOUS",
         vma.start, vma.end, vma.path.c_str(), major(vma.device), minor(vma.device), vma.inode);
    errno = EACCES;
    return false;
  }
  struct statfs filesystem;
  bool huge = fstatfs(fd, &filesystem) == 0 && filesystem.f_type == HUGETLBFS_MAGIC;
  backing->page_shift = huge ? Log2(uint64_t(filesystem.f_bsize)) : kBasePageShift;
  backing->id = runtime->NewObjectId();
  std::string error;
  if (!runtime->descriptors.Publish(runtime->directory(), backing->id, fd, &error)) {
    Warn("ibv_reg_mr: %s", error.c_str());
    errno = EIO;
    return false;
  }
  return true;
}

bool MapSegment(const std::string& directory, const MrSegment& segment, uint8_t* at) {
  uint64_t bytes = segment.lead + segment.bytes + segment.trail;
  switch (segment.backing) {
    case Backing::kAnchor:
      return MapObject(directory, segment.id, bytes, segment.offset, at) != nullptr;
    case Backing::kSysv: {
      // shmat maps the whole segment: one of another size is not the registered one, and
      // must not spill past the reservation.
      int shmid = int(segment.id);
      shmid_ds status;
      if (shmctl(shmid, IPC_STAT, &status) != 0) return false;
      if (RoundUp(status.shm_segsz, uint64_t{1} << segment.page_shift) != bytes) {
        errno = EIDRM;
        return false;
      }
      return shmat(shmid, at, SHM_REMAP) == at;
    }
    case Backing::kDescriptor: {
      int fd = FetchDescriptor(directory, segment.id, kDescriptorFetchTimeoutMs);
      if (fd < 0) return false;
      void* map = mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                       off_t(segment.offset - segment.lead));
      int err = errno;
      close(fd);
      errno = err;
      return map == at;
    }
  }
  errno = EINVAL;
  return false;
}

}  // namespace

bool HoldSharedBacking(Runtime* runtime, const Vma& vma, uintptr_t start, uintptr_t end, MrSegment* segment,
                       BackingKey* key) {
  bool sysv = IsSysv(vma);
  if (!vma.writable) {
    Warn("ibv_reg_mr: [%#" PRIxPTR ", %#" PRIxPTR ") lies in a read-only shared mapping of '%s'; softnic "
         "registers shared memory only through writable mappings",
         start, end, vma.path.c_str());
    errno = EACCES;
    return false;
  }
  *key = BackingKey{sysv ? Backing::kSysv : Backing::kDescriptor, vma.device, vma.inode};
  auto it = runtime->shared_backings.find(*key);
  if (it == runtime->shared_backings.end()) {
    SharedBacking backing{};
    if (!CreateSharedBacking(runtime, vma, sysv, &backing)) return false;
    it = runtime->shared_backings.emplace(*key, backing).first;
  }
  SharedBacking& backing = it->second;
  backing.references++;
  uint64_t page = uint64_t{1} << backing.page_shift;
  segment->backing = key->backing;
  segment->id = backing.id;
  segment->page_shift = backing.page_shift;
  segment->offset = vma.offset + (start - vma.start);
  segment->bytes = end - start;
  // A peer maps whole pages of the backing, and a SysV segment whole.
  uint64_t mapped_begin = sysv ? 0 : segment->offset / page * page;
  uint64_t mapped_end = sysv ? backing.segment_bytes : RoundUp(segment->offset + segment->bytes, page);
  segment->lead = segment->offset - mapped_begin;
  segment->trail = mapped_end - segment->offset - segment->bytes;
  return true;
}

void ReleaseSharedBacking(Runtime* runtime, const BackingKey& key) {
  auto it = runtime->shared_backings.find(key);
  if (it == runtime->shared_backings.end() || --it->second.references > 0) return;
  if (key.backing == Backing::kSysv) {
    shmdt(it->second.hold);
  } else {
    runtime->descriptors.Withdraw(it->second.id);
  }
  runtime->shared_backings.erase(it);
}

uint8_t* MapSegments(const std::string& directory, const MrEntry& entry, uint64_t generation) {
  // A copy, checked against the generation afterwards (the entry's owner may change,
  // deregister and reuse it meanwhile): the reservation is sized from the very values that
  // are mapped, so nothing lands outside it.
  MrSegment segments[kMaxMrSegments];
  uint32_t count = std::min(entry.segment_count, kMaxMrSegments);
  std::copy_n(entry.segments, count, segments);
  uint64_t page_base = entry.page_base;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (entry.generation.load(std::memory_order_relaxed) != generation) return nullptr;
  uint64_t span = 0;
  uint64_t align = kPageBytes;
  for (uint32_t s = 0; s < count; ++s) {
    if ((s > 0 && segments[s].lead != 0) || (s + 1 < count && segments[s].trail != 0)) {
      errno = EINVAL;  // registration never writes this: a torn copy
      return nullptr;
    }
    span += segments[s].bytes;
    align = std::max(align, uint64_t{1} << std::min(segments[s].page_shift, kMaxPageShift));
  }
  if (span == 0) span = kPageBytes;
  uint64_t lead = count != 0 ? segments[0].lead : 0;
  uint64_t trail = count != 0 ? segments[count - 1].trail : 0;
  // Reserve the whole range first so the segments land side by side, as in the owner,
  // between two inaccessible guard pages: a stray access past the region faults here
  // instead of touching a neighbouring mapping. The slack lets huge pages and SysV
  // segments sit at the owner's alignment, as the kernel requires.
  size_t reserved_bytes = kPageBytes + lead + span + trail + kPageBytes + (align - kPageBytes);
  void* reserved = mmap(nullptr, reserved_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return nullptr;
  uintptr_t lowest = reinterpret_cast<uintptr_t>(reserved) + kPageBytes + lead;
  auto* first = reinterpret_cast<uint8_t*>(lowest + ((page_base - lowest) & (align - 1)));
  uint64_t offset = 0;
  bool mapped = true;
  for (uint32_t s = 0; s < count && mapped; ++s) {
    const MrSegment& segment = segments[s];
    mapped = MapSegment(directory, segment, first + offset - segment.lead);
    offset += segment.bytes;
  }
  // A change of the entry meanwhile (rereg of the range, dereg) may have let its backing
  // go, and its shmid or descriptor id name something else: only what was mapped while the
  // generation stood is the region.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (!mapped || entry.generation.load(std::memory_order_relaxed) != generation) {
    int err = mapped ? EIDRM : errno;
    munmap(reserved, reserved_bytes);
    errno = err;
    return nullptr;
  }
  return first;
}

}  // namespace softnic
