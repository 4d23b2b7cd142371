#include "benchmarks/bench/common.h"

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "rdma/affinity.h"
#include "rdma/error.h"

namespace rdmalab::bench {

std::atomic<bool> g_abort{false};

nlohmann::json Region::Describe() const {
  return {{"address", reinterpret_cast<std::uintptr_t>(buffer.data())}, {"rkey", mr->rkey}, {"bytes", buffer.size()}};
}

Region MakeRegion(const Session& session, std::size_t bytes) {
  Region region;
  region.buffer = Buffer::Allocate(bytes, session.options().use_hugepages,
                                   DeviceNumaNode(session.device().name()));
  region.mr = RegisterMemory(session.pd(), region.buffer.data(), region.buffer.size(), kAllAccess);
  return region;
}

RemoteRegion RemoteRegion::FromJson(const nlohmann::json& json) {
  return {json.at("address").get<std::uint64_t>(), json.at("rkey").get<std::uint32_t>(),
          json.at("bytes").get<std::uint64_t>()};
}

void FillPattern(std::uint8_t* data, std::uint32_t bytes, std::uint32_t tag) {
  for (std::uint32_t i = 0; i < bytes; ++i) data[i] = PatternByte(tag, i);
}

std::uint64_t PatternMismatches(const std::uint8_t* data, std::uint32_t bytes, std::uint32_t tag) {
  std::uint64_t bad = 0;
  for (std::uint32_t i = 0; i < bytes; ++i) bad += data[i] != PatternByte(tag, i);
  return bad;
}

void RunPinnedThreads(const Session& session, int threads, const std::function<void(int)>& body) {
  std::vector<std::thread> workers;
  std::exception_ptr first_error;
  std::mutex error_mutex;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        PinThisThread(session.CpusForThread(t));
        body(t);
      } catch (...) {
        g_abort.store(true, std::memory_order_relaxed);
        std::lock_guard lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& worker : workers) worker.join();
  if (first_error) std::rethrow_exception(first_error);
}

void CompletionFailed(const ibv_wc& completion, const char* while_doing) {
  Fail("work completion error on QP ", completion.qp_num, " while ", while_doing, ": ",
       ibv_wc_status_str(completion.status), " (status ", static_cast<int>(completion.status), ", vendor error ",
       completion.vendor_err, ")",
       completion.status == IBV_WC_RETRY_EXC_ERR ? ": the peer stopped answering (did it exit?)" : "");
}

}  // namespace rdmalab::bench
