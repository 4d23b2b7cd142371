// Hosts rdma/'s RendezvousServer alone, so that a test can speak the rendezvous protocol
// (docs/contracts.md, contract 2) to it exactly as it speaks to harness/rendezvous.py:
//   rendezvous_serve TOKEN [PORT] [DEADLINE_S]
// listens on 127.0.0.1:PORT (0, the default: a free port), prints "port N" on one line once
// it listens, and serves until stdin closes, SIGTERM/SIGINT, or DEADLINE_S (default 30) passes.
#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "rdma/clock.h"
#include "rdma/rendezvous.h"

namespace {

constexpr int kDefaultDeadlineS = 30;
constexpr int kPollSliceMs = 100;

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: %s TOKEN [PORT] [DEADLINE_S]\n", argv[0]);
    return 2;
  }
  const int port = argc > 2 ? std::atoi(argv[2]) : 0;
  const int deadline_s = argc > 3 ? std::atoi(argv[3]) : kDefaultDeadlineS;
  if (port < 0 || port > 65535 || deadline_s <= 0) {
    std::fprintf(stderr, "bad PORT '%s' (0..65535) or DEADLINE_S (> 0)\n", argc > 2 ? argv[2] : "");
    return 2;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  try {
    rdmalab::RendezvousServer server("127.0.0.1", static_cast<std::uint16_t>(port), argv[1]);
    std::printf("port %u\n", unsigned(server.port()));
    std::fflush(stdout);
    const std::uint64_t deadline_ns = rdmalab::MonotonicNs() + std::uint64_t(deadline_s) * 1'000'000'000ull;
    while (!g_stop && rdmalab::MonotonicNs() < deadline_ns) {
      pollfd in{STDIN_FILENO, POLLIN, 0};
      const int ready = poll(&in, 1, kPollSliceMs);
      if (ready > 0) {
        char byte;
        if (read(STDIN_FILENO, &byte, 1) <= 0) break;  // the test closed our stdin: it is done
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rendezvous_serve: %s\n", error.what());
    return 1;
  }
  return 0;
}
