// What lies under registered pages. Private memory is moved into anchor objects
// (memory.cc); memory that is already shared (SysV shm with or without SHM_HUGETLB, shared
// file, memfd and hugetlbfs mappings, shared anonymous memory) stays where it is, and a
// peer maps the same backing: SysV segments by shmid, the rest through a descriptor the
// owner serves (fabric/descriptors.h). Copying shared memory would cut the owner off from
// every other process that maps it.
#pragma once

#include <string>
#include <vector>

#include "softnic/verbs/internal.h"

namespace softnic {

// One line of /proc/self/maps, or adjacent lines of one shared backing with contiguous
// offsets (a mapping split by mprotect is still one piece of its backing).
struct Vma {
  uintptr_t start = 0;
  uintptr_t end = 0;
  uintptr_t first_end = 0;  // end of the first line: /proc/self/map_files names lines
  uint64_t offset = 0;      // of `start` in the backing (SysV: in the segment)
  uint64_t device = 0;
  uint64_t inode = 0;  // SysV: the shmid
  uint64_t page_bytes = 0;  // the kernel's page size for it; 0: not known yet
  bool shared = false;
  bool writable = false;
  std::string path;
};

// The mappings that overlap [begin, end), in address order. False with errno.
bool ReadMappings(uintptr_t begin, uintptr_t end, std::vector<Vma>* out);

// Takes a reference on the backing of [start, end), which lies inside the shared `vma`,
// and describes the run as a peer maps it. False with errno, after a warning that names
// the range and what would be valid. Caller holds anchors_mutex.
bool HoldSharedBacking(Runtime* runtime, const Vma& vma, uintptr_t start, uintptr_t end, MrSegment* segment,
                       BackingKey* key);
void ReleaseSharedBacking(Runtime* runtime, const BackingKey& key);  // caller holds anchors_mutex

// A peer's view of the registration `key` names in `entry`: its segments side by side, at
// the owner's alignment for huge pages, between two PROT_NONE guard pages. Returns where
// the owner's page_base lies; null with errno, or when the entry no longer holds `key`.
uint8_t* MapSegments(const std::string& directory, const MrEntry& entry, uint32_t key);

}  // namespace softnic
