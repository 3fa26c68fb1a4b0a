// The parts of the libnrt API the simulator does not model. Each call logs
// "not supported by neuronsim" at ERROR level and returns a failure status
// (NRT_FAILURE unless the spec names a more specific one); calls that return
// void or a pointer log and do nothing / return NULL. None of them pretends to
// succeed. Small option objects (sys-trace configs) are real allocations, so
// that clients can build and free them.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nrt/ndebug_stream.h"
#include "nrt/nec.h"
#include "nrt/nrt_async.h"
#include "nrt/nrt_async_sendrecv.h"
#include "nrt/nrt_sys_trace.h"
#include "runtime.h"

using namespace neuronsim::rt;

namespace {
NRT_STATUS unsupported(const char* fn, const char* what = "not supported by neuronsim",
                       NRT_STATUS status = NRT_FAILURE) {
  log(kError, fn, "{}", what);
  return status;
}
constexpr const char* kNoCollectives =
    "host-driven collectives are not supported by neuronsim; collectives run inside NEFFs loaded "
    "with "
    "nrt_load_collectives";
constexpr const char* kNoAsync =
    "collectives of the explicit async API (nrta_cc_*) are not supported by neuronsim; collectives "
    "run inside "
    "NEFFs loaded with nrt_load_collectives";
constexpr const char* kNoSendRecv = "async send/recv is not supported by neuronsim";
constexpr const char* kNoSysTrace =
    "system traces are not modelled by neuronsim; use nrt_profile_start or "
    "NEURON_RT_INSPECT_ENABLE for Chrome traces";
constexpr const char* kNoProfile =
    "continuous and session profiling are not supported by neuronsim; use nrt_profile_start/stop";
}  // namespace

struct nrt_sys_trace_config {
  uint64_t max_events_per_nc = 1000000;
};
struct nrt_sys_trace_fetch_options {
  uint64_t max_events_per_nc = 0;
  uint64_t nc_idx = 0;
};

