// IBVERBS_1.0 is the ABI of libibverbs before 1.1 (2006), whose structs had other
// layouts; ibv_register_driver@IBVERBS_1.1 registered providers of that era. softnic
// exports both so that a binary referencing them still loads, but does not emulate the
// old layouts: each call fails with ENOSYS. Programs built since then bind the default
// (@@) versions, which the core defines. libibverbs.map explains why these are bound by
// symver attributes here instead of being listed in the map.
#include <cerrno>
#include <cstdint>
#include <type_traits>

namespace {

// The failure each return type can express: NULL, a negative errno, or nothing; errno
// is ENOSYS in every case.
template <typename T>
T fail_old_abi() {
  errno = ENOSYS;
  if constexpr (std::is_pointer_v<T>) {
    return nullptr;
  } else if constexpr (std::is_same_v<T, int>) {
    return -ENOSYS;
  } else if constexpr (!std::is_void_v<T>) {
    return T{};
  }
}

}  // namespace

// (name, return type). The old struct pointers are plain pointers here: nothing reads
// them. The stand-ins take no parameters, which is safe because in the SysV calling
// conventions the caller sets up and removes the arguments.
#define SOFTNIC_IBVERBS_1_0_COMPAT(X) \
  X(ibv_get_device_list, void*)       \
  X(ibv_free_device_list, void)       \
  X(ibv_get_device_name, const char*) \
  X(ibv_get_device_guid, uint64_t)    \
  X(ibv_open_device, void*)           \
  X(ibv_close_device, int)            \
  X(ibv_get_async_event, int)         \
  X(ibv_ack_async_event, void)        \
  X(ibv_query_device, int)            \
  X(ibv_query_port, int)              \
  X(ibv_query_gid, int)               \
  X(ibv_query_pkey, int)              \
  X(ibv_alloc_pd, void*)              \
  X(ibv_dealloc_pd, int)              \
  X(ibv_reg_mr, void*)                \
  X(ibv_dereg_mr, int)                \
  X(ibv_create_cq, void*)             \
  X(ibv_resize_cq, int)               \
  X(ibv_destroy_cq, int)              \
  X(ibv_get_cq_event, int)            \
  X(ibv_ack_cq_events, void)          \
  X(ibv_create_srq, void*)            \
  X(ibv_modify_srq, int)              \
  X(ibv_query_srq, int)               \
  X(ibv_destroy_srq, int)             \
  X(ibv_create_qp, void*)             \
  X(ibv_query_qp, int)                \
  X(ibv_modify_qp, int)               \
  X(ibv_destroy_qp, int)              \
  X(ibv_create_ah, void*)             \
  X(ibv_destroy_ah, int)              \
  X(ibv_attach_mcast, int)            \
  X(ibv_detach_mcast, int)

#define SOFTNIC_DEFINE_1_0_COMPAT(name, type)                                         \
  extern "C" __attribute__((symver(#name "@IBVERBS_1.0"))) type compat_1_0_##name() { \
    return fail_old_abi<type>();                                                      \
  }
SOFTNIC_IBVERBS_1_0_COMPAT(SOFTNIC_DEFINE_1_0_COMPAT)
#undef SOFTNIC_DEFINE_1_0_COMPAT
#undef SOFTNIC_IBVERBS_1_0_COMPAT

// Providers of the 1.0 era called this from their constructors; registering nothing
// leaves them unused, which is also what happens to today's providers under softnic.
extern "C" __attribute__((symver("ibv_register_driver@IBVERBS_1.1"))) void compat_1_1_ibv_register_driver(
    const char*, void*) {}
