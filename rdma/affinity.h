// CPU pinning and NUMA placement: which node a device sits on, which CPUs that node has.
#pragma once

#include <string>
#include <vector>

namespace rdmalab {

// Parses a Linux cpulist ("0-3,8,10-11"); fails naming the bad token.
std::vector<int> ParseCpuList(const std::string& list);
// NUMA node of an RDMA device from sysfs, or -1 when the device has none (softnic, VMs).
int DeviceNumaNode(const std::string& device_name);
// NUMA nodes of this host (1 where sysfs shows none).
int NumaNodeCount();
// CPUs of a NUMA node, or every online CPU when the node is -1 or unknown.
std::vector<int> CpusOfNode(int node);
// The CPUs of `wanted` this thread may run on (its affinity mask, e.g. from taskset), or
// the whole mask when they share none.
std::vector<int> AllowedCpus(const std::vector<int>& wanted);
// Restricts the calling thread to `cpus` (one CPU pins it); fails naming the CPUs and the
// online set.
void PinThisThread(const std::vector<int>& cpus);

}  // namespace rdmalab
