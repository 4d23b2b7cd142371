#include "softnic/fabric/fabric.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

#include "softnic/fabric/accounting.h"
#include "softnic/fabric/object.h"

namespace softnic {
namespace {

constexpr auto kCreationWait = std::chrono::seconds(5);
constexpr int kReplaceAttempts = 3;
constexpr size_t kMaxFabricNameBytes = 64;
constexpr uint64_t kGuidPrefix = 0x0002c90300000000ull;  // a Mellanox-like OUI

std::string Errno(const std::string& what, int err) { return what + ": " + std::strerror(err); }

uint32_t NameHash(const std::string& name) {
  uint32_t hash = 2166136261u;  // FNV-1a
  for (unsigned char c : name) hash = (hash ^ c) * 16777619u;
  return hash;
}

}  // namespace

uint32_t DeviceIpv4(const std::string& name, uint32_t index) {
  const uint32_t subnet = (NameHash(name) + index / kDevicesPerSubnet) & 0xff;
  return (10u << 24) | (55u << 16) | (subnet << 8) | (index % kDevicesPerSubnet + 1);
}

namespace {

void InitRobustMutex(pthread_mutex_t* mutex) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(mutex, &attr);
  pthread_mutexattr_destroy(&attr);
}

void InitDevice(DeviceEntry* device, uint32_t index, const std::string& fabric, LinkLayer link) {
  std::snprintf(device->name, sizeof(device->name), "softnic%u", index);
  uint32_t hash = NameHash(fabric);
  device->node_guid = kGuidPrefix | (uint64_t{hash & 0xffff} << 16) | (index + 1);
  device->lid = static_cast<uint16_t>(index + 1);
  std::memset(device->gid, 0, sizeof(device->gid));
  if (link == LinkLayer::kInfiniBand) {
    // Link-local GID: fe80::/64 with the port GUID as interface id.
    device->gid[0] = 0xfe;
    device->gid[1] = 0x80;
    for (int i = 0; i < 8; ++i) device->gid[8 + i] = uint8_t(device->node_guid >> (56 - 8 * i));
  } else {
    // RoCEv2 GID of the device's IPv4 address, ::ffff:a.b.c.d.
    const uint32_t address = DeviceIpv4(fabric, index);
    device->gid[10] = 0xff;
    device->gid[11] = 0xff;
    for (int i = 0; i < 4; ++i) device->gid[12 + i] = uint8_t(address >> (24 - 8 * i));
  }
}

bool ParseUnsigned(const char* text, uint64_t max, uint64_t* value) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long parsed = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || parsed > max) return false;
  *value = parsed;
  return true;
}

bool RemoveDirectoryContents(const std::string& directory) {
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return false;
  while (dirent* entry = readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
    unlinkat(dirfd(dir), entry->d_name, 0);
  }
  closedir(dir);
  return true;
}

}  // namespace

bool ValidateFabricName(const std::string& name, std::string* error) {
  bool ok = !name.empty() && name.size() <= kMaxFabricNameBytes && name[0] != '.';
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  }
  if (!ok) {
    *error = "invalid fabric name '" + name +
             "': use 1-64 characters from [A-Za-z0-9._-], not starting with '.'";
  }
  return ok;
}

bool ParseLinkLayer(const std::string& text, LinkLayer* link, std::string* error) {
  if (text == "ib") {
    *link = LinkLayer::kInfiniBand;
  } else if (text == "roce") {
    *link = LinkLayer::kEthernet;
  } else {
    *error = "invalid link layer '" + text + "': valid are 'ib' (LIDs) and 'roce' (GIDs)";
    return false;
  }
  return true;
}

const char* LinkLayerName(LinkLayer link) {
  return link == LinkLayer::kInfiniBand ? "ib" : "roce";
}

