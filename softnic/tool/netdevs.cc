#include "softnic/tool/netdevs.h"

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softnic {
namespace {

constexpr uint8_t kPrefixLength = 24;        // the fabric's addresses share 10.55.<hash>.0/24
constexpr int kNetlinkReplyTimeoutSec = 5;   // the kernel answers at once; never wait forever
constexpr size_t kRequestBytes = 512;
// The peer end of each device's veth pair: "snic0" + "p".
constexpr const char* kPeerSuffix = "p";

// One rtnetlink request: header, fixed body, attributes (nested ones closed by EndNest).
class Request {
 public:
  Request(uint16_t type, uint16_t flags, const void* body, size_t body_bytes) {
    header()->nlmsg_len = NLMSG_LENGTH(body_bytes);
    header()->nlmsg_type = type;
    header()->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    std::memcpy(NLMSG_DATA(header()), body, body_bytes);
  }
  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buffer_); }
  rtattr* Add(uint16_t type, const void* data, size_t bytes) {
    rtattr* attr = reinterpret_cast<rtattr*>(buffer_ + NLMSG_ALIGN(header()->nlmsg_len));
    attr->rta_type = type;
    attr->rta_len = RTA_LENGTH(bytes);
    if (bytes) std::memcpy(RTA_DATA(attr), data, bytes);
    header()->nlmsg_len = NLMSG_ALIGN(header()->nlmsg_len) + RTA_ALIGN(attr->rta_len);
    return attr;
  }
  rtattr* BeginNest(uint16_t type) { return Add(type, nullptr, 0); }
  void EndNest(rtattr* nest) {
    nest->rta_len = uint16_t(buffer_ + header()->nlmsg_len - reinterpret_cast<char*>(nest));
  }

 private:
  alignas(nlmsghdr) char buffer_[kRequestBytes] = {};
};

class RouteSocket {
 public:
  ~RouteSocket() {
    if (fd_ >= 0) close(fd_);
  }
  bool Open(std::string* error) {
    fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd_ < 0) return FailWithErrno(error, "netlink socket");
    timeval timeout{kNetlinkReplyTimeoutSec, 0};
    if (setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) != 0) {
      return FailWithErrno(error, "netlink SO_RCVTIMEO");
    }
    return true;
  }
  // Sends `request` and returns the kernel's answer: 0, or the errno it refused with.
  int Transact(Request& request) {
    nlmsghdr* header = request.header();
    header->nlmsg_seq = ++sequence_;
    if (send(fd_, header, header->nlmsg_len, 0) != ssize_t(header->nlmsg_len)) return errno;
    alignas(nlmsghdr) char reply[4096];
    for (;;) {
      ssize_t n = recv(fd_, reply, sizeof(reply), 0);
      if (n < 0) return errno == EAGAIN ? ETIMEDOUT : errno;
      for (nlmsghdr* h = reinterpret_cast<nlmsghdr*>(reply); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_seq != sequence_ || h->nlmsg_type != NLMSG_ERROR) continue;
        return -static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
      }
    }
  }

 private:
  int fd_ = -1;
  uint32_t sequence_ = 0;
};

bool Refused(std::string* error, const std::string& what, int code) {
  *error = what + ": " + std::strerror(code);
  return false;
}

// A veth pair, `name` and its peer, both in this namespace. veth rather than dummy or ifb:
// loading those modules also makes dummy0 / ifb0 and ifb1 in the root namespace.
int CreateVethPair(RouteSocket& rtnl, const std::string& name, const std::string& peer) {
  ifinfomsg link{};
  link.ifi_family = AF_UNSPEC;
  Request request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &link, sizeof(link));
  request.Add(IFLA_IFNAME, name.c_str(), name.size() + 1);
  rtattr* info = request.BeginNest(IFLA_LINKINFO);
  request.Add(IFLA_INFO_KIND, "veth", 4);
  rtattr* data = request.BeginNest(IFLA_INFO_DATA);
  rtattr* peer_info = request.Add(VETH_INFO_PEER, &link, sizeof(link));  // the peer's ifinfomsg, then its attributes
  request.Add(IFLA_IFNAME, peer.c_str(), peer.size() + 1);
  request.EndNest(peer_info);
  request.EndNest(data);
  request.EndNest(info);
  return rtnl.Transact(request);
}

