// Creating, opening and removing a fabric: the shared file of layout.h in a directory
// that only its owner can enter (/dev/shm/softnic-<uid>-<name>, mode 0700).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "softnic/fabric/layout.h"

namespace softnic {

struct FabricOptions {
  std::string name = "default";
  uint32_t device_count = kDefaultDevices;
  LinkLayer link_layer = LinkLayer::kInfiniBand;
  DeviceAttributes attributes;
};

// Options from the environment (SOFTNIC_FABRIC, SOFTNIC_DEVICES, SOFTNIC_LINK), used
// when a verbs program creates the fabric on first use. Bad values are reported in
// *error, naming the variable, the value and what is valid.
bool FabricOptionsFromEnvironment(FabricOptions* options, std::string* error);

bool ValidateFabricName(const std::string& name, std::string* error);
bool ParseLinkLayer(const std::string& text, LinkLayer* link, std::string* error);
const char* LinkLayerName(LinkLayer link);
std::string FabricDirectory(const std::string& name);
// The names of this user's fabrics (their directories in /dev/shm), sorted.
std::vector<std::string> ListFabrics();
// Device `index`'s IPv4 address on fabric `name`, host byte order: 10.55.<hash of the
// name>.<index + 1> for the first kDevicesPerSubnet devices, then the next /24 up
// (10.55.<hash + 1>.1, ...): host numbers stay in 1..254. A RoCE fabric's GIDs are its
// IPv4-mapped form; librdmacm resolves it.
constexpr uint32_t kDevicesPerSubnet = 254;
uint32_t DeviceIpv4(const std::string& name, uint32_t index);

class Fabric {
 public:
  Fabric() = default;
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;
  ~Fabric();

  enum class Mode { kOpenExisting, kCreateNew, kOpenOrCreate };
  // Returns false with a message in *error (missing fabric, permission, bad options).
  bool Attach(const FabricOptions& options, Mode mode, std::string* error);

  FabricHeader* header() const { return header_; }

  // Calls visit(entry) for the entries of table[0, count) (a table inside the header) that
  // lie on pages of the file ever written, found with SEEK_DATA: an entry on a hole is
  // zero, i.e. free, and reading it through the mapping would allocate the hole's pages
  // (tmpfs does), up to a 256-device fabric's whole ~1 GB of tables. Each entry is visited
  // at most once; where SEEK_DATA fails, every entry is.
  template <typename Entry, typename Visit>
  void ForEachWrittenEntry(Entry* table, size_t count, Visit&& visit) const {
    const off_t begin = reinterpret_cast<const char*>(table) - reinterpret_cast<const char*>(header_);
    const off_t end = begin + static_cast<off_t>(count * sizeof(Entry));
    size_t next = 0;  // entries below it were visited (one may straddle two written runs)
    for (off_t at = begin; at < end;) {
      const off_t data = lseek(fd_, at, SEEK_DATA);
      if (data < 0 && errno != ENXIO) {  // no SEEK_DATA here: every entry
        for (size_t i = 0; i < count; ++i) visit(table[i]);
        return;
      }
      if (data < 0 || data >= end) return;  // ENXIO: nothing written past `at`
      off_t hole = lseek(fd_, data, SEEK_HOLE);
      if (hole < 0 || hole > end) hole = end;
      const size_t first = std::max(next, static_cast<size_t>(std::max<off_t>(data - begin, 0)) / sizeof(Entry));
      const size_t last = std::min(count, (static_cast<size_t>(hole - begin) + sizeof(Entry) - 1) / sizeof(Entry));
      for (size_t i = first; i < last; ++i) visit(table[i]);
      next = std::max(next, last);
      at = hole;
    }
  }
  const std::string& directory() const { return directory_; }
  const std::string& name() const { return name_; }

 private:
  enum class OpenResult { kOk, kFailed, kStaleUnused };
  bool CreateFile(const FabricOptions& options, std::string* error);
  OpenResult OpenFile(std::string* error);
  bool Map(int fd, std::string* error);

  FabricHeader* header_ = nullptr;
  // Held open with a shared flock for as long as we are attached: a fabric file nobody
  // holds is unused, so an incompatible or half-made one can be replaced safely.
  int fd_ = -1;
  std::string directory_;
  std::string name_;
};

// Deletes the fabric's directory with every object in it. Processes that still have it
// mapped keep working on their mappings; new processes get a fresh fabric.
bool RemoveFabric(const std::string& name, std::string* error);

// Sum of a device's counters over live and retired processes.
void SumDeviceCounters(const FabricHeader& fabric, uint32_t device, uint64_t out[kCounterCount]);

}  // namespace softnic
