// librdmacm entry points softnic does not implement. Each fails the way librdmacm fails
// a feature the device lacks, so programs take their "not supported" branch: ECE (no
// vendor options to negotiate) and rsockets
// (a socket API over verbs; its programs can use the kernel's sockets on one host).
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include <cerrno>

namespace {

int Refuse() {
  errno = ENOSYS;
  return -1;
}

}  // namespace

extern "C" {

int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) { errno = EOPNOTSUPP; return -1; }
int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) { errno = EOPNOTSUPP; return -1; }
// The ECE part is dropped; the reject itself goes through.
int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return rdma_reject(id, private_data, private_data_len);
}

int rsocket(int, int, int) { return Refuse(); }
int rbind(int, const sockaddr*, socklen_t) { return Refuse(); }
int rlisten(int, int) { return Refuse(); }
int raccept(int, sockaddr*, socklen_t*) { return Refuse(); }
int rconnect(int, const sockaddr*, socklen_t) { return Refuse(); }
int rshutdown(int, int) { return Refuse(); }
int rclose(int) { return Refuse(); }
ssize_t rrecv(int, void*, size_t, int) { return Refuse(); }
ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) { return Refuse(); }
ssize_t rrecvmsg(int, msghdr*, int) { return Refuse(); }
ssize_t rsend(int, const void*, size_t, int) { return Refuse(); }
ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) { return Refuse(); }
ssize_t rsendmsg(int, const msghdr*, int) { return Refuse(); }
ssize_t rread(int, void*, size_t) { return Refuse(); }
ssize_t rreadv(int, const iovec*, int) { return Refuse(); }
ssize_t rwrite(int, const void*, size_t) { return Refuse(); }
ssize_t rwritev(int, const iovec*, int) { return Refuse(); }
int rpoll(pollfd*, nfds_t, int) { return Refuse(); }
int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) { return Refuse(); }
int rgetpeername(int, sockaddr*, socklen_t*) { return Refuse(); }
int rgetsockname(int, sockaddr*, socklen_t*) { return Refuse(); }
int rsetsockopt(int, int, int, const void*, socklen_t) { return Refuse(); }
int rgetsockopt(int, int, int, void*, socklen_t*) { return Refuse(); }
int rfcntl(int, int, ...) { return Refuse(); }
off_t riomap(int, void*, size_t, int, int, off_t) { return Refuse(); }
int riounmap(int, void*, size_t) { return Refuse(); }
size_t riowrite(int, const void*, size_t, off_t, int) {
  errno = ENOSYS;
  return 0;
}

}  // extern "C"
