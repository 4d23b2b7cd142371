#include "softnic/tool/device_nodes.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace softnic {
namespace {

// Where this namespace's private tmpfs goes: an empty directory on the host, reused by
// every run (each mounts its own tmpfs there, seen by nobody else).
constexpr const char* kScratch = "/tmp/softnic-device-nodes";
constexpr unsigned kUverbsMajor = 231;       // the kernel's infiniband_verbs char major
constexpr unsigned kUverbsFirstMinor = 192;  // uverbs0

bool Fail(std::string* error, const std::string& what) {
  *error = what + ": " + std::strerror(errno);
  return false;
}

// Mount points strictly below /dev, outermost first, from /proc/self/mounts.
std::vector<std::string> DevSubmounts() {
  std::vector<std::string> mounts;
  std::ifstream in("/proc/self/mounts");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string source, target;
    fields >> source >> target;
    if (target.rfind("/dev/", 0) == 0) mounts.push_back(target);
  }
  return mounts;
}

}  // namespace

bool ShowUverbsDeviceNodes(uint32_t device_count, std::string* error) {
  if (unshare(CLONE_NEWNS) != 0) return Fail(error, "unshare(CLONE_NEWNS) (needs root)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return Fail(error, "making / private");
  if (mkdir(kScratch, 0700) != 0 && errno != EEXIST) return Fail(error, std::string("mkdir ") + kScratch);
  if (mount("softnic", kScratch, "tmpfs", 0, "mode=0700,size=1m") != 0) return Fail(error, "tmpfs on scratch");
  const std::string scratch = kScratch;
  for (const char* dir : {"/upper", "/upper/infiniband", "/work", "/keep"}) {
    if (mkdir((scratch + dir).c_str(), 0755) != 0) return Fail(error, "mkdir " + scratch + dir);
  }
  for (uint32_t i = 0; i < device_count; ++i) {
    const std::string node = scratch + "/upper/infiniband/uverbs" + std::to_string(i);
    if (mknod(node.c_str(), S_IFCHR | 0666, makedev(kUverbsMajor, kUverbsFirstMinor + i)) != 0 ||
        chmod(node.c_str(), 0666) != 0) {
      return Fail(error, "mknod " + node);
    }
  }
  // The overlay hides the mounts below /dev: park them, then put them back on top.
  const std::vector<std::string> submounts = DevSubmounts();
  for (size_t i = 0; i < submounts.size(); ++i) {
    const std::string parked = scratch + "/keep/" + std::to_string(i);
    if (mkdir(parked.c_str(), 0700) != 0 || mount(submounts[i].c_str(), parked.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return Fail(error, "parking " + submounts[i]);
    }
  }
  const std::string options = "lowerdir=/dev,upperdir=" + scratch + "/upper,workdir=" + scratch + "/work";
  if (mount("softnic", "/dev", "overlay", 0, options.c_str()) != 0) return Fail(error, "overlay on /dev");
  for (size_t i = 0; i < submounts.size(); ++i) {
    const std::string parked = scratch + "/keep/" + std::to_string(i);
    if (mount(parked.c_str(), submounts[i].c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return Fail(error, "restoring " + submounts[i]);
    }
  }
  return true;
}

}  // namespace softnic
