// The TCP stores of kv/tcp (memcached, Redis) as the server and client roles see them:
// which store a run names and which protocol its clients speak, chosen once at setup.
#pragma once

#include <string>

#include "kv/core/options.h"
#include "kv/tcp/memcached.h"
#include "kv/tcp/resp.h"
#include "rdma/error.h"

namespace rdmalab::kv::tcp {

// "memcached" or "redis" (the --system name).
inline const std::string& StoreName(const Options& o) { return o.system; }

// Calls f with a value of the run's codec type (MemcachedText, MemcachedBinary or Resp),
// so that what f instantiates (the transport, the preload) is built for that protocol alone.
template <typename F>
decltype(auto) WithCodec(const Options& o, F&& f) {
  if (o.system == "redis") return f(Resp{});
  if (o.system != "memcached") Fail("--system ", o.system, " is not a TCP store (memcached, redis)");
  if (o.protocol == "binary") return f(MemcachedBinary{});
  return f(MemcachedText{});
}

}  // namespace rdmalab::kv::tcp
