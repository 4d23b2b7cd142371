// The mappings of this process under a range of addresses, as /proc/self/maps describes
// them: what registration needs to tell private memory from shared memory and to name the
// latter's backing (verbs/backing.h). Depends on libc only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace softnic {

// One line of /proc/self/maps, or adjacent lines of one shared backing with contiguous
// offsets (a mapping split by mprotect is still one piece of its backing).
struct Vma {
  uintptr_t start = 0;
  uintptr_t end = 0;
  uintptr_t first_end = 0;  // end of the first line: /proc/self/map_files names lines
  uint64_t offset = 0;      // of `start` in the backing (SysV: in the segment)
  uint64_t device = 0;
  uint64_t inode = 0;       // SysV: the shmid
  uint64_t page_bytes = 0;  // the kernel's page size for it; 0: not known
  bool shared = false;
  bool writable = false;
  std::string path;
};

// The mappings that overlap [begin, end), in address order. False with errno. `maps_fd`, when
// not -1, is this process's /proc/self/maps held open by the caller: opening it costs more
// than the query of a registration that finds its pages anchored already.
bool ReadMappings(uintptr_t begin, uintptr_t end, std::vector<Vma>* out, int maps_fd = -1);

// The two ways ReadMappings takes. QueryMappings asks the kernel with PROCMAP_QUERY (Linux
// 6.11), one ioctl per mapping, and knows page sizes; false when the kernel cannot answer.
// ParseMappings reads the text, every line below the range too.
bool QueryMappings(uintptr_t begin, uintptr_t end, std::vector<Vma>* out, int maps_fd = -1);
bool ParseMappings(uintptr_t begin, uintptr_t end, std::vector<Vma>* out);

}  // namespace softnic
