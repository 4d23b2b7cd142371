#include "rdma/affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "rdma/error.h"

namespace rdmalab {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

}  // namespace

std::vector<int> ParseCpuList(const std::string& list) {
  std::vector<int> cpus;
  std::stringstream stream(list);
  std::string token;
  while (std::getline(stream, token, ',')) {
    if (token.empty()) continue;
    const auto dash = token.find('-');
    try {
      std::size_t used = 0;
      const int first = std::stoi(token.substr(0, dash), &used);
      int last = first;
      if (dash != std::string::npos) last = std::stoi(token.substr(dash + 1), &used);
      if (first < 0 || last < first) throw std::invalid_argument(token);
      for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    } catch (const std::logic_error&) {
      Fail("bad CPU list entry '", token, "' in '", list, "': expected N or N-M with 0 <= N <= M, comma-separated");
    }
  }
  return cpus;
}

int DeviceNumaNode(const std::string& device_name) {
  const std::string value = ReadFirstLine("/sys/class/infiniband/" + device_name + "/device/numa_node");
  if (value.empty()) return -1;
  try {
    return std::stoi(value);
  } catch (const std::logic_error&) {
    return -1;
  }
}

int NumaNodeCount() {
  const std::string online = ReadFirstLine("/sys/devices/system/node/online");
  return online.empty() ? 1 : static_cast<int>(ParseCpuList(online).size());
}

std::vector<int> CpusOfNode(int node) {
  std::string list;
  if (node >= 0) list = ReadFirstLine("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  if (list.empty()) list = ReadFirstLine("/sys/devices/system/cpu/online");
  return ParseCpuList(list);
}

std::vector<int> AllowedCpus(const std::vector<int>& wanted) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return wanted;
  std::vector<int> both, allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) allowed.push_back(cpu);
  }
  for (const int cpu : wanted) {
    if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &mask)) both.push_back(cpu);
  }
  return both.empty() ? allowed : both;
}

void PinThisThread(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::string listed;
  for (const int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) Fail("CPU ", cpu, " out of range [0, ", CPU_SETSIZE, ")");
    CPU_SET(cpu, &set);
    listed += (listed.empty() ? "" : ",") + std::to_string(cpu);
  }
  const int error_number = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (error_number != 0) {
    Fail("cannot run on CPUs ", listed, ": ", std::strerror(error_number), " (online CPUs: ",
         ReadFirstLine("/sys/devices/system/cpu/online"), ")");
  }
}

}  // namespace rdmalab
