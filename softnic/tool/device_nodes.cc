#include "softnic/tool/device_nodes.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>

namespace softnic {

bool ShowUverbsDeviceNodes(PrivateView& view, uint32_t device_count, std::string* error) {
  if (!view.Rebuild("/dev", error)) return false;
  // A host with uverbs devices of its own has the directory already (bound from the host's
  // /dev): a tmpfs over it keeps the nodes made here out of the host's.
  constexpr const char* kDirectory = "/dev/infiniband";
  if (mkdir(kDirectory, 0755) != 0 && errno != EEXIST) return FailWithErrno(error, std::string("mkdir ") + kDirectory);
  if (mount("softnic", kDirectory, "tmpfs", 0, "mode=0755") != 0) {
    return FailWithErrno(error, std::string("tmpfs on ") + kDirectory);
  }
  const std::string null_device = view.Original("/dev") + "/null";
  for (uint32_t i = 0; i < device_count; ++i) {
    const std::string node = std::string(kDirectory) + "/uverbs" + std::to_string(i);
    if (!BindOnNewFile(null_device, node, 0, error)) return false;
  }
  return true;
}

}  // namespace softnic
