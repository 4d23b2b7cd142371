// IBVERBS_PRIVATE_34: the interface between libibverbs and its kernel-backed providers
// (libmlx5, libefa, ...). Those providers are DT_NEEDED by common binaries (perftest
// links libmlx5 and libefa directly), so the dynamic loader must find every symbol they
// reference here, or the binary does not start. The functions themselves are never
// reached: a provider only calls them on a context it created for a kernel device, and
// under softnic no provider ever gets one. They fail cleanly in case that changes.
#include <infiniband/verbs.h>

#include <cerrno>

namespace {

int unsupported_command() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

void* unsupported_object() {
  errno = EOPNOTSUPP;
  return nullptr;
}

}  // namespace

// Kernel command wrappers: rdma-core's return a positive errno, and so do these.
// They are declared without parameters: in the C calling conventions Debian targets
// (x86-64 and aarch64 SysV) the caller sets up and removes the arguments, so a callee
// that ignores them can stand in for any parameter list.
#define SOFTNIC_KERNEL_COMMANDS(X)  \
  X(execute_ioctl)                  \
  X(ibv_cmd_advise_mr)              \
  X(ibv_cmd_alloc_dm)               \
  X(ibv_cmd_alloc_mw)               \
  X(ibv_cmd_alloc_pd)               \
  X(ibv_cmd_attach_mcast)           \
  X(ibv_cmd_close_xrcd)             \
  X(ibv_cmd_create_ah)              \
  X(ibv_cmd_create_counters)        \
  X(ibv_cmd_create_cq)              \
  X(ibv_cmd_create_cq_ex)           \
  X(ibv_cmd_create_flow)            \
  X(ibv_cmd_create_flow_action_esp) \
  X(ibv_cmd_create_qp)              \
  X(ibv_cmd_create_qp_ex)           \
  X(ibv_cmd_create_qp_ex2)          \
  X(ibv_cmd_create_rwq_ind_table)   \
  X(ibv_cmd_create_srq)             \
  X(ibv_cmd_create_srq_ex)          \
  X(ibv_cmd_create_wq)              \
  X(ibv_cmd_dealloc_mw)             \
  X(ibv_cmd_dealloc_pd)             \
  X(ibv_cmd_dereg_mr)               \
  X(ibv_cmd_destroy_ah)             \
  X(ibv_cmd_destroy_counters)       \
  X(ibv_cmd_destroy_cq)             \
  X(ibv_cmd_destroy_flow)           \
  X(ibv_cmd_destroy_flow_action)    \
  X(ibv_cmd_destroy_qp)             \
  X(ibv_cmd_destroy_rwq_ind_table)  \
  X(ibv_cmd_destroy_srq)            \
  X(ibv_cmd_destroy_wq)             \
  X(ibv_cmd_detach_mcast)           \
  X(ibv_cmd_free_dm)                \
  X(ibv_cmd_get_context)            \
  X(ibv_cmd_modify_cq)              \
  X(ibv_cmd_modify_flow_action_esp) \
  X(ibv_cmd_modify_qp)              \
  X(ibv_cmd_modify_qp_ex)           \
  X(ibv_cmd_modify_srq)             \
  X(ibv_cmd_modify_wq)              \
  X(ibv_cmd_open_qp)                \
  X(ibv_cmd_open_xrcd)              \
  X(ibv_cmd_poll_cq)                \
  X(ibv_cmd_post_recv)              \
  X(ibv_cmd_post_send)              \
  X(ibv_cmd_post_srq_recv)          \
  X(ibv_cmd_query_context)          \
  X(ibv_cmd_query_device_any)       \
  X(ibv_cmd_query_mr)               \
  X(ibv_cmd_query_port)             \
  X(ibv_cmd_query_qp)               \
  X(ibv_cmd_query_srq)              \
  X(ibv_cmd_read_counters)          \
  X(ibv_cmd_reg_dm_mr)              \
  X(ibv_cmd_reg_dmabuf_mr)          \
  X(ibv_cmd_reg_mr)                 \
  X(ibv_cmd_req_notify_cq)          \
  X(ibv_cmd_rereg_mr)               \
  X(ibv_cmd_resize_cq)

#define SOFTNIC_DEFINE_KERNEL_COMMAND(name) \
  extern "C" int name() { return unsupported_command(); }
SOFTNIC_KERNEL_COMMANDS(SOFTNIC_DEFINE_KERNEL_COMMAND)
#undef SOFTNIC_DEFINE_KERNEL_COMMAND
#undef SOFTNIC_KERNEL_COMMANDS

// A provider's context and device constructors: failing here is what keeps every
// later call above unreachable.
extern "C" void* _verbs_init_and_alloc_context() { return unsupported_object(); }

extern "C" struct ibv_context* verbs_open_device() { return static_cast<ibv_context*>(unsupported_object()); }

// Each provider calls this from an ELF constructor, at load time, to add itself to
// the list rdma-core matches against the kernel's devices. softnic lists only its own
// fabric's devices, so registrations are dropped: kernel devices stay invisible to a
// program running on softnic, as intended.
extern "C" void verbs_register_driver_34(const void*) {}

// Context setup and teardown steps, reachable only after a successful context
// allocation, which never happens.
extern "C" void verbs_set_ops() {}
extern "C" void verbs_uninit_context() {}
extern "C" void verbs_init_cq() {}

// Providers log only about their own contexts; there are none to log about.
extern "C" void __verbs_log(void*, uint32_t, const char*, ...) {}

// Sizes a caller's on-stack attribute array before execute_ioctl merges linked command
// buffers into it. The caller fills only its own num_attrs slots; only the merge, which
// the failing execute_ioctl above never does, would need room for the links' attributes.
extern "C" unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void*) { return num_attrs; }

// Reads a file under a provider's kernel device directory; no such device exists here.
extern "C" int ibv_read_ibdev_sysfs_file(char*, size_t, void*, const char*, ...) {
  errno = EOPNOTSUPP;
  return -1;
}

// rdma-core's commands treat EIO from a hot-unplugged device as a successful destroy when
// RDMAV_ALLOW_DISASSOC_DESTROY is set; libmlx5 reads the flag. No softnic device is
// ever hot-unplugged from a provider.
extern "C" {
bool verbs_allow_disassociate_destroy = false;
}
