// Sysfs reads for other rdma-core libraries: librdmacm, for one, learns the kernel's
// rdma_cm ABI version through these (class/misc/rdma_cm/abi_version). softnic devices
// have no sysfs entries, so questions about them get "file missing" (-1), while real
// kernel files read exactly as with rdma-core.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "softnic/abi/private_api.h"

namespace {

// rdma-core's cap on SYSFS_PATH; a longer value is truncated, not rejected.
constexpr size_t kMaxSysfsPathBytes = 256;

std::string sysfs_root() {
  // A set-uid program must not let its caller redirect which files it reads.
  const char* env = getuid() == geteuid() ? std::getenv("SYSFS_PATH") : nullptr;
  if (env == nullptr) return "/sys";
  std::string root(env, strnlen(env, kMaxSysfsPathBytes));
  while (!root.empty() && root.back() == '/') root.pop_back();
  return root;
}

}  // namespace

extern "C" const char* ibv_get_sysfs_path(void) {
  // Decided once per process: callers keep the returned pointer.
  static const std::string root = sysfs_root();
  return root.c_str();
}

// Returns the number of bytes read, with one trailing newline stripped and the text
// NUL-terminated, or -1 (errno set) if the file is missing or does not fit in `size`
// with its terminator: a silently truncated attribute would be worse than none.
extern "C" int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  const std::string path = std::string(dir) + "/" + file;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t len = read(fd, buf, size);
  const int read_errno = errno;
  close(fd);
  if (len < 0) {
    errno = read_errno;
    return -1;
  }
  if (len > 0 && buf[len - 1] == '\n') {
    buf[--len] = '\0';
  } else if (static_cast<size_t>(len) < size) {
    buf[len] = '\0';
  } else {
    errno = EOVERFLOW;
    return -1;
  }
  return static_cast<int>(len);
}
