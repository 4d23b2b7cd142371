// rsockets: rpoll and rselect over rsockets and ordinary descriptors together. An rsocket
// is looked at by polling its CQ and channel; to sleep, rpoll arms each rsocket's CQ and
// waits in poll() on its completion channel and CM channel beside the ordinary descriptors.
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <vector>

#include "softnic/cm/rsocket.h"

namespace softnic::cm::rs {
namespace {

// What one pass found: rsockets' revents set in place, ordinary descriptors polled at once.
int Scan(pollfd* fds, nfds_t nfds, bool arm, std::vector<pollfd>& scratch) {
  scratch.clear();
  for (nfds_t i = 0; i < nfds; ++i) {
    fds[i].revents = 0;
    Socket* s = Lookup(fds[i].fd);
    if (s == nullptr) {
      if (fds[i].fd >= 0) scratch.push_back(fds[i]);
      continue;
    }
    std::lock_guard<std::mutex> lock(s->mutex);
    if (arm && s->cq != nullptr && !s->armed) {
      ibv_req_notify_cq(s->cq, 0);
      s->armed = true;
    }
    fds[i].revents = Readiness(s, fds[i].events);
  }
  if (!scratch.empty() && poll(scratch.data(), scratch.size(), 0) > 0) {
    size_t k = 0;
    for (nfds_t i = 0; i < nfds; ++i) {
      if (Lookup(fds[i].fd) != nullptr) continue;
      if (fds[i].fd >= 0) fds[i].revents = scratch[k++].revents;
    }
  }
  int ready = 0;
  for (nfds_t i = 0; i < nfds; ++i) ready += fds[i].revents != 0;
  return ready;
}

// Sleeps on every descriptor that can wake one of fds up, until timeout_ms (-1: forever).
void SleepOn(pollfd* fds, nfds_t nfds, int timeout_ms, std::vector<pollfd>& wait) {
  wait.clear();
  for (nfds_t i = 0; i < nfds; ++i) {
    Socket* s = Lookup(fds[i].fd);
    if (s == nullptr) {
      wait.push_back(fds[i]);
      continue;
    }
    wait.push_back({s->fd, POLLIN, 0});
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->completions != nullptr) wait.push_back({s->completions->fd, POLLIN, 0});
  }
  poll(wait.data(), wait.size(), timeout_ms);
  // Take the CQ events that woke us, so that the next pass arms again, and the CM events
  // (a peer that disconnected or died, a connection request or result).
  size_t at = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    Socket* s = Lookup(fds[i].fd);
    if (s == nullptr) {
      ++at;
      continue;
    }
    std::lock_guard<std::mutex> lock(s->mutex);
    if (wait[at++].revents & POLLIN) PumpEvents(s);
    if (s->completions != nullptr) ++at;
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (s->completions != nullptr && ibv_get_cq_event(s->completions, &cq, &context) == 0) {
      ibv_ack_cq_events(cq, 1);
      s->armed = false;
    }
  }
}

int64_t NowUs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
}

}  // namespace
}  // namespace softnic::cm::rs

using namespace softnic::cm::rs;

extern "C" {

int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  thread_local std::vector<pollfd> scratch, wait;  // grow once, then reused: no allocation per call
  const int64_t start = NowUs();
  bool any_ordinary = false;
  for (nfds_t i = 0; i < nfds; ++i) {
    any_ordinary |= fds[i].fd >= 0 && Lookup(fds[i].fd) == nullptr;
  }
  for (;;) {
    int ready = Scan(fds, nfds, false, scratch);
    if (ready != 0 || timeout == 0) return ready;
    const int64_t elapsed_us = NowUs() - start;
    // Spin on rsockets alone first: a message due within microseconds costs no sleep and
    // wake-up. Ordinary descriptors would cost a system call per look, so they skip it.
    if (!any_ordinary && elapsed_us < kSpinBeforeSleepUs) continue;
    ready = Scan(fds, nfds, true, scratch);
    if (ready != 0) return ready;
    int left_ms = -1;
    if (timeout > 0) {
      left_ms = timeout - static_cast<int>(elapsed_us / 1000);
      if (left_ms <= 0) return 0;
    }
    SleepOn(fds, nfds, left_ms, wait);
  }
}

int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) return Fail(EINVAL);
  thread_local std::vector<pollfd> fds;
  fds.clear();
  for (int fd = 0; fd < nfds; ++fd) {
    short events = 0;
    if (readfds != nullptr && FD_ISSET(fd, readfds)) events |= POLLIN;
    if (writefds != nullptr && FD_ISSET(fd, writefds)) events |= POLLOUT;
    if (events != 0 || (exceptfds != nullptr && FD_ISSET(fd, exceptfds))) fds.push_back({fd, events, 0});
  }
  const int timeout_ms =
      timeout == nullptr ? -1 : static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000);
  const int ready = rpoll(fds.data(), fds.size(), timeout_ms);
  if (ready < 0) return ready;
  if (readfds != nullptr) FD_ZERO(readfds);
  if (writefds != nullptr) FD_ZERO(writefds);
  if (exceptfds != nullptr) FD_ZERO(exceptfds);
  int count = 0;
  for (const pollfd& p : fds) {
    if (readfds != nullptr && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
      FD_SET(p.fd, readfds);
      ++count;
    }
    if (writefds != nullptr && (p.revents & (POLLOUT | POLLERR))) {
      FD_SET(p.fd, writefds);
      ++count;
    }
    if (exceptfds != nullptr && (p.revents & POLLPRI)) {
      FD_SET(p.fd, exceptfds);
      ++count;
    }
  }
  return count;
}

}  // extern "C"
