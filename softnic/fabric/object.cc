#include "softnic/fabric/object.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace softnic {
namespace {

constexpr int kSlotShift = 56;
constexpr int kIncarnationShift = 32;
constexpr uint64_t kIncarnationMask = 0xffffff;

}  // namespace

uint64_t MakeObjectId(uint32_t slot, uint32_t incarnation, uint32_t serial) {
  return (uint64_t{slot} << kSlotShift) | ((incarnation & kIncarnationMask) << kIncarnationShift) |
         serial;
}

uint64_t ObjectOwnerId(uint64_t id) { return id & ~uint64_t{0xffffffff}; }

std::string ObjectPath(const std::string& directory, uint64_t id) {
  char name[32];
  std::snprintf(name, sizeof(name), "/o%016" PRIx64, id);
  return directory + name;
}

int CreateObject(const std::string& directory, uint64_t id, size_t bytes) {
  std::string path = ObjectPath(directory, id);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    unlink(path.c_str());
    errno = err;
    return -1;
  }
  return fd;
}

void* MapObject(const std::string& directory, uint64_t id, size_t bytes, size_t offset,
                void* fixed_address) {
  int fd = open(ObjectPath(directory, id).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  int flags = MAP_SHARED | (fixed_address != nullptr ? MAP_FIXED : 0);
  void* map = mmap(fixed_address, bytes, PROT_READ | PROT_WRITE, flags, fd, static_cast<off_t>(offset));
  int err = errno;
  close(fd);
  errno = err;
  return map == MAP_FAILED ? nullptr : map;
}

int CreateFifoObject(const std::string& directory, uint64_t id) {
  std::string path = ObjectPath(directory, id);
  if (mkfifo(path.c_str(), 0600) != 0) return -1;
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    unlink(path.c_str());
    errno = err;
  }
  return fd;
}

void DrainFifo(int fd) {
  char buffer[64];
  for (;;) {
    pollfd readable{fd, POLLIN, 0};
    if (poll(&readable, 1, 0) <= 0 || read(fd, buffer, sizeof(buffer)) <= 0) return;
  }
}

std::string PrivateSibling(const std::string& path) {
  static std::atomic<uint32_t> serial{0};
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".%x.%x", unsigned(getpid()), serial.fetch_add(1, std::memory_order_relaxed));
  return path + suffix;
}

void RemoveObject(const std::string& directory, uint64_t id) {
  unlink(ObjectPath(directory, id).c_str());
}

void RemoveObjectsOf(const std::string& directory, uint32_t slot, uint32_t incarnation) {
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return;
  uint64_t owner_bits = MakeObjectId(slot, incarnation, 0);
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != 'o') continue;
    char* end = nullptr;
    uint64_t id = std::strtoull(entry->d_name + 1, &end, 16);
    if (*end != '\0') continue;
    if (ObjectOwnerId(id) == owner_bits) unlinkat(dirfd(dir), entry->d_name, 0);
  }
  closedir(dir);
}

}  // namespace softnic
