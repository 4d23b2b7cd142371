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
#include "softnic/verbs/mappings.h"

namespace softnic {

// Takes a reference on the backing of [start, end), which lies inside the shared `vma`,
// and describes the run as a peer maps it. False with errno, after a warning that names
// the range and what would be valid. Caller holds anchors_mutex.
bool HoldSharedBacking(Runtime* runtime, const Vma& vma, uintptr_t start, uintptr_t end, MrSegment* segment,
                       BackingKey* key);
void ReleaseSharedBacking(Runtime* runtime, const BackingKey& key);  // caller holds anchors_mutex

// A peer's view of `entry` as it stands at `generation` (even; layout.h): its segments side
// by side, at the owner's alignment for huge pages, between two PROT_NONE guard pages.
// Returns where the owner's page_base lies; null with errno, or when the entry's generation
// moved before the mapping was complete (a change may have released what it names).
uint8_t* MapSegments(const std::string& directory, const MrEntry& entry, uint64_t generation);

}  // namespace softnic
