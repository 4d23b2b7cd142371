// Named shared-memory objects inside a fabric directory: queue rings and the pages of
// registered memory. An object's id encodes (owner slot, owner incarnation, serial), so
// the objects of a process that died can be found and removed by whoever reclaims its slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace softnic {

uint64_t MakeObjectId(uint32_t slot, uint32_t incarnation, uint32_t serial);
// The id of serial 0 with the owner of `id`: no object has it (serials start at 1), so a
// process names per-process things with it, such as its descriptor service's socket.
uint64_t ObjectOwnerId(uint64_t id);
std::string ObjectPath(const std::string& directory, uint64_t id);

// Creates a zero-filled object of `bytes` and returns an fd for it (-1 and errno on failure).
int CreateObject(const std::string& directory, uint64_t id, size_t bytes);

// Maps an existing object read-write; at `fixed_address` (MAP_FIXED) when given.
// Returns nullptr with errno set on failure.
void* MapObject(const std::string& directory, uint64_t id, size_t bytes, size_t offset = 0,
                void* fixed_address = nullptr);

// Creates a FIFO object and opens it O_RDWR (so it never reports end-of-file): the fd of
// a completion channel or of a context's async events, which peers wake with one byte.
int CreateFifoObject(const std::string& directory, uint64_t id);

// Reads whatever bytes the FIFO holds without blocking.
void DrainFifo(int fd);

// A name beside `path` that no other process, and no other call in this one, uses: where
// a file or socket is made whole before link() publishes it under `path` (a publish that
// finds the name taken fails, so nobody ever sees it half-made).
std::string PrivateSibling(const std::string& path);

void RemoveObject(const std::string& directory, uint64_t id);
void RemoveObjectsOf(const std::string& directory, uint32_t slot, uint32_t incarnation);

}  // namespace softnic
