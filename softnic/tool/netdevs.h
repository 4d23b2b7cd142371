// `softnic run --netdevs`: each softnic device gets a network interface of its own, as a
// NIC has, in a network namespace of the program's own. Programs that find a verbs device's
// address through its netdev (rdma-core's tests: /sys/class/infiniband/DEV/device/net/IF,
// then `ip addr show IF`) then find the address softnic's librdmacm resolves, and can bind
// sockets to it. The namespace, its interfaces and the sysfs view go with the program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "softnic/tool/private_view.h"

namespace softnic {

struct NetdevSpec {
  std::string device;     // the softnic device it belongs to ("softnic0")
  std::string interface;  // its name in the namespace ("snic0")
  uint32_t ipv4 = 0;      // host byte order
};

// "snic<index>": short enough for IFNAMSIZ whatever the device count.
std::string NetdevName(uint32_t device_index);

// Enters a new network namespace with `lo` up and one interface per spec, up and holding
// its address (/24): one end of a veth pair whose other end, IF + "p", is up beside it, so
// the interface has a carrier. Then shows /sys in `view` as this namespace's sysfs
// plus class/infiniband/DEV/device/net/IF, a link to class/net/IF. False with `error`
// set on failure.
bool ShowNetdevs(PrivateView& view, const std::vector<NetdevSpec>& specs, std::string* error);

}  // namespace softnic