bool FabricOptionsFromEnvironment(FabricOptions* options, std::string* error) {
  if (const char* name = std::getenv("SOFTNIC_FABRIC"); name && *name) options->name = name;
  if (!ValidateFabricName(options->name, error)) {
    *error = "SOFTNIC_FABRIC: " + *error;
    return false;
  }
  if (const char* devices = std::getenv("SOFTNIC_DEVICES"); devices && *devices) {
    uint64_t count = 0;
    if (!ParseUnsigned(devices, kMaxDevices, &count) || count == 0) {
      *error = std::string("SOFTNIC_DEVICES='") + devices + "' is not valid: use 1.." +
               std::to_string(kMaxDevices);
      return false;
    }
    options->device_count = static_cast<uint32_t>(count);
  }
  if (const char* link = std::getenv("SOFTNIC_LINK"); link && *link) {
    if (!ParseLinkLayer(link, &options->link_layer, error)) {
      *error = "SOFTNIC_LINK: " + *error;
      return false;
    }
  }
  return true;
}

namespace {
std::string FabricDirectoryPrefix() { return "softnic-" + std::to_string(getuid()) + "-"; }
}  // namespace

std::string FabricDirectory(const std::string& name) { return "/dev/shm/" + FabricDirectoryPrefix() + name; }

std::vector<std::string> ListFabrics() {
  std::vector<std::string> names;
  DIR* shm = opendir("/dev/shm");
  if (shm == nullptr) return names;
  const std::string prefix = FabricDirectoryPrefix();
  while (const dirent* entry = readdir(shm)) {
    std::string entry_name = entry->d_name;
    if (entry->d_type == DT_DIR && entry_name.starts_with(prefix)) names.push_back(entry_name.substr(prefix.size()));
  }
  closedir(shm);
  std::sort(names.begin(), names.end());
  return names;
}

Fabric::~Fabric() {
  if (header_ != nullptr) munmap(header_, sizeof(FabricHeader));
  if (fd_ >= 0) close(fd_);
}

