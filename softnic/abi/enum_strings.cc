// ibv_*_str: the human-readable names programs print for libibverbs enums. The texts
// are rdma-core's, because users grep logs and compare output across providers.
// Each switch lists every enumerator and has no default, so -Wswitch flags an enum
// value that a newer <infiniband/verbs.h> adds; values outside the enum are "unknown".
#include <infiniband/verbs.h>

namespace {
constexpr const char* kUnknown = "unknown";
}  // namespace

extern "C" const char* ibv_node_type_str(enum ibv_node_type node_type) {
  switch (node_type) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    case IBV_NODE_UNKNOWN: break;
  }
  return kUnknown;
}

extern "C" const char* ibv_port_state_str(enum ibv_port_state port_state) {
  switch (port_state) {
    case IBV_PORT_NOP: return "no state change (NOP)";
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    case IBV_PORT_ACTIVE_DEFER: return "active defer";
  }
  return kUnknown;
}

extern "C" const char* ibv_event_type_str(enum ibv_event_type event) {
  switch (event) {
    case IBV_EVENT_CQ_ERR: return "CQ error";
    case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
    case IBV_EVENT_QP_REQ_ERR: return "invalid request local work queue error";
    case IBV_EVENT_QP_ACCESS_ERR: return "local access violation work queue error";
    case IBV_EVENT_COMM_EST: return "communication established";
    case IBV_EVENT_SQ_DRAINED: return "send queue drained";
    case IBV_EVENT_PATH_MIG: return "path migrated";
    case IBV_EVENT_PATH_MIG_ERR: return "path migration request error";
    case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
    case IBV_EVENT_PORT_ACTIVE: return "port active";
    case IBV_EVENT_PORT_ERR: return "port error";
    case IBV_EVENT_LID_CHANGE: return "LID change";
    case IBV_EVENT_PKEY_CHANGE: return "P_Key change";
    case IBV_EVENT_SM_CHANGE: return "SM change";
    case IBV_EVENT_SRQ_ERR: return "SRQ catastrophic error";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ limit reached";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "last WQE reached";
    case IBV_EVENT_CLIENT_REREGISTER: return "client reregistration";
    case IBV_EVENT_GID_CHANGE: return "GID table change";
    case IBV_EVENT_WQ_FATAL: return "WQ fatal";
  }
  return kUnknown;
}

extern "C" const char* ibv_wc_status_str(enum ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_EEC_OP_ERR: return "local EE context operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_MW_BIND_ERR: return "memory management operation error";
    case IBV_WC_BAD_RESP_ERR: return "bad response error";
    case IBV_WC_LOC_ACCESS_ERR: return "local access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "local RDD violation error";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "remote invalid RD request";
    case IBV_WC_REM_ABORT_ERR: return "aborted error";
    case IBV_WC_INV_EECN_ERR: return "invalid EE context number";
    case IBV_WC_INV_EEC_STATE_ERR: return "invalid EE context state";
    case IBV_WC_FATAL_ERR: return "fatal error";
    case IBV_WC_RESP_TIMEOUT_ERR: return "response timeout error";
    case IBV_WC_GENERAL_ERR: return "general error";
    case IBV_WC_TM_ERR: return "TM error";
    case IBV_WC_TM_RNDV_INCOMPLETE: return "TM software rendezvous";
  }
  return kUnknown;
}
