// An LD_PRELOAD interposer of mmap, munmap and mremap that records the address ranges each
// call touches, as the memory hooks of registration caches watch them (UCX's UCM, Open
// MPI's patcher, libfabric's memhooks): registration_hooks.cc asks it, through
// rdmalab_memory_events_over, whether registering a buffer touched the buffer's pages.
// It calls the kernel itself, so that no lookup of the next definition (dlsym, which may
// allocate and map) runs inside a hook.
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

enum { kMaxEvents = 1 << 16 };

struct Event {
  uintptr_t start;
  uintptr_t end;
};

static struct Event events[kMaxEvents];
static atomic_size_t event_count;

static void Record(const void* start, size_t bytes) {
  size_t i = atomic_fetch_add(&event_count, 1);
  if (i < kMaxEvents) {
    events[i].start = (uintptr_t)start;
    events[i].end = (uintptr_t)start + bytes;
  }
}

void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) {
  void* result = (void*)syscall(SYS_mmap, addr, length, prot, flags, fd, offset);
  Record(result != MAP_FAILED ? result : addr, length);
  return result;
}

void* mmap64(void* addr, size_t length, int prot, int flags, int fd, off_t offset)
    __attribute__((alias("mmap")));

int munmap(void* addr, size_t length) {
  Record(addr, length);
  return (int)syscall(SYS_munmap, addr, length);
}

void* mremap(void* old_address, size_t old_size, size_t new_size, int flags, ...) {
  void* new_address = NULL;
  if (flags & MREMAP_FIXED) {
    va_list arguments;
    va_start(arguments, flags);
    new_address = va_arg(arguments, void*);
    va_end(arguments);
  }
  void* result = (void*)syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address);
  Record(old_address, old_size);
  if (result != MAP_FAILED) Record(result, new_size);
  return result;
}

// Calls recorded so far that touched [start, end); (size_t)-1 once the record overflowed.
size_t rdmalab_memory_events_over(uintptr_t start, uintptr_t end) {
  size_t n = atomic_load(&event_count);
  if (n > kMaxEvents) return (size_t)-1;
  size_t over = 0;
  for (size_t i = 0; i < n; ++i) over += events[i].start < end && start < events[i].end;
  return over;
}