bool Fabric::Attach(const FabricOptions& options, Mode mode, std::string* error) {
  if (!ValidateFabricName(options.name, error)) return false;
  if (options.device_count == 0 || options.device_count > kMaxDevices) {
    *error = "invalid device count " + std::to_string(options.device_count) + ": use 1.." +
             std::to_string(kMaxDevices);
    return false;
  }
  name_ = options.name;
  directory_ = FabricDirectory(options.name);
  if (mode != Mode::kOpenExisting && mkdir(directory_.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = Errno("cannot create fabric directory " + directory_, errno);
    return false;
  }
  for (int attempt = 0; attempt < kReplaceAttempts; ++attempt) {
    if (mode != Mode::kOpenExisting) {
      if (CreateFile(options, error)) return true;
      if (!error->empty()) return false;
      if (mode == Mode::kCreateNew) {
        *error = "fabric '" + name_ + "' already exists (remove it with `softnic fabric rm --fabric " +
                 name_ + "`)";
        return false;
      }
    }
    OpenResult result = OpenFile(error);
    if (result == OpenResult::kOk) return true;
    if (result == OpenResult::kFailed) return false;
    if (mode == Mode::kOpenExisting) {
      *error = "fabric '" + name_ + "' was made by another softnic version or never finished, and " +
               "nobody uses it; remove it with `softnic fabric rm --fabric " + name_ + "`";
      return false;
    }
    RemoveDirectoryContents(directory_);  // unused and unreadable by us: start afresh
  }
  *error = "fabric '" + name_ + "' keeps changing under us (" + directory_ + ")";
  return false;
}

bool Fabric::Map(int fd, std::string* error) {
  void* map = mmap(nullptr, sizeof(FabricHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    *error = Errno("cannot map fabric " + directory_ + "/fabric", errno);
    return false;
  }
  header_ = static_cast<FabricHeader*>(map);
  fd_ = fd;
  return true;
}

// Returns false with an empty *error when the fabric already exists. The header is made
// in a draft file of this creator's own and linked under the fabric's name only once
// complete, so whoever opens "fabric" finds it whole. (Created in place, a creator caught
// between its open and its flock looked like a dead creator's leftover to a process
// starting beside it, which replaced the fabric under it: the two then handed out the
// same object ids and one failed with EEXIST.)
bool Fabric::CreateFile(const FabricOptions& options, std::string* error) {
  std::string path = directory_ + "/fabric";
  if (access(path.c_str(), F_OK) == 0) {  // the usual case: spare drafting a header to lose
    error->clear();
    return false;
  }
  std::string draft = PrivateSibling(path);
  unlink(draft.c_str());  // a dead process's draft, made under our pid
  int fd = open(draft.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = Errno("cannot create fabric " + draft, errno);
    return false;
  }
  flock(fd, LOCK_SH);
  if (ftruncate(fd, sizeof(FabricHeader)) != 0 || !Map(fd, error)) {
    if (error->empty()) *error = Errno("cannot size fabric " + draft, errno);
    close(fd);
    unlink(draft.c_str());
    return false;
  }
  // The file is zero-filled, which is the initial state of every atomic and table entry.
  FabricHeader* header = header_;
  header->layout_version = kFabricLayoutVersion;
  header->device_count = options.device_count;
  header->link_layer = options.link_layer;
  header->attributes = options.attributes;
  InitRobustMutex(&header->admin);
  for (ProcessSlot& slot : header->processes) InitRobustMutex(&slot.liveness);
  for (uint32_t i = 0; i < options.device_count; ++i) {
    InitDevice(&header->devices[i], i, options.name, options.link_layer);
  }
  header->magic.store(kFabricMagic, std::memory_order_release);
  int published = link(draft.c_str(), path.c_str());
  int link_errno = errno;
  unlink(draft.c_str());
  if (published == 0) return true;
  munmap(header_, sizeof(FabricHeader));
  header_ = nullptr;
  close(fd);
  fd_ = -1;
  if (link_errno == EEXIST) {  // another creator published first: use theirs
    error->clear();
    return false;
  }
  *error = Errno("cannot publish fabric " + path, link_errno);
  return false;
}

Fabric::OpenResult Fabric::OpenFile(std::string* error) {
  std::string path = directory_ + "/fabric";
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *error = "fabric '" + name_ + "' does not exist (" + path +
               "); create it with `softnic fabric create --fabric " + name_ + "`";
    } else {
      *error = Errno("cannot open fabric " + path, errno);
    }
    return OpenResult::kFailed;
  }
  flock(fd, LOCK_SH);
  auto usable = [&] {
    struct stat st {};
    fstat(fd, &st);
    if (static_cast<size_t>(st.st_size) != sizeof(FabricHeader)) return false;
    uint32_t words[2];  // magic, layout_version: the first two fields of FabricHeader
    if (pread(fd, words, sizeof(words), 0) != sizeof(words)) return false;
    return words[0] == kFabricMagic && words[1] == kFabricLayoutVersion;
  };
  auto deadline = std::chrono::steady_clock::now() + kCreationWait;
  while (!usable()) {
    // Nobody else holds the file: it is a leftover (another version, or a creator that
    // died half-way), not a fabric being made right now.
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      close(fd);
      return OpenResult::kStaleUnused;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      close(fd);
      *error = "fabric " + path + " is in use but has a layout this softnic cannot read " +
               "(another version?); stop its users or remove it with `softnic fabric rm --fabric " +
               name_ + "`";
      return OpenResult::kFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!Map(fd, error)) {
    close(fd);
    return OpenResult::kFailed;
  }
  return OpenResult::kOk;
}

bool RemoveFabric(const std::string& name, std::string* error) {
  if (!ValidateFabricName(name, error)) return false;
  std::string directory = FabricDirectory(name);
  if (!RemoveDirectoryContents(directory)) {
    if (errno == ENOENT) return true;
    *error = Errno("cannot open " + directory, errno);
    return false;
  }
  if (rmdir(directory.c_str()) != 0 && errno != ENOENT) {
    *error = Errno("cannot remove " + directory, errno);
    return false;
  }
  return true;
}

void SumDeviceCounters(const FabricHeader& fabric, uint32_t device, uint64_t out[kCounterCount]) {
  std::fill(out, out + kCounterCount, 0);
  SumCounterBlock(fabric.devices[device].retired, out);
  for (const ProcessSlot& slot : fabric.processes) {
    for (uint32_t lane = 0; lane < LanesInUse(slot); ++lane) SumCounterBlock(slot.counters[lane][device], out);
  }
}

}  // namespace softnic
