// The verbs each design issues (kv/README.md, "The READ-based systems"), with their sizes as this build sends them:
// a PUT message is the 32-byte MessageHeader (id, key index, kind, length, keyhash: SK plus
// 16 bytes) and the value; an answer is 24 bytes; FaRM and HydraDB WRITE a whole ring slot;
// the full stores' READs carry their seals (Pilaf's extent and FaRM-VAR's: a CRC64; FaRM's
// buckets: a version and a CRC64).
#include "kv/remote/connection.h"
#include "kv/remote/crc64.h"
#include "kv/remote/remote.h"

namespace rdmalab::kv::remote {

std::vector<VerbClass> VerbClassesOf(const Options& o) {
  const std::uint32_t sv = static_cast<std::uint32_t>(o.value_size);
  const std::uint32_t cq_mod = static_cast<std::uint32_t>(o.cq_mod);
  const std::uint32_t message = sizeof(MessageHeader) + sv;
  const std::uint32_t slot = SlotBytes(sv);
  const bool message_inline = message <= kMaxInlineMessageBytes;
  const bool slot_inline = slot <= kMaxInlineMessageBytes;
  const OpKind get = OpKind::kGet, put = OpKind::kPut;
  const Side client = Side::kClient, server = Side::kServer;
  switch (DesignOf(o.system)) {
    case Design::kPilaf:
      return {{"bucket READ", get, client, Verb::kRead, IBV_QPT_RC, kPilafBucketBytes, false, 1},
              {"value READ", get, client, Verb::kRead, IBV_QPT_RC, o.store == "full" ? sv + kCrcBytes : sv, false, 1},
              {"PUT SEND", put, client, Verb::kSend, IBV_QPT_UC, message, message_inline, cq_mod},
              {"answer SEND", put, server, Verb::kSend, IBV_QPT_UC, sizeof(Answer), true, cq_mod}};
    case Design::kFarm:
    case Design::kFarmVar: {
      const bool var = DesignOf(o.system) == Design::kFarmVar;
      const bool full = o.store == "full";
      const std::uint32_t payload = var ? kPointerBytes : sv;
      const std::uint32_t entry = full ? HopscotchBucketBytes(payload) : kKeyBytes + payload;
      return {{"neighbourhood READ", get, client, Verb::kRead, IBV_QPT_RC, kNeighbourhood * entry, false, 1},
              {"value READ", get, client, Verb::kRead, IBV_QPT_RC, full ? sv + kCrcBytes : sv, false, 1},
              {"PUT WRITE", put, client, Verb::kWrite, IBV_QPT_UC, slot, slot_inline, cq_mod},
              {"answer WRITE", put, server, Verb::kWrite, IBV_QPT_UC, sizeof(Answer), true, cq_mod},
              {"home bucket READ", get, client, Verb::kRead, IBV_QPT_RC, entry, false, 1}};
    }
    case Design::kDrtm:
    case Design::kDrtmWrite:
      return {{"value READ", get, client, Verb::kRead, IBV_QPT_RC, sv, false, 1},
              {"lock CAS", put, client, Verb::kCas, IBV_QPT_RC, 8, false, 1},
              {"value WRITE", put, client, Verb::kWrite, IBV_QPT_RC, sv, false, 0},
              {"unlock CAS", put, client, Verb::kCas, IBV_QPT_RC, 8, false, 1}};
    case Design::kHydraDb:
      return {{"value+lease READ", get, client, Verb::kRead, IBV_QPT_RC, sv + kLeaseBytes, false, 1},
              {"PUT WRITE", put, client, Verb::kWrite, IBV_QPT_RC, slot, slot_inline, cq_mod},
              {"answer WRITE", put, server, Verb::kWrite, IBV_QPT_RC, sizeof(Answer), true, cq_mod},
              {"lookup WRITE", get, client, Verb::kWrite, IBV_QPT_RC, slot, slot_inline, cq_mod},
              {"lookup answer WRITE", get, server, Verb::kWrite, IBV_QPT_RC, sizeof(Answer), true, cq_mod}};
  }
  return {};
}

}  // namespace rdmalab::kv::remote
