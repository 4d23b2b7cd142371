// Named shared-memory objects inside a fabric directory: queue rings and the pages of
// registered memory. An object's id encodes (owner slot, owner incarnation, serial), so
// the objects of a process that died can be found and removed by whoever reclaims its slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace softnic {

uint64_t MakeObjectId(uint32_t slot, uint32_t incarnation, uint32_t serial);
std::string ObjectPath(const std::string& directory, uint64_t id);

// Creates a zero-filled object of `bytes` and returns an fd for it (-1 and errno on failure).
int CreateObject(const std::string& directory, uint64_t id, size_t bytes);

// Maps an existing object read-write; at `fixed_address` (MAP_FIXED) when given.
// Returns nullptr with errno set on failure.
void* MapObject(const std::string& directory, uint64_t id, size_t bytes, size_t offset = 0,
                void* fixed_address = nullptr);

void RemoveObject(const std::string& directory, uint64_t id);
void RemoveObjectsOf(const std::string& directory, uint32_t slot, uint32_t incarnation);

}  // namespace softnic
