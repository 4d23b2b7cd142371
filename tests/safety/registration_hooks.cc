// Registration changes no mapping a memory hook sees: with memory_event_hook.c preloaded
// (an interposer of mmap, munmap and mremap, as registration caches watch them), ibv_reg_mr
// of a buffer, a second registration of it, ibv_rereg_mr onto it, ibv_dereg_mr and a
// registration again after that record no call over the buffer's pages, for heap, stack,
// anonymous private, memfd and SysV memory. The buffer keeps its contents throughout, and
// private pages made shareable by the first registration are not moved again (the file
// behind them in /proc/self/maps stays the same).
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kHeapBytes = 64 * 1024 + 100;  // not page-aligned: neighbours share its pages
constexpr size_t kStackBytes = 8 * 1024;
constexpr size_t kMappedBytes = 1 << 20;
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

using EventsOver = size_t (*)(uintptr_t, uintptr_t);
EventsOver events_over = nullptr;
int failures = 0;

void Fail(const char* kind, const std::string& what) {
  std::fprintf(stderr, "registration_hooks: %s: %s\n", kind, what.c_str());
  ++failures;
}

uintptr_t PageDown(uintptr_t a) { return a & ~(kPageBytes - 1); }
uintptr_t PageUp(uintptr_t a) { return PageDown(a + kPageBytes - 1); }

// "device inode" of the /proc/self/maps line that holds `address`.
std::string BackingOf(uintptr_t address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode;
    fields >> range >> permissions >> offset >> device >> inode;
    uintptr_t first = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    uintptr_t last = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    if (first <= address && address < last) return device + " " + inode + " " + permissions;
  }
  return "unmapped";
}

void Fill(uint8_t* buffer, size_t bytes, uint8_t seed) {
  for (size_t i = 0; i < bytes; ++i) buffer[i] = uint8_t(seed + i * 7);
}

bool Holds(const uint8_t* buffer, size_t bytes, uint8_t seed) {
  for (size_t i = 0; i < bytes; ++i) {
    if (buffer[i] != uint8_t(seed + i * 7)) return false;
  }
  return true;
}

ibv_mr* Register(ibv_pd* pd, const char* kind, uint8_t* buffer, size_t bytes) {
  ibv_mr* mr = ibv_reg_mr(pd, buffer, bytes, kAccess);
  if (mr == nullptr) Fail(kind, std::string("ibv_reg_mr: ") + std::strerror(errno));
  return mr;
}

// Every verb that touches the registration of `buffer`, with no hook event over its pages.
void Check(ibv_pd* pd, const char* kind, uint8_t* buffer, size_t bytes) {
  const uintptr_t begin = PageDown(reinterpret_cast<uintptr_t>(buffer));
  const uintptr_t end = PageUp(reinterpret_cast<uintptr_t>(buffer) + bytes);
  Fill(buffer, bytes, 11);
  const size_t before = events_over(begin, end);
  ibv_mr* first = Register(pd, kind, buffer, bytes);
  if (first == nullptr) return;
  const std::string backing = BackingOf(begin);
  ibv_mr* second = Register(pd, kind, buffer, bytes);
  if (second != nullptr && ibv_rereg_mr(second, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, buffer, bytes, 0) != 0) {
    Fail(kind, "ibv_rereg_mr onto the same range failed");
  }
  Fill(buffer, bytes, 23);
  ibv_dereg_mr(first);
  if (second != nullptr) ibv_dereg_mr(second);
  if (!Holds(buffer, bytes, 23)) Fail(kind, "the buffer lost the owner's stores across registration");
  ibv_mr* again = Register(pd, kind, buffer, bytes);
  if (again != nullptr) ibv_dereg_mr(again);
  if (BackingOf(begin) != backing) {
    Fail(kind, "registering again moved the pages: " + backing + " became " + BackingOf(begin));
  }
  if (!Holds(buffer, bytes, 23)) Fail(kind, "the buffer lost its contents when registered again");
  const size_t after = events_over(begin, end);
  if (after != before) {
    char range[96];
    std::snprintf(range, sizeof(range), "[%#" PRIxPTR ", %#" PRIxPTR ")", begin, end);
    Fail(kind, std::to_string(after - before) + " mmap/munmap/mremap call(s) over the buffer's pages " + range);
  }
}

}  // namespace

int main() {
  events_over = reinterpret_cast<EventsOver>(dlsym(RTLD_DEFAULT, "rdmalab_memory_events_over"));
  if (events_over == nullptr) {
    std::fprintf(stderr, "registration_hooks: run with LD_PRELOAD=<memory_event_hook library>\n");
    return 2;
  }
  // The hook sees what the program itself does: otherwise silence proves nothing.
  void* scratch = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(scratch, kPageBytes);
  if (events_over(reinterpret_cast<uintptr_t>(scratch), reinterpret_cast<uintptr_t>(scratch) + kPageBytes) < 2) {
    std::fprintf(stderr, "registration_hooks: the interposer missed this program's own mmap and munmap\n");
    return 2;
  }
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  ibv_context* context = list != nullptr && count > 0 ? ibv_open_device(list[0]) : nullptr;
  ibv_pd* pd = context != nullptr ? ibv_alloc_pd(context) : nullptr;
  if (pd == nullptr) {
    std::fprintf(stderr, "registration_hooks: no RDMA device or PD\n");
    return 1;
  }

  auto* heap = static_cast<uint8_t*>(std::malloc(kHeapBytes));
  Check(pd, "heap", heap, kHeapBytes);

  // Page-aligned: the pages below it hold the frames of the calls that register it.
  alignas(kPageBytes) uint8_t stack[kStackBytes];
  Check(pd, "stack", stack, sizeof(stack));

  void* anonymous = mmap(nullptr, kMappedBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (anonymous == MAP_FAILED) return 1;
  Check(pd, "anonymous private", static_cast<uint8_t*>(anonymous), kMappedBytes);

  int memfd = memfd_create("registration_hooks", MFD_CLOEXEC);
  void* file = memfd >= 0 && ftruncate(memfd, kMappedBytes) == 0
                   ? mmap(nullptr, kMappedBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0)
                   : MAP_FAILED;
  if (file == MAP_FAILED) return 1;
  Check(pd, "memfd", static_cast<uint8_t*>(file), kMappedBytes);

  int shmid = shmget(IPC_PRIVATE, kMappedBytes, IPC_CREAT | 0600);
  void* segment = shmid >= 0 ? shmat(shmid, nullptr, 0) : reinterpret_cast<void*>(-1);
  if (shmid >= 0) shmctl(shmid, IPC_RMID, nullptr);
  if (segment == reinterpret_cast<void*>(-1)) {
    std::fprintf(stderr, "registration_hooks: no SysV segment (%s): SysV case skipped\n", std::strerror(errno));
  } else {
    Check(pd, "SysV", static_cast<uint8_t*>(segment), kMappedBytes);
  }

  ibv_dealloc_pd(pd);
  ibv_close_device(context);
  ibv_free_device_list(list);
  if (failures == 0) std::printf("registration_hooks: no hook event over any registered buffer\n");
  return failures == 0 ? 0 : 1;
}
