// librdmacm entry points softnic does not implement. Each fails the way librdmacm fails
// a feature the device lacks, so programs take their "not supported" branch: ECE (no
// vendor options to negotiate).
#include <rdma/rdma_cma.h>

#include <cerrno>

extern "C" {

int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) { errno = EOPNOTSUPP; return -1; }
int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) { errno = EOPNOTSUPP; return -1; }
// The ECE part is dropped; the reject itself goes through.
int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return rdma_reject(id, private_data, private_data_len);
}

}  // extern "C"
