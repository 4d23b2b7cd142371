#include "softnic/fabric/descriptors.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>

#include "softnic/fabric/background_thread.h"
#include "softnic/fabric/object.h"

namespace softnic {
namespace {

constexpr int kListenBacklog = 64;
constexpr int kServeRequestTimeoutMs = 1000;  // a peer that connects and says nothing
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(10);
constexpr uint8_t kServed = 1;
constexpr uint8_t kNotServed = 0;

// The socket's address, through an O_PATH descriptor of the directory: a fabric
// directory's own path may be longer than sun_path holds.
bool SocketAddress(int directory_fd, uint64_t service_id, sockaddr_un* address) {
  *address = {};
  address->sun_family = AF_UNIX;
  int n = std::snprintf(address->sun_path, sizeof(address->sun_path), "/proc/self/fd/%d/o%016" PRIx64,
                        directory_fd, service_id);
  return n > 0 && size_t(n) < sizeof(address->sun_path);
}

void SetTimeouts(int socket_fd, int timeout_ms) {
  timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(socket_fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(socket_fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
}

int Listen(const std::string& directory, uint64_t service_id, std::string* error) {
  int directory_fd = open(directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address;
  bool ok = directory_fd >= 0 && listener >= 0 && SocketAddress(directory_fd, service_id, &address) &&
            bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
            listen(listener, kListenBacklog) == 0;
  int err = errno;
  if (directory_fd >= 0) close(directory_fd);
  if (ok) return listener;
  if (listener >= 0) close(listener);
  char name[32];
  std::snprintf(name, sizeof(name), "o%016" PRIx64, service_id);
  *error = "cannot serve shared-memory descriptors on socket " + directory + "/" + name + ": " + std::strerror(err);
  return -1;
}

// One answer byte with room for one descriptor beside it (SCM_RIGHTS). Not copyable: it
// points into itself.
struct Answer {
  uint8_t byte = kNotServed;
  iovec payload{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};
  Answer() {
    header.msg_iov = &payload;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
  }
  Answer(const Answer&) = delete;
  Answer& operator=(const Answer&) = delete;
};

}  // namespace

bool DescriptorService::Publish(const std::string& directory, uint64_t id, int fd, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!started_) {
    int listener = Listen(directory, ObjectOwnerId(id), error);
    if (listener < 0) {
      close(fd);
      return false;
    }
    StartBackgroundThread([this, listener] { Serve(listener); });
    started_ = true;
  }
  published_[id] = fd;
  return true;
}

void DescriptorService::ForgetAfterFork() {
  for (const auto& [id, fd] : published_) close(fd);
  published_.clear();
  started_ = false;
}

void DescriptorService::Withdraw(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = published_.find(id);
  if (it == published_.end()) return;
  close(it->second);
  published_.erase(it);
}

// One request per connection: the peer sends the id, we answer one byte and, when we
// serve that id, its descriptor.
void DescriptorService::Serve(int listener) {
  for (;;) {
    int connection = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      if (errno != EINTR) std::this_thread::sleep_for(kAcceptRetryDelay);  // EMFILE and kin pass
      continue;
    }
    SetTimeouts(connection, kServeRequestTimeoutMs);
    uint64_t id = 0;
    if (recv(connection, &id, sizeof(id), MSG_WAITALL) == ssize_t(sizeof(id))) {
      std::lock_guard<std::mutex> lock(mutex_);  // Withdraw must not close the fd mid-send
      auto it = published_.find(id);
      Answer answer;
      if (it != published_.end()) {
        answer.byte = kServed;
        cmsghdr* header = CMSG_FIRSTHDR(&answer.header);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(header), &it->second, sizeof(int));
      } else {
        answer.header.msg_control = nullptr;
        answer.header.msg_controllen = 0;
      }
      [[maybe_unused]] ssize_t sent = sendmsg(connection, &answer.header, MSG_NOSIGNAL);
    }
    close(connection);
  }
}

int FetchDescriptor(const std::string& directory, uint64_t id, int timeout_ms) {
  int directory_fd = open(directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd < 0) return -1;
  int connection = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address;
  bool connected = connection >= 0 && SocketAddress(directory_fd, ObjectOwnerId(id), &address);
  if (connected) {
    SetTimeouts(connection, timeout_ms);
    connected = connect(connection, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  int err = errno;
  close(directory_fd);
  if (!connected) {
    if (connection >= 0) close(connection);
    errno = err;
    return -1;
  }
  Answer answer;
  ssize_t received = -1;
  if (send(connection, &id, sizeof(id), MSG_NOSIGNAL) == ssize_t(sizeof(id))) {
    received = recvmsg(connection, &answer.header, MSG_CMSG_CLOEXEC);
  }
  err = received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? ETIMEDOUT : errno;
  close(connection);
  cmsghdr* header = received == 1 ? CMSG_FIRSTHDR(&answer.header) : nullptr;
  if (header == nullptr || header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) {
    errno = received < 0 ? err : received == 1 && answer.byte == kNotServed ? EIDRM : ECONNRESET;
    return -1;
  }
  int fd;
  std::memcpy(&fd, CMSG_DATA(header), sizeof(fd));
  return fd;
}

}  // namespace softnic