extern "C" {

// ---- collectives (nrt_load_collectives is in models.cpp) ----------------------
NRT_STATUS nrt_build_global_comm(int32_t, uint32_t, uint32_t) {
  return unsupported(__func__, kNoCollectives);
}
NRT_STATUS nrt_cc_global_comm_init(uint32_t, uint32_t, uint32_t) {
  return unsupported(__func__, kNoCollectives);
}
NRT_STATUS nrt_cc_create_stream(uint32_t) {
  return unsupported(__func__, kNoCollectives);
}
NRT_STATUS nrt_barrier(int32_t, uint32_t, uint32_t) {
  return unsupported(__func__, kNoCollectives);
}
NRT_STATUS nrt_all_gather(int32_t, uint32_t, uint32_t, uint32_t, void*, void*) {
  return unsupported(__func__, kNoCollectives);
}
void* nrt_get_libnccl_net(int* err, char* err_msg, size_t err_msg_size) {
  log(kError, __func__, "{}", kNoCollectives);
  if (err != nullptr) *err = 1;
  if (err_msg != nullptr && err_msg_size > 0)
    std::snprintf(err_msg, err_msg_size, "%s", kNoCollectives);
  return nullptr;
}

// ---- memory and devices --------------------------------------------------------
NRT_STATUS nrt_get_dmabuf_fd(uint64_t, uint64_t, int*) {
  return unsupported(__func__, "dma-buf export is not available in the simulator", NRT_INVALID);
}
NRT_STATUS nrt_get_dmabuf_fd_v2(uint64_t, uint64_t, int*, uint64_t*) {
  return unsupported(__func__, "dma-buf export is not available in the simulator", NRT_INVALID);
}
NRT_STATUS nrt_get_hbm_mmap_va(int, int, void**, size_t*) {
  return unsupported(__func__,
                     "HBM regions cannot be mmapped in the simulator; use nrt_tensor_get_va",
                     NRT_INVALID);
}
NRT_STATUS nrt_host_device_id_rid_map_get(uint32_t*, uint32_t*) {
  return unsupported(__func__, "routing ids are not modelled by neuronsim", NRT_INVALID);
}
NRT_STATUS nrt_get_attached_efa_bdf(const void*, char*, size_t*) {
  return unsupported(__func__, "the simulator has no EFA devices");
}
void* nrt_pinned_malloc(size_t, nrt_pinned_alloc_type_t) {
  log(kError, __func__, "pinned host memory is not supported by neuronsim");
  return nullptr;
}
void nrt_pinned_free(void* ptr) {
  if (ptr != nullptr) log(kError, __func__, "pinned host memory is not supported by neuronsim");
}
NRT_STATUS nrt_dump_device_allocation_info(int, neuron_ioctl_mem_chunk_info*, uint32_t*) {
  return unsupported(__func__);
}
NRT_STATUS nrt_debug_log_oom_report(int) {
  return unsupported(__func__);
}
NRT_STATUS nrt_set_pool_eng_ucode(const nrt_ucode_info*) {
  return unsupported(__func__, "GpSimd microcode is not modelled by neuronsim");
}
NRT_STATUS nrt_register_async_exec_callback(NRT_ASYNC_EXEC_STATUS_CALLBACK, void*) {
  return unsupported(
      __func__,
      "implicit async execution is not supported by neuronsim; nrt_execute is synchronous");
}
NRT_STATUS nrt_trace_start(bool) {
  return unsupported(__func__, "memory tracing is not supported by neuronsim");
}
NRT_STATUS nrt_trace_stop(const char*) {
  return unsupported(__func__, "memory tracing is not supported by neuronsim");
}

// ---- profiling -------------------------------------------------------------------
NRT_STATUS nrt_profile_continuous_options_allocate(nrt_profile_continuous_options_t**) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_continuous_options_free(nrt_profile_continuous_options_t*) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_continuous_options_set_output_dir(nrt_profile_continuous_options_t*,
                                                         const char*) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_continuous_start(nrt_profile_continuous_options_t*) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_continuous_save(uint32_t, nrt_profile_continuous_options_t*) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_continuous_stop(void) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_session_start(int32_t) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_session_stop(int32_t, uint64_t*) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_session_serialize(uint64_t, const char*) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_session_drop(uint64_t) {
  return unsupported(__func__, kNoProfile);
}
NRT_STATUS nrt_profile_session_drop_all(int32_t) {
  return unsupported(__func__, kNoProfile);
}

NRT_STATUS nrt_inspect_config_set_capture_enabled_for_nc(nrt_inspect_config_t*, uint32_t, bool) {
  return unsupported(
      __func__,
      "per-core capture filters are not supported by neuronsim (every execution is traced)");
}
NRT_STATUS nrt_inspect_config_set_capture_enabled_for_event_type_string(nrt_inspect_config_t*,
                                                                        const char*, bool) {
  return unsupported(__func__, "event-type filters are not supported by neuronsim");
}
NRT_STATUS nrt_inspect_config_get_all_activity_types(const char***, size_t*) {
  return unsupported(__func__, "activity types are not supported by neuronsim");
}
NRT_STATUS nrt_inspect_config_get_enabled_activity_types(nrt_inspect_config_t*, const char***,
                                                         size_t*) {
  return unsupported(__func__, "activity types are not supported by neuronsim");
}
void nrt_inspect_config_free_activity_types(const char** activity_types, size_t) {
  if (activity_types != nullptr)
    log(kError, __func__, "activity types are not supported by neuronsim");
}
NRT_STATUS nrt_inspect_config_set_activity(nrt_inspect_config_t*, const char*, bool) {
  return unsupported(__func__, "activity types are not supported by neuronsim");
}
NRT_STATUS nrt_inspect_config_set_inspect_device_profile_mode(nrt_inspect_config_t*,
                                                              nrt_inspect_device_profile_mode_t) {
  return unsupported(__func__, "device profile modes are not supported by neuronsim");
}
NRT_STATUS nrt_inspect_get_instance_output_dir(const char*, char*, size_t) {
  return unsupported(__func__, "per-instance output directories are not used by neuronsim");
}

// ---- system trace ------------------------------------------------------------------
NRT_STATUS nrt_sys_trace_config_allocate(nrt_sys_trace_config_t** options) {
  if (options == nullptr) return NRT_INVALID;
  *options = new nrt_sys_trace_config;
  return NRT_SUCCESS;
}
void nrt_sys_trace_config_set_defaults(nrt_sys_trace_config_t* options) {
  if (options != nullptr) *options = nrt_sys_trace_config{};
}
void nrt_sys_trace_config_free(nrt_sys_trace_config_t* options) {
  delete options;
}
void nrt_sys_trace_config_set_max_events_per_nc(nrt_sys_trace_config_t* options, uint64_t n) {
  if (options != nullptr) options->max_events_per_nc = n;
}
void nrt_sys_trace_config_set_capture_enabled_for_nc(nrt_sys_trace_config_t*, uint32_t, bool) {}
NRT_STATUS nrt_sys_trace_config_set_capture_enabled_for_event_type(nrt_sys_trace_config_t*,
                                                                   const char*, bool) {
  return unsupported(__func__, kNoSysTrace);
}
NRT_STATUS nrt_sys_trace_get_event_types(const char***, size_t*) {
  return unsupported(__func__, kNoSysTrace);
}
void nrt_sys_trace_free_event_types(const char**, size_t) {}
NRT_STATUS nrt_sys_trace_config_get_enabled_event_types(nrt_sys_trace_config_t*, const char***,
                                                        size_t*) {
  return unsupported(__func__, kNoSysTrace);
}
NRT_STATUS nrt_sys_trace_start(nrt_sys_trace_config_t*) {
  return unsupported(__func__, kNoSysTrace);
}
NRT_STATUS nrt_sys_trace_stop(void) {
  return unsupported(__func__, kNoSysTrace);
}
NRT_STATUS nrt_sys_trace_fetch_options_allocate(nrt_sys_trace_fetch_options_t** options) {
  if (options == nullptr) return NRT_INVALID;
  *options = new nrt_sys_trace_fetch_options;
  return NRT_SUCCESS;
}
void nrt_sys_trace_fetch_options_set_defaults(nrt_sys_trace_fetch_options_t* options) {
  if (options != nullptr) *options = nrt_sys_trace_fetch_options{};
}
void nrt_sys_trace_fetch_options_free(nrt_sys_trace_fetch_options_t* options) {
  delete options;
}
void nrt_sys_trace_fetch_options_set_max_events_per_nc(nrt_sys_trace_fetch_options_t* options,
                                                       uint64_t n) {
  if (options != nullptr) options->max_events_per_nc = n;
}
void nrt_sys_trace_fetch_options_set_nc_idx(nrt_sys_trace_fetch_options_t* options, uint64_t nc) {
  if (options != nullptr) options->nc_idx = nc;
}
NRT_STATUS nrt_sys_trace_fetch_events(char** buffer, size_t* written_size,
                                      const nrt_sys_trace_fetch_options_t*) {
  if (buffer != nullptr) *buffer = nullptr;
  if (written_size != nullptr) *written_size = 0;
  return unsupported(__func__, kNoSysTrace);
}
void nrt_sys_trace_buffer_free(char* buffer) {
  std::free(buffer);
}

// ---- debug stream ------------------------------------------------------------------
NRT_STATUS nrt_debug_client_connect(int, int* stream_fd) {
  if (stream_fd != nullptr) *stream_fd = -1;
  return unsupported(__func__, "debug streams are not supported by neuronsim");
}
void nrt_debug_client_connect_close(int) {}
NRT_STATUS nrt_debug_client_read_one_event(int, ndebug_stream_event_header_t*, void** payload) {
  if (payload != nullptr) *payload = nullptr;
  return unsupported(__func__, "debug streams are not supported by neuronsim");
}

// ---- explicit async collectives (NRT_3.0.0; the rest of nrta_* is in async.cpp) ----------
NRT_STATUS nrta_cc_prepare(nrt_cc_comm_t*, nrt_tensor_list_t*, nrt_tensor_list_t*, nrt_dtype_t,
                           nrt_op_type_t, nrt_cc_op_type_t, nrt_cc_context_t**) {
  return unsupported(__func__, kNoAsync);
}
NRT_STATUS nrta_cc_schedule(nrt_cc_context_t**, int, NRT_STATUS*, nrta_seq_t*) {
  return unsupported(__func__, kNoAsync);
}

// ---- async send/recv -------------------------------------------------------------------
NRT_STATUS nrt_async_sendrecv_get_max_num_communicators_per_lnc(int*) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_get_max_num_pending_request(int*) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_init(int) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_close(int) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_connect(const char*, int, int, nrt_async_sendrecv_comm_t**) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_accept(const char*, int, int, nrt_async_sendrecv_comm_t**) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_test_comm(nrt_async_sendrecv_comm_t*, bool*) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_send_tensor(nrt_tensor_t*, size_t, size_t, nrt_async_sendrecv_comm_t*,
                                          nrt_async_sendrecv_request_t**) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_recv_tensor(nrt_tensor_t*, size_t, size_t, nrt_async_sendrecv_comm_t*,
                                          nrt_async_sendrecv_request_t**) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_test_request(nrt_async_sendrecv_request_t*, bool*, size_t*) {
  return unsupported(__func__, kNoSendRecv);
}
NRT_STATUS nrt_async_sendrecv_flush(int) {
  return unsupported(__func__, kNoSendRecv);
}

// ---- nec_* (libnccom callbacks) ---------------------------------------------------------
void nec_inc_semaphore(volatile uint32_t* sem, uint32_t val) {
  if (sem != nullptr) *sem = *sem + val;
}
int nec_get_device_count(int*, uint32_t) {
  log(kError, __func__, "{}", kNoCollectives);
  return -1;
}
int nec_get_device_pci_bdf(int, uint32_t*, uint32_t*, uint8_t*, uint8_t*) {
  log(kError, __func__, "the simulator has no PCI devices");
  return -1;
}
NRT_STATUS nec_get_virtual_core_size(uint32_t*) {
  return unsupported(__func__, kNoCollectives);
}
NRT_STATUS nec_build_port_and_rid_map(int, int*, int*, int) {
  return unsupported(__func__, kNoCollectives);
}
bool nec_is_mla_available(int, int) {
  return false;
}
int nec_mla_idx_to_rid(int, int) {
  return -1;
}
int nec_rid_to_mla_idx(int, int) {
  return -1;
}
int nec_get_peer_mla_idx(int, int, int) {
  return -1;
}
int nec_get_p2p_pod_peer_node(uint32_t, int, uint32_t, int*) {
  return -1;
}
NRT_STATUS nec_pod_node_can_access_peer_node(nec_pod_type_t, uint32_t, uint32_t, uint32_t, uint32_t,
                                             int*) {
  return unsupported(__func__, kNoCollectives);
}
void nec_ndl_printk(char* str, uint32_t size, uint32_t) {
  if (str != nullptr && size > 0) log(kInfo, __func__, "{}", std::string(str, strnlen(str, size)));
}
size_t nec_get_dynamic_send_size_bytes(enc_host_mem_t*, size_t, int, int) {
  return 0;
}
size_t nec_get_dynamic_send_offset_bytes(enc_host_mem_t*, size_t, int, int) {
  return 0;
}
size_t nec_get_dynamic_recv_offset_bytes(enc_host_mem_t*, size_t, int, int) {
  return 0;
}
void nec_set_recv_size_bytes(enc_host_mem_t*, size_t, size_t, int, int) {}

}  // extern "C"
