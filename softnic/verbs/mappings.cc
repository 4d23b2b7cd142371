#include "softnic/verbs/mappings.h"

#include <fcntl.h>
#include <linux/limits.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace softnic {
namespace {

constexpr size_t kMaxMappingNameBytes = PATH_MAX + 16;  // a path, and " (deleted)"

// Appends `vma`, or extends the previous mapping with it when both are adjacent pieces of
// one shared backing.
void Append(Vma vma, std::vector<Vma>* out) {
  if (!out->empty()) {
    Vma& previous = out->back();
    if (previous.shared && vma.shared && previous.end == vma.start && previous.device == vma.device &&
        previous.inode == vma.inode && previous.writable == vma.writable && previous.path == vma.path &&
        previous.offset + (previous.end - previous.start) == vma.offset) {
      previous.end = vma.end;
      return;
    }
  }
  out->push_back(std::move(vma));
}

// PROCMAP_QUERY (Linux 6.11, <linux/fs.h>): the mapping at or above an address, one ioctl
// each. Reading /proc/self/maps instead costs every line below the region, and each
// anchor is a line: registrations would grow quadratic.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104);
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaWritable = 0x02;
constexpr uint64_t kVmaShared = 0x08;
constexpr uint64_t kCoveringOrNextVma = 0x10;

}  // namespace

bool QueryMappings(uintptr_t begin, uintptr_t end, std::vector<Vma>* out, int maps_fd) {
  int maps = maps_fd >= 0 ? maps_fd : open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (maps < 0) return false;
  char name[kMaxMappingNameBytes];
  bool answered = true;
  for (uintptr_t cursor = begin; cursor < end;) {
    ProcmapQuery query{};
    query.size = sizeof(query);
    query.query_flags = kCoveringOrNextVma;
    query.query_addr = cursor;
    query.vma_name_addr = reinterpret_cast<uintptr_t>(name);
    query.vma_name_size = sizeof(name);
    if (ioctl(maps, kProcmapQuery, &query) != 0) {
      answered = errno == ENOENT;  // no mapping at or above `cursor`
      break;
    }
    if (query.vma_start >= end) break;
    Vma vma;
    vma.start = query.vma_start;
    vma.end = vma.first_end = query.vma_end;
    vma.offset = query.vma_offset;
    vma.device = makedev(query.dev_major, query.dev_minor);
    vma.inode = query.inode;
    vma.page_bytes = query.vma_page_size;
    vma.shared = (query.vma_flags & kVmaShared) != 0;
    vma.writable = (query.vma_flags & kVmaWritable) != 0;
    vma.path = query.vma_name_size != 0 ? name : "";
    Append(std::move(vma), out);
    cursor = query.vma_end;
  }
  if (maps != maps_fd) close(maps);
  return answered;
}

bool ParseMappings(uintptr_t begin, uintptr_t end, std::vector<Vma>* out) {
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return false;
  char* line = nullptr;
  size_t capacity = 0;
  ssize_t length;
  while ((length = getline(&line, &capacity, maps)) > 0) {
    unsigned long first = 0, last = 0;
    unsigned long long offset = 0, inode = 0;
    unsigned major_number = 0, minor_number = 0;
    char permissions[5] = {};
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %4s %llx %x:%x %llu %n", &first, &last, permissions, &offset, &major_number,
                    &minor_number, &inode, &path_at) < 7) {
      continue;
    }
    if (last <= begin) continue;
    if (first >= end) break;
    if (line[length - 1] == '\n') line[length - 1] = '\0';
    Vma vma;
    vma.start = first;
    vma.end = vma.first_end = last;
    vma.offset = offset;
    vma.device = makedev(major_number, minor_number);
    vma.inode = inode;
    vma.shared = permissions[3] == 's';
    vma.writable = permissions[1] == 'w';
    vma.path = line + path_at;
    Append(std::move(vma), out);
  }
  std::free(line);
  std::fclose(maps);
  return true;
}

bool ReadMappings(uintptr_t begin, uintptr_t end, std::vector<Vma>* out, int maps_fd) {
  if (QueryMappings(begin, end, out, maps_fd)) return true;
  out->clear();
  return ParseMappings(begin, end, out);
}

}  // namespace softnic
