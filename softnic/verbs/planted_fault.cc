#include "softnic/verbs/planted_fault.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "softnic/verbs/internal.h"

namespace softnic {
namespace {

constexpr const char* kVariable = "SOFTNIC_PLANTED_FAULT";
constexpr uint64_t kMaxDelayNs = 1'000'000'000;

struct Named {
  std::string_view name;
  uint32_t value;
};
constexpr Named kVerbs[] = {{"read", IBV_WR_RDMA_READ},          {"write", IBV_WR_RDMA_WRITE},
                            {"write_imm", IBV_WR_RDMA_WRITE_WITH_IMM}, {"send", IBV_WR_SEND},
                            {"send_imm", IBV_WR_SEND_WITH_IMM},   {"cas", IBV_WR_ATOMIC_CMP_AND_SWP},
                            {"faa", IBV_WR_ATOMIC_FETCH_AND_ADD}};
constexpr Named kTransports[] = {{"RC", IBV_QPT_RC}, {"UC", IBV_QPT_UC}, {"UD", IBV_QPT_UD}};

struct Range {
  uint64_t low = 0;
  uint64_t high = UINT64_MAX;
  bool Holds(uint64_t v) const { return v >= low && v <= high; }
};

// The region (bit sets over ibv_wr_opcode and ibv_qp_type values) and its cost.
struct PlantedFault {
  uint64_t verbs = ~uint64_t{0};
  uint64_t transports = ~uint64_t{0};
  Range size;
  Range post_list;
  uint64_t delay_ns = 0;
};

PlantedFault planted;
int (*provider_post_send)(ibv_qp*, ibv_send_wr*, ibv_send_wr**) = nullptr;

template <size_t N>
bool ParseNames(std::string_view key, std::string_view text, const Named (&names)[N], uint64_t* set,
                std::string* error) {
  *set = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('|', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view name = text.substr(start, end - start);
    bool known = false;
    for (const Named& n : names) {
      if (n.name == name) {
        *set |= uint64_t{1} << n.value;
        known = true;
      }
    }
    if (!known) {
      *error = std::string(key) + " '" + std::string(name) + "' is not one of";
      for (const Named& n : names) *error += " " + std::string(n.name);
      return false;
    }
    start = end + 1;
  }
  return true;
}

bool ParseCount(std::string_view key, std::string_view text, uint64_t low, uint64_t high, uint64_t* value,
                std::string* error) {
  uint64_t v = 0;
  bool digits = !text.empty() && text.size() <= 19;
  for (char c : text) {
    digits = digits && c >= '0' && c <= '9';
    if (digits) v = v * 10 + uint64_t(c - '0');
  }
  if (!digits || v < low || v > high) {
    *error = std::string(key) + " '" + std::string(text) + "' is not a whole number from " + std::to_string(low) +
             " to " + std::to_string(high);
    return false;
  }
  *value = v;
  return true;
}

// LO-HI inclusive, or one value.
bool ParseRange(std::string_view key, std::string_view text, Range* range, std::string* error) {
  size_t dash = text.find('-');
  std::string_view low = text.substr(0, dash), high = dash == std::string_view::npos ? low : text.substr(dash + 1);
  if (!ParseCount(key, low, 0, UINT32_MAX, &range->low, error) ||
      !ParseCount(key, high, range->low, UINT32_MAX, &range->high, error)) {
    *error += " (a range is LO-HI with LO <= HI, or one value)";
    return false;
  }
  return true;
}

bool ParseField(std::string_view field, PlantedFault* fault, std::string* error) {
  size_t eq = field.find('=');
  std::string_view key = field.substr(0, eq), value = eq == std::string_view::npos ? "" : field.substr(eq + 1);
  if (eq == std::string_view::npos) {
    *error = "'" + std::string(field) + "' is not KEY=VALUE";
    return false;
  }
  if (key == "verb") return ParseNames(key, value, kVerbs, &fault->verbs, error);
  if (key == "transport") return ParseNames(key, value, kTransports, &fault->transports, error);
  if (key == "size") return ParseRange(key, value, &fault->size, error);
  if (key == "post_list") return ParseRange(key, value, &fault->post_list, error);
  if (key == "delay_ns") return ParseCount(key, value, 1, kMaxDelayNs, &fault->delay_ns, error);
  *error = "unknown key '" + std::string(key) + "'; valid: verb, transport, size, post_list, delay_ns";
  return false;
}

bool Parse(std::string_view text, PlantedFault* fault, std::string* error) {
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    if (!ParseField(text.substr(start, end - start), fault, error)) return false;
    start = end + 1;
  }
  if (fault->delay_ns == 0) *error = "delay_ns is missing (the nanoseconds each WR of the region costs)";
  return fault->delay_ns != 0;
}

uint64_t PayloadBytes(const ibv_send_wr& wr) {
  uint64_t bytes = 0;
  for (int i = 0; i < wr.num_sge; ++i) bytes += wr.sg_list[i].length;
  return bytes;
}

// The poster pays for the region's WRs before they go, busy as a NIC's slow path would keep it.
int PlantedPostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  if ((planted.transports >> qp->qp_type) & 1) {
    uint64_t list = 0;
    for (const ibv_send_wr* w = wr; w != nullptr; w = w->next) ++list;
    uint64_t delay_ns = 0;
    if (planted.post_list.Holds(list)) {
      for (const ibv_send_wr* w = wr; w != nullptr; w = w->next) {
        if (((planted.verbs >> w->opcode) & 1) && planted.size.Holds(PayloadBytes(*w))) delay_ns += planted.delay_ns;
      }
    }
    if (delay_ns != 0) {
      uint64_t until = NowNs() + delay_ns;
      while (NowNs() < until) __builtin_ia32_pause();
    }
  }
  return provider_post_send(qp, wr, bad_wr);
}

}  // namespace

bool InstallPlantedFault(ibv_context_ops* ops, std::string* error) {
  static std::once_flag parsed;
  static bool set = false;
  static std::string parse_error;
  std::call_once(parsed, [ops] {
    const char* text = std::getenv(kVariable);
    if (text == nullptr || *text == '\0') return;
    if (!Parse(text, &planted, &parse_error)) {
      parse_error = std::string(kVariable) + "='" + text + "': " + parse_error;
      return;
    }
    set = true;
    provider_post_send = ops->post_send;  // InstallSendOps's, the same for every context
  });
  if (!parse_error.empty()) {
    *error = parse_error;
    return false;
  }
  if (set) ops->post_send = PlantedPostSend;
  return true;
}

}  // namespace softnic
