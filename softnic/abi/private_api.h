// Exported libibverbs functions that no installed header declares: rdma-core keeps
// them in its private driver.h and marshall.h, yet librdmacm and old providers call
// them. Declared once here, with rdma-core's signatures, so that the definitions in
// this folder and the unit tests agree.
#pragma once

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <cstddef>

extern "C" {

const char* ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);

int ibv_dontfork_range(void* base, size_t size);
int ibv_dofork_range(void* base, size_t size);

void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst, struct ib_uverbs_ah_attr* src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst, struct ib_uverbs_qp_attr* src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst, struct ib_user_path_rec* src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst, struct ibv_sa_path_rec* src);

}  // extern "C"
