#include "softnic/tool/device_nodes.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>

namespace softnic {
namespace {

constexpr unsigned kUverbsMajor = 231;       // the kernel's infiniband_verbs char major
constexpr unsigned kUverbsFirstMinor = 192;  // uverbs0

}  // namespace

bool ShowUverbsDeviceNodes(PrivateView& view, uint32_t device_count, std::string* error) {
  const std::string upper = view.Scratch("dev");
  for (const std::string& dir : {upper, upper + "/infiniband"}) {
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return FailWithErrno(error, "mkdir " + dir);
  }
  for (uint32_t i = 0; i < device_count; ++i) {
    const std::string node = upper + "/infiniband/uverbs" + std::to_string(i);
    if (mknod(node.c_str(), S_IFCHR | 0666, makedev(kUverbsMajor, kUverbsFirstMinor + i)) != 0 ||
        chmod(node.c_str(), 0666) != 0) {
      return FailWithErrno(error, "mknod " + node);
    }
  }
  return view.Overlay("/dev", "/dev", upper, error);
}

}  // namespace softnic