int BringUp(RouteSocket& rtnl, int index) {
  ifinfomsg link{};
  link.ifi_family = AF_UNSPEC;
  link.ifi_index = index;
  link.ifi_flags = IFF_UP;
  link.ifi_change = IFF_UP;
  Request request(RTM_NEWLINK, 0, &link, sizeof(link));
  return rtnl.Transact(request);
}

int AddIpv4(RouteSocket& rtnl, int index, uint32_t ipv4) {
  ifaddrmsg address{};
  address.ifa_family = AF_INET;
  address.ifa_prefixlen = kPrefixLength;
  address.ifa_scope = RT_SCOPE_UNIVERSE;
  address.ifa_index = uint32_t(index);
  Request request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &address, sizeof(address));
  const uint32_t network_order = htonl(ipv4);
  request.Add(IFA_LOCAL, &network_order, sizeof(network_order));
  request.Add(IFA_ADDRESS, &network_order, sizeof(network_order));
  return rtnl.Transact(request);
}

bool AddInterface(RouteSocket& rtnl, const NetdevSpec& spec, std::string* error) {
  const std::string peer = spec.interface + kPeerSuffix;
  if (int code = CreateVethPair(rtnl, spec.interface, peer); code != 0) {
    return Refused(error, "creating veth pair " + spec.interface + "/" + peer, code);
  }
  const int index = int(if_nametoindex(spec.interface.c_str()));
  const int peer_index = int(if_nametoindex(peer.c_str()));
  if (index == 0 || peer_index == 0) return FailWithErrno(error, "if_nametoindex " + spec.interface);
  if (int code = AddIpv4(rtnl, index, spec.ipv4); code != 0) return Refused(error, "address of " + spec.interface, code);
  // Both ends up, so that the interface has a carrier (operstate UP), as a cabled NIC.
  for (int i : {peer_index, index}) {
    if (int code = BringUp(rtnl, i); code != 0) return Refused(error, "bringing up " + spec.interface, code);
  }
  return true;
}

bool MakeDirectories(const std::string& path, std::string* error) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return FailWithErrno(error, "mkdir " + prefix);
    if (slash == std::string::npos) return true;
  }
}

// /sys as this namespace's sysfs (class/net lists its interfaces, as `ip netns exec`
// shows) plus the links from each softnic device to its interface.
bool ShowSysfs(PrivateView& view, const std::vector<NetdevSpec>& specs, std::string* error) {
  const std::string fresh = view.Scratch("sys");
  const std::string upper = view.Scratch("sys-upper");
  if (!MakeDirectories(fresh, error) || !MakeDirectories(upper, error)) return false;
  if (mount("sysfs", fresh.c_str(), "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return FailWithErrno(error, "sysfs of the new network namespace");
  }
  for (const NetdevSpec& spec : specs) {
    const std::string net = upper + "/class/infiniband/" + spec.device + "/device/net";
    if (!MakeDirectories(net, error)) return false;
    const std::string link = net + "/" + spec.interface;
    if (symlink(("/sys/class/net/" + spec.interface).c_str(), link.c_str()) != 0) {
      return FailWithErrno(error, "symlink " + link);
    }
  }
  return view.Overlay("/sys", fresh, upper, error);
}

}  // namespace

std::string NetdevName(uint32_t device_index) { return "snic" + std::to_string(device_index); }

bool ShowNetdevs(PrivateView& view, const std::vector<NetdevSpec>& specs, std::string* error) {
  if (unshare(CLONE_NEWNET) != 0) return FailWithErrno(error, "unshare(CLONE_NEWNET)");
  RouteSocket rtnl;
  if (!rtnl.Open(error)) return false;
  const int loopback = int(if_nametoindex("lo"));
  if (loopback == 0) return FailWithErrno(error, "if_nametoindex lo");
  if (int code = BringUp(rtnl, loopback); code != 0) return Refused(error, "bringing up lo", code);
  for (const NetdevSpec& spec : specs) {
    if (!AddInterface(rtnl, spec, error)) return false;
  }
  return ShowSysfs(view, specs, error);
}

}  // namespace softnic
