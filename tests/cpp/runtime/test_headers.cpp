// Checks of the public libnrt-compatible C headers (runtime_shim/include/{nrt,ndl}).
//
// Everything that can be checked at compile time is: every function prototype
// (via decltype on the function's address, which is an unevaluated context, so
// nothing needs to link against a library), enum values, struct sizes and field
// offsets on LP64. The runtime tests repeat the tables so a mismatch is reported
// by name, exercise the macros, and make sure every function the headers
// declare is covered by a prototype check here.
//
// Contract: docs/sources/libnrt-api.md; choices: docs/runtime-compat.md.

#include "ndl/neuron_driver_shared_tensor_batch_op.h"
#include "nrt/ndebug_stream.h"
#include "nrt/nec.h"
#include "nrt/nrt.h"
#include "nrt/nrt_async.h"
#include "nrt/nrt_async_sendrecv.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_profile.h"
#include "nrt/nrt_status.h"
#include "nrt/nrt_sys_trace.h"
#include "nrt/nrt_version.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#if defined(NEURONSIM_NRT_STRICT_2_31) || defined(NEURONSIM_NRT_BATCH_OPS_2_34) || \
    defined(NEURONSIM_NRT_NO_LAYOUT_CHECKS)
#error "test_headers.cpp checks the default header surface; build it without the feature switches"
#endif

namespace {

// ---------------------------------------------------------------------------
// Function prototypes, one X-macro list per header: X(name, return type, params...).
// The same lists drive the static_asserts and the coverage test below.
// ---------------------------------------------------------------------------

#define NRT_STATUS_H_FUNCTIONS(X) X(nrt_get_status_as_str, const char*, NRT_STATUS)

#define NRT_H_FUNCTIONS(X)                                                                       \
  X(nrt_get_instance_info, NRT_STATUS, nrt_instance_info_t*, size_t)                             \
  X(nrt_init, NRT_STATUS, nrt_framework_type_t, const char*, const char*)                        \
  X(nrt_close, void)                                                                             \
  X(nrt_load, NRT_STATUS, const void*, size_t, int32_t, int32_t, nrt_model_t**)                  \
  X(nrt_load_collectives, NRT_STATUS, const void*, size_t, int32_t, int32_t, uint32_t, uint32_t, \
    nrt_model_t**)                                                                               \
  X(nrt_unload, NRT_STATUS, nrt_model_t*)                                                        \
  X(nrt_get_model_nc_count, NRT_STATUS, const nrt_model_t*, uint32_t*)                           \
  X(nrt_get_model_vnc_count, NRT_STATUS, const nrt_model_t*, uint32_t*)                          \
  X(nrt_get_total_nc_count, NRT_STATUS, uint32_t*)                                               \
  X(nrt_get_total_vnc_count, NRT_STATUS, uint32_t*)                                              \
  X(nrt_get_visible_nc_count, NRT_STATUS, uint32_t*)                                             \
  X(nrt_get_visible_vnc_count, NRT_STATUS, uint32_t*)                                            \
  X(nrt_allocate_tensor_set, NRT_STATUS, void**)                                                 \
  X(nrt_destroy_tensor_set, void, void**)                                                        \
  X(nrt_add_tensor_to_tensor_set, NRT_STATUS, void*, const char*, nrt_tensor_t*)                 \
  X(nrt_get_tensor_from_tensor_set, NRT_STATUS, void*, const char*, nrt_tensor_t**)              \
  X(nrt_execute, NRT_STATUS, nrt_model_t*, const void*, void*)                                   \
  X(nrt_execute_repeat, NRT_STATUS, nrt_model_t*, const void*, void*, int)                       \
  X(nrt_build_global_comm, NRT_STATUS, int32_t, uint32_t, uint32_t)                              \
  X(nrt_tensor_allocate, NRT_STATUS, nrt_tensor_placement_t, int, size_t, const char*,           \
    nrt_tensor_t**)                                                                              \
  X(nrt_tensor_free, void, nrt_tensor_t**)                                                       \
  X(nrt_tensor_read, NRT_STATUS, const nrt_tensor_t*, void*, size_t, size_t)                     \
  X(nrt_tensor_write, NRT_STATUS, nrt_tensor_t*, const void*, size_t, size_t)                    \
  X(nrt_tensor_read_batch, NRT_STATUS, const nrt_tensor_batch_t*, uint64_t, bool)                \
  X(nrt_tensor_write_batch, NRT_STATUS, const nrt_tensor_batch_t*, uint64_t, bool)               \
  X(nrt_tensor_copy, NRT_STATUS, const nrt_tensor_t*, size_t, nrt_tensor_t*, size_t, size_t)     \
  X(nrt_tensor_get_size, size_t, const nrt_tensor_t*)                                            \
  X(nrt_tensor_memset, NRT_STATUS, nrt_tensor_t*, uint64_t, int, size_t)                         \
  X(nrt_tensor_allocate_empty, NRT_STATUS, const char*, nrt_tensor_t**)                          \
  X(nrt_tensor_attach_buffer, NRT_STATUS, nrt_tensor_t*, void*, size_t)                          \
  X(nrt_tensor_allocate_slice, NRT_STATUS, const nrt_tensor_t*, size_t, size_t, const char*,     \
    nrt_tensor_t**)                                                                              \
  X(nrt_tensor_get_va, void*, const nrt_tensor_t*)                                               \
  X(nrt_tensor_get_device_allocation_info, NRT_STATUS, const nrt_tensor_t*,                      \
    nrt_tensor_device_allocation_info_t*)                                                        \
  X(nrt_tensor_check_output_completion, NRT_STATUS, const nrt_tensor_t*, int64_t, uint64_t)      \
  X(nrt_tensor_reset_output_completion, NRT_STATUS, nrt_tensor_t*)                               \
  X(nrt_get_dmabuf_fd, NRT_STATUS, uint64_t, uint64_t, int*)                                     \
  X(nrt_host_device_id_get, NRT_STATUS, int, uint32_t*)                                          \
  X(nrt_host_device_id_rid_map_get, NRT_STATUS, uint32_t*, uint32_t*)                            \
  X(nrt_get_hbm_mmap_va, NRT_STATUS, int, int, void**, size_t*)                                  \
  X(nrt_get_vnc_memory_stats, NRT_STATUS, uint32_t, nrt_vnc_memory_stats_t*, size_t, size_t*)    \
  X(nrt_get_attached_efa_bdf, NRT_STATUS, const void*, char*, size_t*)                           \
  X(nrt_cc_global_comm_init, NRT_STATUS, uint32_t, uint32_t, uint32_t)                           \
  X(nrt_cc_create_stream, NRT_STATUS, uint32_t)

// Declarations that only runtimes after 2.31 added (hidden by NEURONSIM_NRT_STRICT_2_31).
#define NRT_H_LATER_FUNCTIONS(X)                                           \
  X(nrt_get_dmabuf_fd_v2, NRT_STATUS, uint64_t, uint64_t, int*, uint64_t*) \
  X(nrt_pinned_malloc, void*, size_t, nrt_pinned_alloc_type_t)             \
  X(nrt_pinned_free, void, void*)                                          \
  X(nrt_tensor_get_lnc_index, NRT_STATUS, const nrt_tensor_t*, int*)

#define NRT_VERSION_H_FUNCTIONS(X) X(nrt_get_version, NRT_STATUS, nrt_version_t*, size_t)

#define NRT_EXPERIMENTAL_H_FUNCTIONS(X)                                                  \
  X(nrt_get_model_tensor_info, NRT_STATUS, nrt_model_t*, nrt_tensor_info_array_t**)      \
  X(nrt_get_model_instance_count, NRT_STATUS, nrt_model_t*, uint32_t*)                   \
  X(nrt_free_model_tensor_info, NRT_STATUS, nrt_tensor_info_array_t*)                    \
  X(nrt_trace_start, NRT_STATUS, bool)                                                   \
  X(nrt_trace_stop, NRT_STATUS, const char*)                                             \
  X(nrt_get_libnccl_net, void*, int*, char*, size_t)                                     \
  X(nrt_set_pool_eng_ucode, NRT_STATUS, const nrt_ucode_info*)                           \
  X(nrt_memcpy_to_device, NRT_STATUS, void*, const void*, size_t)                        \
  X(nrt_register_async_exec_callback, NRT_STATUS, NRT_ASYNC_EXEC_STATUS_CALLBACK, void*) \
  X(nrt_barrier, NRT_STATUS, int32_t, uint32_t, uint32_t)                                \
  X(nrt_all_gather, NRT_STATUS, int32_t, uint32_t, uint32_t, uint32_t, void*, void*)     \
  X(nrt_async_drain_queued_execs, NRT_STATUS, int32_t)                                   \
  X(nrt_get_model_info, NRT_STATUS, const nrt_model_t*, nrt_model_info_t*, size_t, size_t*)

#define NRT_EXPERIMENTAL_H_LATER_FUNCTIONS(X)                                                  \
  X(nrt_get_device_id, NRT_STATUS, int, int*)                                                  \
  X(nrt_dump_device_allocation_info, NRT_STATUS, int, neuron_ioctl_mem_chunk_info*, uint32_t*) \
  X(nrt_debug_log_oom_report, NRT_STATUS, int)

#define NRT_PROFILE_H_FUNCTIONS(X)                                                                \
  X(nrt_profile_start, NRT_STATUS, nrt_model_t*, const char*)                                     \
  X(nrt_profile_stop, NRT_STATUS, const char*)                                                    \
  X(nrt_profile_continuous_options_allocate, NRT_STATUS, nrt_profile_continuous_options_t**)      \
  X(nrt_profile_continuous_options_free, NRT_STATUS, nrt_profile_continuous_options_t*)           \
  X(nrt_profile_continuous_options_set_output_dir, NRT_STATUS, nrt_profile_continuous_options_t*, \
    const char*)                                                                                  \
  X(nrt_profile_continuous_start, NRT_STATUS, nrt_profile_continuous_options_t*)                  \
  X(nrt_profile_continuous_save, NRT_STATUS, uint32_t, nrt_profile_continuous_options_t*)         \
  X(nrt_profile_continuous_stop, NRT_STATUS)                                                      \
  X(nrt_profile_session_start, NRT_STATUS, int32_t)                                               \
  X(nrt_profile_session_stop, NRT_STATUS, int32_t, uint64_t*)                                     \
  X(nrt_profile_session_serialize, NRT_STATUS, uint64_t, const char*)                             \
  X(nrt_profile_session_drop, NRT_STATUS, uint64_t)                                               \
  X(nrt_profile_session_drop_all, NRT_STATUS, int32_t)                                            \
  X(nrt_inspect_begin, NRT_STATUS)                                                                \
  X(nrt_inspect_stop, NRT_STATUS)                                                                 \
  X(nrt_inspect_config_allocate, NRT_STATUS, nrt_inspect_config_t**)                              \
  X(nrt_inspect_config_set_defaults, NRT_STATUS, nrt_inspect_config_t*)                           \
  X(nrt_inspect_config_free, NRT_STATUS, nrt_inspect_config_t*)                                   \
  X(nrt_inspect_config_set_session_id, NRT_STATUS, nrt_inspect_config_t*, int)                    \
  X(nrt_inspect_config_set_output_dir, NRT_STATUS, nrt_inspect_config_t*, const char*)            \
  X(nrt_inspect_config_set_sys_trace_max_events_per_nc, NRT_STATUS, nrt_inspect_config_t*,        \
    uint64_t)                                                                                     \
  X(nrt_inspect_config_set_capture_enabled_for_nc, NRT_STATUS, nrt_inspect_config_t*, uint32_t,   \
    bool)                                                                                         \
  X(nrt_inspect_config_set_capture_enabled_for_event_type_string, NRT_STATUS,                     \
    nrt_inspect_config_t*, const char*, bool)                                                     \
  X(nrt_inspect_config_set_enable_inspect, NRT_STATUS, nrt_inspect_config_t*, bool)               \
  X(nrt_inspect_config_set_enable_inspect_on_fail, NRT_STATUS, nrt_inspect_config_t*, bool)       \
  X(nrt_inspect_begin_with_options, NRT_STATUS, nrt_inspect_config_t*)                            \
  X(nrt_inspect_config_get_all_activity_types, NRT_STATUS, const char***, size_t*)                \
  X(nrt_inspect_config_get_enabled_activity_types, NRT_STATUS, nrt_inspect_config_t*,             \
    const char***, size_t*)                                                                       \
  X(nrt_inspect_config_free_activity_types, void, const char**, size_t)                           \
  X(nrt_inspect_config_set_activity, NRT_STATUS, nrt_inspect_config_t*, const char*, bool)        \
  X(nrt_inspect_config_set_inspect_device_profile_mode, NRT_STATUS, nrt_inspect_config_t*,        \
    nrt_inspect_device_profile_mode_t)                                                            \
  X(nrt_inspect_get_instance_output_dir, NRT_STATUS, const char*, char*, size_t)

#define NRT_SYS_TRACE_H_FUNCTIONS(X)                                                               \
  X(nrt_sys_trace_config_allocate, NRT_STATUS, nrt_sys_trace_config_t**)                           \
  X(nrt_sys_trace_config_set_defaults, void, nrt_sys_trace_config_t*)                              \
  X(nrt_sys_trace_config_free, void, nrt_sys_trace_config_t*)                                      \
  X(nrt_sys_trace_config_set_max_events_per_nc, void, nrt_sys_trace_config_t*, uint64_t)           \
  X(nrt_sys_trace_config_set_capture_enabled_for_nc, void, nrt_sys_trace_config_t*, uint32_t,      \
    bool)                                                                                          \
  X(nrt_sys_trace_config_set_capture_enabled_for_event_type, NRT_STATUS, nrt_sys_trace_config_t*,  \
    const char*, bool)                                                                             \
  X(nrt_sys_trace_get_event_types, NRT_STATUS, const char***, size_t*)                             \
  X(nrt_sys_trace_free_event_types, void, const char**, size_t)                                    \
  X(nrt_sys_trace_config_get_enabled_event_types, NRT_STATUS, nrt_sys_trace_config_t*,             \
    const char***, size_t*)                                                                        \
  X(nrt_sys_trace_start, NRT_STATUS, nrt_sys_trace_config_t*)                                      \
  X(nrt_sys_trace_stop, NRT_STATUS)                                                                \
  X(nrt_sys_trace_fetch_options_allocate, NRT_STATUS, nrt_sys_trace_fetch_options_t**)             \
  X(nrt_sys_trace_fetch_options_set_defaults, void, nrt_sys_trace_fetch_options_t*)                \
  X(nrt_sys_trace_fetch_options_free, void, nrt_sys_trace_fetch_options_t*)                        \
  X(nrt_sys_trace_fetch_options_set_max_events_per_nc, void, nrt_sys_trace_fetch_options_t*,       \
    uint64_t)                                                                                      \
  X(nrt_sys_trace_fetch_options_set_nc_idx, void, nrt_sys_trace_fetch_options_t*, uint64_t)        \
  X(nrt_sys_trace_fetch_events, NRT_STATUS, char**, size_t*, const nrt_sys_trace_fetch_options_t*) \
  X(nrt_sys_trace_buffer_free, void, char*)

#define NRT_ASYNC_H_FUNCTIONS(X)                                                                   \
  X(nrta_tensor_write, NRT_STATUS, nrt_tensor_t*, const void*, uint64_t, uint64_t, int, int,       \
    NRT_STATUS*, nrta_seq_t*)                                                                      \
  X(nrta_tensor_read, NRT_STATUS, void*, nrt_tensor_t*, uint64_t, uint64_t, int, int, NRT_STATUS*, \
    nrta_seq_t*)                                                                                   \
  X(nrta_tensor_copy, NRT_STATUS, nrt_tensor_t*, uint64_t, nrt_tensor_t*, uint64_t, uint64_t, int, \
    int, NRT_STATUS*, nrta_seq_t*)                                                                 \
  X(nrta_execute_schedule, NRT_STATUS, nrt_model_t*, const void*, void*, int, NRT_STATUS*,         \
    nrta_seq_t*)                                                                                   \
  X(nrta_cc_prepare, NRT_STATUS, nrt_cc_comm_t*, nrt_tensor_list_t*, nrt_tensor_list_t*,           \
    nrt_dtype_t, nrt_op_type_t, nrt_cc_op_type_t, nrt_cc_context_t**)                              \
  X(nrta_cc_schedule, NRT_STATUS, nrt_cc_context_t**, int, NRT_STATUS*, nrta_seq_t*)               \
  X(nrta_is_completed, NRT_STATUS, nrta_seq_t, bool*)                                              \
  X(nrta_get_sequence, NRT_STATUS, uint32_t, nrta_xu_t, int, nrta_seq_t*)

#define NRT_ASYNC_H_LATER_FUNCTIONS(X)                                       \
  X(nrta_event_register_xu_completion, NRT_STATUS, int, nrta_xu_t, int, int) \
  X(nrta_event_register_seq_id_completion, NRT_STATUS, nrta_seq_t, int)      \
  X(nrta_error_tracker_create, NRT_STATUS, uint32_t, nrta_error_tracker_t**) \
  X(nrta_error_tracker_destroy, void, nrta_error_tracker_t*)                 \
  X(nrta_error_tracker_get_list, NRT_STATUS, nrta_error_tracker_t*, const nrta_error_t**, size_t*)

#define NRT_ASYNC_SENDRECV_H_FUNCTIONS(X)                                                       \
  X(nrt_async_sendrecv_get_max_num_communicators_per_lnc, NRT_STATUS, int*)                     \
  X(nrt_async_sendrecv_get_max_num_pending_request, NRT_STATUS, int*)                           \
  X(nrt_async_sendrecv_init, NRT_STATUS, int)                                                   \
  X(nrt_async_sendrecv_close, NRT_STATUS, int)                                                  \
  X(nrt_async_sendrecv_connect, NRT_STATUS, const char*, int, int, nrt_async_sendrecv_comm_t**) \
  X(nrt_async_sendrecv_accept, NRT_STATUS, const char*, int, int, nrt_async_sendrecv_comm_t**)  \
  X(nrt_async_sendrecv_test_comm, NRT_STATUS, nrt_async_sendrecv_comm_t*, bool*)                \
  X(nrt_async_sendrecv_send_tensor, NRT_STATUS, nrt_tensor_t*, size_t, size_t,                  \
    nrt_async_sendrecv_comm_t*, nrt_async_sendrecv_request_t**)                                 \
  X(nrt_async_sendrecv_recv_tensor, NRT_STATUS, nrt_tensor_t*, size_t, size_t,                  \
    nrt_async_sendrecv_comm_t*, nrt_async_sendrecv_request_t**)                                 \
  X(nrt_async_sendrecv_test_request, NRT_STATUS, nrt_async_sendrecv_request_t*, bool*, size_t*) \
  X(nrt_async_sendrecv_flush, NRT_STATUS, int)

#define NDEBUG_STREAM_H_FUNCTIONS(X)                 \
  X(nrt_debug_client_connect, NRT_STATUS, int, int*) \
  X(nrt_debug_client_connect_close, void, int)       \
  X(nrt_debug_client_read_one_event, NRT_STATUS, int, ndebug_stream_event_header_t*, void**)

#define NEC_H_FUNCTIONS(X)                                                                       \
  X(nec_inc_semaphore, void, volatile uint32_t*, uint32_t)                                       \
  X(nec_get_device_count, int, int*, uint32_t)                                                   \
  X(nec_get_device_pci_bdf, int, int, uint32_t*, uint32_t*, uint8_t*, uint8_t*)                  \
  X(nec_get_virtual_core_size, NRT_STATUS, uint32_t*)                                            \
  X(nec_build_port_and_rid_map, NRT_STATUS, int, int*, int*, int)                                \
  X(nec_is_mla_available, bool, int, int)                                                        \
  X(nec_mla_idx_to_rid, int, int, int)                                                           \
  X(nec_rid_to_mla_idx, int, int, int)                                                           \
  X(nec_get_peer_mla_idx, int, int, int, int)                                                    \
  X(nec_get_p2p_pod_peer_node, int, uint32_t, int, uint32_t, int*)                               \
  X(nec_pod_node_can_access_peer_node, NRT_STATUS, nec_pod_type_t, uint32_t, uint32_t, uint32_t, \
    uint32_t, int*)                                                                              \
  X(nec_ndl_printk, void, char*, uint32_t, uint32_t)                                             \
  X(nec_get_dynamic_send_size_bytes, size_t, enc_host_mem_t*, size_t, int, int)                  \
  X(nec_get_dynamic_send_offset_bytes, size_t, enc_host_mem_t*, size_t, int, int)                \
  X(nec_get_dynamic_recv_offset_bytes, size_t, enc_host_mem_t*, size_t, int, int)                \
  X(nec_set_recv_size_bytes, void, enc_host_mem_t*, size_t, size_t, int, int)

#define ALL_FUNCTIONS(X)                \
  NRT_STATUS_H_FUNCTIONS(X)             \
  NRT_H_FUNCTIONS(X)                    \
  NRT_H_LATER_FUNCTIONS(X)              \
  NRT_VERSION_H_FUNCTIONS(X)            \
  NRT_EXPERIMENTAL_H_FUNCTIONS(X)       \
  NRT_EXPERIMENTAL_H_LATER_FUNCTIONS(X) \
  NRT_PROFILE_H_FUNCTIONS(X)            \
  NRT_SYS_TRACE_H_FUNCTIONS(X)          \
  NRT_ASYNC_H_FUNCTIONS(X)              \
  NRT_ASYNC_H_LATER_FUNCTIONS(X)        \
  NRT_ASYNC_SENDRECV_H_FUNCTIONS(X)     \
  NDEBUG_STREAM_H_FUNCTIONS(X)          \
  NEC_H_FUNCTIONS(X)

// &fn only appears inside decltype, so no definition is needed at link time.
#define CHECK_PROTOTYPE(fn, ret, ...) \
  static_assert(std::is_same_v<decltype(&fn), ret (*)(__VA_ARGS__)>, "prototype of " #fn);
ALL_FUNCTIONS(CHECK_PROTOTYPE)
#undef CHECK_PROTOTYPE

#define FUNCTION_NAME(fn, ...) #fn,
const std::vector<std::string> kCheckedFunctions = {ALL_FUNCTIONS(FUNCTION_NAME)};
const std::vector<std::string> kLaterFunctions = {
    NRT_H_LATER_FUNCTIONS(FUNCTION_NAME) NRT_EXPERIMENTAL_H_LATER_FUNCTIONS(FUNCTION_NAME)
        NRT_ASYNC_H_LATER_FUNCTIONS(FUNCTION_NAME)};
#undef FUNCTION_NAME

#define COUNT_ONE(...) +1
constexpr int kFunctionCount = 0 ALL_FUNCTIONS(COUNT_ONE);
#undef COUNT_ONE
static_assert(kFunctionCount == 158, "number of declared functions");

// ---------------------------------------------------------------------------
// Types.
// ---------------------------------------------------------------------------

template <class T, class = void>
struct IsComplete : std::false_type {};
template <class T>
struct IsComplete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

// Opaque handles stay incomplete; the tensor set is `void`.
static_assert(!IsComplete<nrt_model_t>::value);
static_assert(!IsComplete<nrt_tensor_t>::value);
static_assert(!IsComplete<nrt_cc_context_t>::value);
static_assert(!IsComplete<nrt_profile_continuous_options_t>::value);
static_assert(!IsComplete<nrt_inspect_config_t>::value);
static_assert(!IsComplete<nrt_sys_trace_config_t>::value);
static_assert(!IsComplete<nrt_sys_trace_fetch_options_t>::value);
static_assert(!IsComplete<nrt_async_sendrecv_comm_t>::value);
static_assert(!IsComplete<nrt_async_sendrecv_request_t>::value);
static_assert(!IsComplete<enc_host_mem_t>::value);
static_assert(std::is_void_v<nrt_tensor_set_t>);

static_assert(std::is_same_v<nrta_seq_t, uint64_t>);
static_assert(std::is_same_v<nrta_xu_id_t, uint16_t>);
static_assert(std::is_same_v<nrt_tensor_batch_offset_t, uint64_t>);
static_assert(std::is_same_v<nrt_tensor_batch_size_t, uint64_t>);
static_assert(std::is_same_v<NRT_ASYNC_EXEC_STATUS_CALLBACK,
                             void (*)(void*, uint32_t, uint32_t, uint64_t, NRT_STATUS)>);

// Field types of the structs clients read or fill.
static_assert(std::is_same_v<decltype(nrt_tensor_info_t::name), char[NRT_TENSOR_NAME_MAX]>);
static_assert(std::is_same_v<decltype(nrt_tensor_info_t::usage), nrt_tensor_usage_t>);
static_assert(std::is_same_v<decltype(nrt_tensor_info_t::size), size_t>);
static_assert(std::is_same_v<decltype(nrt_tensor_info_t::dtype), nrt_dtype_t>);
static_assert(std::is_same_v<decltype(nrt_tensor_info_t::shape), uint32_t*>);
static_assert(std::is_same_v<decltype(nrt_tensor_info_t::ndim), uint32_t>);
static_assert(std::is_same_v<decltype(nrt_tensor_info_array_t::tensor_count), uint64_t>);
static_assert(std::is_same_v<decltype(nrt_version_t::rt_major), uint64_t>);
static_assert(std::is_same_v<decltype(nrt_version_t::rt_detail), char[RT_VERSION_DETAIL_LEN]>);
static_assert(std::is_same_v<decltype(nrt_version_t::git_hash), char[GIT_HASH_LEN]>);
static_assert(std::is_same_v<decltype(nrt_instance_info_t::family), uint32_t>);
static_assert(std::is_same_v<decltype(nrt_instance_info_t::arch_name), char[16]>);
static_assert(std::is_same_v<decltype(nrt_instance_info_t::device_revision), char[8]>);
static_assert(std::is_same_v<decltype(nrt_tensor_batch_t::tensor), const nrt_tensor_t*>);
static_assert(std::is_same_v<decltype(nrt_tensor_batch_t::ops), const nrt_tensor_batch_op_t*>);
static_assert(std::is_same_v<decltype(nrt_tensor_batch_op_t::buffer), void*>);
static_assert(std::is_same_v<decltype(nrt_ucode_img::bin), uint8_t*>);
static_assert(std::is_same_v<decltype(nrt_cc_comm_t::replica_group), uint32_t*>);
static_assert(std::is_same_v<decltype(nrt_tensor_list_t::tensors), nrt_tensor_t**>);
static_assert(std::is_same_v<decltype(nrt_tensor_device_allocation_info_t::hbm_index), int>);
static_assert(std::is_same_v<decltype(ndebug_stream_event_header_t::type), uint32_t>);
static_assert(
    std::is_same_v<decltype(ndebug_stream_payload_debug_tensor_read_t::tensor_shape), uint64_t[8]>);

// ---------------------------------------------------------------------------
// Enum values (compile time; repeated at run time below for readable reports).
// ---------------------------------------------------------------------------

static_assert(NRT_SUCCESS == 0 && NRT_FAILURE == 1 && NRT_INVALID == 2 && NRT_INVALID_HANDLE == 3);
static_assert(NRT_RESOURCE == 4 && NRT_TIMEOUT == 5 && NRT_HW_ERROR == 6 && NRT_QUEUE_FULL == 7);
static_assert(NRT_LOAD_NOT_ENOUGH_NC == 9 && NRT_UNSUPPORTED_NEFF_VERSION == 10 &&
              NRT_FAIL_HOST_MEM_ALLOC == 11);
static_assert(NRT_UNINITIALIZED == 13 && NRT_CLOSED == 14 && NRT_QUEUE_EMPTY == 15);
static_assert(NRT_EXEC_UNIT_UNRECOVERABLE == 101 && NRT_EXEC_BAD_INPUT == 1002);
static_assert(NRT_EXEC_COMPLETED_WITH_NUM_ERR == 1003 && NRT_EXEC_COMPLETED_WITH_ERR == 1004);
static_assert(NRT_EXEC_NC_BUSY == 1005 && NRT_EXEC_OOB == 1006 && NRT_COLL_PENDING == 1100);
static_assert(NRT_EXEC_HW_ERR_COLLECTIVES == 1200 && NRT_EXEC_HW_ERR_HBM_UE == 1201 &&
              NRT_EXEC_HW_ERR_NC_UE == 1202);
static_assert(NRT_EXEC_HW_ERR_DMA_ABORT == 1203 && NRT_EXEC_SW_NQ_OVERFLOW == 1204);
static_assert(NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE == 1205 && NRT_NETWORK_PROXY_FAILURE == 1206);

static_assert(NRT_DTYPE_UNKNOWN == 0x0 && NRT_DTYPE_INVALID == 0x0 && NRT_DTYPE_UINT64 == 0x1);
static_assert(NRT_DTYPE_INT8 == 0x2 && NRT_DTYPE_UINT8 == 0x3 && NRT_DTYPE_INT16 == 0x4 &&
              NRT_DTYPE_UINT16 == 0x5);
static_assert(NRT_DTYPE_BFLOAT16 == 0x6 && NRT_DTYPE_FLOAT16 == 0x7 && NRT_DTYPE_INT32 == 0x8);
static_assert(NRT_DTYPE_UINT32 == 0x9 && NRT_DTYPE_FLOAT32 == 0xA && NRT_DTYPE_FP32R == 0xB &&
              NRT_DTYPE_INT64 == 0xC);
static_assert(NRT_DTYPE_FP8_E3 == 0xD && NRT_DTYPE_FP8_E4 == 0xE && NRT_DTYPE_FP8_E5 == 0xF);

static_assert(NRT_TENSOR_PLACEMENT_DEVICE == 0 && NRT_TENSOR_PLACEMENT_HOST == 1 &&
              NRT_TENSOR_PLACEMENT_VIRTUAL == 2);
static_assert(NRT_FRAMEWORK_TYPE_INVALID == 0 && NRT_FRAMEWORK_TYPE_NO_FW == 1 &&
              NRT_FRAMEWORK_TYPE_TENSORFLOW == 2);
static_assert(NRT_FRAMEWORK_TYPE_PYTORCH == 3 && NRT_FRAMEWORK_TYPE_MXNET == 4 &&
              NRT_FRAMEWORK_TYPE_PRECHECK == 5);
static_assert(NRT_TENSOR_USAGE_INPUT == 0 && NRT_TENSOR_USAGE_OUTPUT == 1);
static_assert(NRT_OP_ADD == 0x0 && NRT_OP_FMA == 0x1 && NRT_OP_MAX == 0x2 && NRT_OP_MIN == 0x3 &&
              NRT_OP_INVALID == 0xF);
static_assert(NRT_CC_ALLGATHER == 0 && NRT_CC_ALLREDUCE == 1 && NRT_CC_REDUCESCATTER == 2);
static_assert(NRT_PINNED_MALLOC == 0 && NRT_PINNED_HUGEPAGE_2M == 1 && NRT_PINNED_HUGEPAGE_1G == 2);
static_assert(NRTA_XU_TENSOR_OP == 0 && NRTA_XU_COMPUTE == 1 && NRTA_XU_COLLECTIVES == 2 &&
              NRTA_XU_TYPE_NUM == 3);
static_assert(NRT_INSPECT_DEVICE_PROFILE_MODE_DISABLED == 0 &&
              NRT_INSPECT_DEVICE_PROFILE_MODE_MODEL == 1 &&
              NRT_INSPECT_DEVICE_PROFILE_MODE_SESSION == 2);
static_assert(NDEBUG_STREAM_EVENT_TYPE_INVALID == 0 &&
              NDEBUG_STREAM_EVENT_TYPE_DEBUG_TENSOR_READ == 1);
static_assert(NEC_POD_TYPE_NONE == 0 && NEC_POD_TYPE_P2P == 1 && NEC_POD_TYPE_SWITCH == 2 &&
              NEC_POD_TYPE_INVALID == 3);
static_assert(NRT_INSTANCE_SIZE_NUM == NRT_INSTANCE_SIZE_UNKNOWN);

// Every enum the API passes by value is 4 bytes.
static_assert(sizeof(NRT_STATUS) == 4 && sizeof(nrt_dtype_t) == 4 &&
              sizeof(nrt_tensor_placement_t) == 4);
static_assert(sizeof(nrt_framework_type_t) == 4 && sizeof(nrt_tensor_usage_t) == 4 &&
              sizeof(nrt_op_type_t) == 4);
static_assert(sizeof(nrt_cc_op_type_t) == 4 && sizeof(nrt_pinned_alloc_type_t) == 4 &&
              sizeof(nrta_xu_t) == 4);
static_assert(sizeof(nrt_inspect_device_profile_mode_t) == 4 &&
              sizeof(ndebug_stream_event_type_t) == 4);
static_assert(sizeof(nec_pod_type_t) == 4);

// ---------------------------------------------------------------------------
// Struct layouts (x86-64 LP64).
// ---------------------------------------------------------------------------

#define CHECK_OFFSET(type, field, off) \
  static_assert(offsetof(type, field) == (off), #type "." #field);

static_assert(sizeof(nrt_tensor_info_t) == 296);
CHECK_OFFSET(nrt_tensor_info_t, name, 0)
CHECK_OFFSET(nrt_tensor_info_t, usage, 256)
CHECK_OFFSET(nrt_tensor_info_t, size, 264)
CHECK_OFFSET(nrt_tensor_info_t, dtype, 272)
CHECK_OFFSET(nrt_tensor_info_t, shape, 280)
CHECK_OFFSET(nrt_tensor_info_t, ndim, 288)
static_assert(sizeof(nrt_tensor_info_array_t) == 8);
CHECK_OFFSET(nrt_tensor_info_array_t, tensor_count, 0)
CHECK_OFFSET(nrt_tensor_info_array_t, tensor_array, 8)
static_assert(sizeof(nrt_version_t) == 224);
CHECK_OFFSET(nrt_version_t, rt_major, 0)
CHECK_OFFSET(nrt_version_t, rt_minor, 8)
CHECK_OFFSET(nrt_version_t, rt_patch, 16)
CHECK_OFFSET(nrt_version_t, rt_maintenance, 24)
CHECK_OFFSET(nrt_version_t, rt_detail, 32)
CHECK_OFFSET(nrt_version_t, git_hash, 160)
static_assert(sizeof(nrt_instance_info_t) == 32);
CHECK_OFFSET(nrt_instance_info_t, family, 0)
CHECK_OFFSET(nrt_instance_info_t, size, 4)
CHECK_OFFSET(nrt_instance_info_t, arch_name, 8)
CHECK_OFFSET(nrt_instance_info_t, device_revision, 24)
static_assert(sizeof(nrt_model_info_t) == 4);
CHECK_OFFSET(nrt_model_info_t, vnc, 0)
static_assert(sizeof(nrt_vnc_memory_stats_t) == 16);
CHECK_OFFSET(nrt_vnc_memory_stats_t, bytes_used, 0)
CHECK_OFFSET(nrt_vnc_memory_stats_t, bytes_limit, 8)
static_assert(sizeof(nrt_tensor_device_allocation_info_t) == 24);
CHECK_OFFSET(nrt_tensor_device_allocation_info_t, physical_address, 0)
CHECK_OFFSET(nrt_tensor_device_allocation_info_t, size, 8)
CHECK_OFFSET(nrt_tensor_device_allocation_info_t, hbm_index, 16)
static_assert(sizeof(nrt_tensor_batch_op_t) == 24);
CHECK_OFFSET(nrt_tensor_batch_op_t, offset, 0)
CHECK_OFFSET(nrt_tensor_batch_op_t, size, 8)
CHECK_OFFSET(nrt_tensor_batch_op_t, buffer, 16)
static_assert(sizeof(nrt_tensor_batch_t) == 24);
CHECK_OFFSET(nrt_tensor_batch_t, tensor, 0)
CHECK_OFFSET(nrt_tensor_batch_t, ops, 8)
CHECK_OFFSET(nrt_tensor_batch_t, num_ops, 16)
static_assert(sizeof(nrt_ucode_img) == 16);
CHECK_OFFSET(nrt_ucode_img, bin, 0)
CHECK_OFFSET(nrt_ucode_img, size, 8)
static_assert(sizeof(nrt_ucode_info) == 32);
CHECK_OFFSET(nrt_ucode_info, iram, 0)
CHECK_OFFSET(nrt_ucode_info, dram, 16)
static_assert(sizeof(nrt_cc_comm_t) == 32);
CHECK_OFFSET(nrt_cc_comm_t, replica_group, 0)
CHECK_OFFSET(nrt_cc_comm_t, rank, 8)
CHECK_OFFSET(nrt_cc_comm_t, rank_n, 12)
CHECK_OFFSET(nrt_cc_comm_t, ctx_device_id, 16)
CHECK_OFFSET(nrt_cc_comm_t, ctx_device_count, 20)
CHECK_OFFSET(nrt_cc_comm_t, vnc, 24)
static_assert(sizeof(nrt_tensor_list_t) == 16);
CHECK_OFFSET(nrt_tensor_list_t, tensors, 0)
CHECK_OFFSET(nrt_tensor_list_t, num_tensors, 8)
static_assert(sizeof(nrt_cc_param_t) == 4);
CHECK_OFFSET(nrt_cc_param_t, num_ops, 0)
static_assert(sizeof(neuron_ioctl_mem_chunk_info) == 24);
CHECK_OFFSET(neuron_ioctl_mem_chunk_info, pa, 0)
CHECK_OFFSET(neuron_ioctl_mem_chunk_info, size, 8)
CHECK_OFFSET(neuron_ioctl_mem_chunk_info, mem_type, 16)
static_assert(sizeof(ndebug_stream_event_header_t) == 64);
CHECK_OFFSET(ndebug_stream_event_header_t, data_size, 0)
CHECK_OFFSET(ndebug_stream_event_header_t, type, 8)
CHECK_OFFSET(ndebug_stream_event_header_t, reserved, 12)
static_assert(sizeof(ndebug_stream_payload_debug_tensor_read_t) == 1024);
CHECK_OFFSET(ndebug_stream_payload_debug_tensor_read_t, prefix, 0)
CHECK_OFFSET(ndebug_stream_payload_debug_tensor_read_t, logical_nc_id, 512)
CHECK_OFFSET(ndebug_stream_payload_debug_tensor_read_t, pipe, 516)
CHECK_OFFSET(ndebug_stream_payload_debug_tensor_read_t, tensor_dtype, 520)
CHECK_OFFSET(ndebug_stream_payload_debug_tensor_read_t, tensor_shape, 536)
CHECK_OFFSET(ndebug_stream_payload_debug_tensor_read_t, tensor_data_size, 600)
CHECK_OFFSET(ndebug_stream_payload_debug_tensor_read_t, reserved0, 608)
CHECK_OFFSET(ndebug_stream_payload_debug_tensor_read_t, tensor_data, 1024)
static_assert(sizeof(nrta_seq_t) == 8);

#undef CHECK_OFFSET

// ---------------------------------------------------------------------------
// Run-time tables.
// ---------------------------------------------------------------------------

struct Named {
  const char* name;
  long long actual;
  long long expected;
};

void ExpectTable(const std::vector<Named>& table) {
  for (const Named& row : table) {
    EXPECT_EQ(row.actual, row.expected) << row.name;
  }
}

#define ROW(name, expected)                                                   \
  Named {                                                                     \
#name, static_cast < long long>(name), static_cast < long long>(expected) \
  }

TEST(RuntimeHeaders, StatusCodes) {
  const std::vector<Named> table = {
      ROW(NRT_SUCCESS, 0),
      ROW(NRT_FAILURE, 1),
      ROW(NRT_INVALID, 2),
      ROW(NRT_INVALID_HANDLE, 3),
      ROW(NRT_RESOURCE, 4),
      ROW(NRT_TIMEOUT, 5),
      ROW(NRT_HW_ERROR, 6),
      ROW(NRT_QUEUE_FULL, 7),
      ROW(NRT_LOAD_NOT_ENOUGH_NC, 9),
      ROW(NRT_UNSUPPORTED_NEFF_VERSION, 10),
      ROW(NRT_FAIL_HOST_MEM_ALLOC, 11),
      ROW(NRT_UNINITIALIZED, 13),
      ROW(NRT_CLOSED, 14),
      ROW(NRT_QUEUE_EMPTY, 15),
      ROW(NRT_EXEC_UNIT_UNRECOVERABLE, 101),
      ROW(NRT_EXEC_BAD_INPUT, 1002),
      ROW(NRT_EXEC_COMPLETED_WITH_NUM_ERR, 1003),
      ROW(NRT_EXEC_COMPLETED_WITH_ERR, 1004),
      ROW(NRT_EXEC_NC_BUSY, 1005),
      ROW(NRT_EXEC_OOB, 1006),
      ROW(NRT_COLL_PENDING, 1100),
      ROW(NRT_EXEC_HW_ERR_COLLECTIVES, 1200),
      ROW(NRT_EXEC_HW_ERR_HBM_UE, 1201),
      ROW(NRT_EXEC_HW_ERR_NC_UE, 1202),
      ROW(NRT_EXEC_HW_ERR_DMA_ABORT, 1203),
      ROW(NRT_EXEC_SW_NQ_OVERFLOW, 1204),
      ROW(NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE, 1205),
      ROW(NRT_NETWORK_PROXY_FAILURE, 1206),
  };
  ExpectTable(table);
  std::set<long long> values;
  for (const Named& row : table) {
    values.insert(row.actual);
  }
  EXPECT_EQ(values.size(), table.size()) << "status codes must be distinct";
  EXPECT_EQ(values.count(8), 0U);
  EXPECT_EQ(values.count(12), 0U);
  EXPECT_EQ(sizeof(NRT_STATUS), 4U);
}

TEST(RuntimeHeaders, DtypeUsesHardwareCodes) {
  const std::vector<Named> table = {
      ROW(NRT_DTYPE_UNKNOWN, 0x0), ROW(NRT_DTYPE_INVALID, 0x0),  ROW(NRT_DTYPE_UINT64, 0x1),
      ROW(NRT_DTYPE_INT8, 0x2),    ROW(NRT_DTYPE_UINT8, 0x3),    ROW(NRT_DTYPE_INT16, 0x4),
      ROW(NRT_DTYPE_UINT16, 0x5),  ROW(NRT_DTYPE_BFLOAT16, 0x6), ROW(NRT_DTYPE_FLOAT16, 0x7),
      ROW(NRT_DTYPE_INT32, 0x8),   ROW(NRT_DTYPE_UINT32, 0x9),   ROW(NRT_DTYPE_FLOAT32, 0xA),
      ROW(NRT_DTYPE_FP32R, 0xB),   ROW(NRT_DTYPE_INT64, 0xC),    ROW(NRT_DTYPE_FP8_E3, 0xD),
      ROW(NRT_DTYPE_FP8_E4, 0xE),  ROW(NRT_DTYPE_FP8_E5, 0xF),
  };
  ExpectTable(table);
  // The 4-bit code space is used exactly once (UNKNOWN and INVALID alias 0).
  std::set<long long> codes;
  for (const Named& row : table) {
    codes.insert(row.actual);
  }
  EXPECT_EQ(codes.size(), 16U);
  EXPECT_EQ(*codes.rbegin(), 0xF);
  // Not the legacy sequential numbering (FLOAT32 = 1, BFLOAT16 = 3).
  EXPECT_NE(static_cast<int>(NRT_DTYPE_FLOAT32), 1);
  EXPECT_NE(static_cast<int>(NRT_DTYPE_BFLOAT16), 3);
}

TEST(RuntimeHeaders, SmallEnums) {
  ExpectTable({
      ROW(NRT_TENSOR_PLACEMENT_DEVICE, 0),
      ROW(NRT_TENSOR_PLACEMENT_HOST, 1),
      ROW(NRT_TENSOR_PLACEMENT_VIRTUAL, 2),
      ROW(NRT_FRAMEWORK_TYPE_INVALID, 0),
      ROW(NRT_FRAMEWORK_TYPE_NO_FW, 1),
      ROW(NRT_FRAMEWORK_TYPE_TENSORFLOW, 2),
      ROW(NRT_FRAMEWORK_TYPE_PYTORCH, 3),
      ROW(NRT_FRAMEWORK_TYPE_MXNET, 4),
      ROW(NRT_FRAMEWORK_TYPE_PRECHECK, 5),
      ROW(NRT_TENSOR_USAGE_INPUT, 0),
      ROW(NRT_TENSOR_USAGE_OUTPUT, 1),
      ROW(NRT_OP_ADD, 0x0),
      ROW(NRT_OP_FMA, 0x1),
      ROW(NRT_OP_MAX, 0x2),
      ROW(NRT_OP_MIN, 0x3),
      ROW(NRT_OP_INVALID, 0xF),
      ROW(NRT_CC_ALLGATHER, 0),
      ROW(NRT_CC_ALLREDUCE, 1),
      ROW(NRT_CC_REDUCESCATTER, 2),
      ROW(NRT_PINNED_MALLOC, 0),
      ROW(NRT_PINNED_HUGEPAGE_2M, 1),
      ROW(NRT_PINNED_HUGEPAGE_1G, 2),
      ROW(NRTA_XU_TENSOR_OP, 0),
      ROW(NRTA_XU_COMPUTE, 1),
      ROW(NRTA_XU_COLLECTIVES, 2),
      ROW(NRTA_XU_TYPE_NUM, 3),
      ROW(NRT_INSPECT_DEVICE_PROFILE_MODE_DISABLED, 0),
      ROW(NRT_INSPECT_DEVICE_PROFILE_MODE_MODEL, 1),
      ROW(NRT_INSPECT_DEVICE_PROFILE_MODE_SESSION, 2),
      ROW(NDEBUG_STREAM_EVENT_TYPE_INVALID, 0),
      ROW(NDEBUG_STREAM_EVENT_TYPE_DEBUG_TENSOR_READ, 1),
      ROW(NEC_POD_TYPE_NONE, 0),
      ROW(NEC_POD_TYPE_P2P, 1),
      ROW(NEC_POD_TYPE_SWITCH, 2),
      ROW(NEC_POD_TYPE_INVALID, 3),
  });
}

TEST(RuntimeHeaders, InstanceFamilyAndSize) {
  ExpectTable({
      ROW(NRT_INSTANCE_UNKNOWN, 0),
      ROW(NRT_INSTANCE_INF1, 1),
      ROW(NRT_INSTANCE_TRN1, 2),
      ROW(NRT_INSTANCE_TRN1N, 3),
      ROW(NRT_INSTANCE_INF2, 4),
      ROW(NRT_INSTANCE_TRN2, 5),
      ROW(NRT_INSTANCE_TRN2N, 6),
      ROW(NRT_INSTANCE_INF2E, 7),
      ROW(NRT_INSTANCE_TRN2P, 8),
      ROW(NRT_INSTANCE_TRN2U, 9),
      ROW(NRT_INSTANCE_TRN2E, 10),
      ROW(NRT_INSTANCE_TRN2EU, 11),
      ROW(NRT_INSTANCE_TRN2AC, 12),
      ROW(NRT_INSTANCE_TRN2UAC, 13),
      ROW(NRT_INSTANCE_TRN3, 14),
      ROW(NRT_INSTANCE_TRN3PDS98, 15),
      ROW(NRT_INSTANCE_TRN2EN, 16),
      ROW(NRT_INSTANCE_TRN3E, 17),
  });
  ExpectTable({
      ROW(NRT_INSTANCE_SIZE_1XL, 0),
      ROW(NRT_INSTANCE_SIZE_2XL, 1),
      ROW(NRT_INSTANCE_SIZE_4XL, 2),
      ROW(NRT_INSTANCE_SIZE_6XL, 3),
      ROW(NRT_INSTANCE_SIZE_8XL, 4),
      ROW(NRT_INSTANCE_SIZE_24XL, 5),
      ROW(NRT_INSTANCE_SIZE_32XL, 6),
      ROW(NRT_INSTANCE_SIZE_48XL, 7),
      ROW(NRT_INSTANCE_SIZE_3XL, 8),
      ROW(NRT_INSTANCE_SIZE_UNKNOWN, 9),
      ROW(NRT_INSTANCE_SIZE_NUM, 9),
  });
}

TEST(RuntimeHeaders, Macros) {
  ExpectTable({
      ROW(NRT_MAJOR_VERSION, 2),
      ROW(NRT_MINOR_VERSION, 0),
      ROW(NRT_TENSOR_NAME_MAX, 256),
      ROW(RT_VERSION_DETAIL_LEN, 128),
      ROW(GIT_HASH_LEN, 64),
      ROW(NEURONSIM_NRT_SHIM, 1),
      ROW(NEURONSIM_NRT_COMPAT_MAJOR, 2),
      ROW(NEURONSIM_NRT_COMPAT_MINOR, 31),
      ROW(NEURONSIM_NRT_CHECK_LAYOUT, 1),
  });
}

TEST(RuntimeHeaders, AsyncSequenceNumberMacros) {
  EXPECT_EQ(NRTA_SEQ_NUM_MAX, (1ULL << 48) - 1);
  EXPECT_EQ(NRTA_SEQ_NUM_MASK, NRTA_SEQ_NUM_MAX);
  const nrta_seq_t seq = (static_cast<nrta_seq_t>(NRTA_XU_COLLECTIVES) << 48) | 12345U;
  EXPECT_EQ(NRTA_SEQ_GET_XU_ID(seq), static_cast<nrta_seq_t>(NRTA_XU_COLLECTIVES));
  EXPECT_EQ(NRTA_SEQ_GET_SEQ_NUM(seq), 12345U);
  // The argument is parenthesised, so expressions work.
  EXPECT_EQ(NRTA_SEQ_GET_SEQ_NUM(seq + 1), 12346U);
  EXPECT_EQ(NRTA_SEQ_GET_XU_ID(seq | 7), static_cast<nrta_seq_t>(NRTA_XU_COLLECTIVES));
  EXPECT_EQ(NRTA_SEQ_GET_SEQ_NUM(~nrta_seq_t{0}), NRTA_SEQ_NUM_MAX);
  EXPECT_EQ(NRTA_SEQ_GET_XU_ID(~nrta_seq_t{0}), 0xFFFFU);
}

#define LAYOUT(type, field, expected)                                           \
  Named {                                                                       \
#type "." #field, static_cast < long long>(offsetof(type, field)), expected \
  }
#define SIZE(type, expected)                                            \
  Named {                                                               \
    "sizeof(" #type ")", static_cast<long long>(sizeof(type)), expected \
  }

TEST(RuntimeHeaders, StructLayouts) {
  ExpectTable({
      SIZE(nrt_tensor_info_t, 296),
      LAYOUT(nrt_tensor_info_t, name, 0),
      LAYOUT(nrt_tensor_info_t, usage, 256),
      LAYOUT(nrt_tensor_info_t, size, 264),
      LAYOUT(nrt_tensor_info_t, dtype, 272),
      LAYOUT(nrt_tensor_info_t, shape, 280),
      LAYOUT(nrt_tensor_info_t, ndim, 288),
      SIZE(nrt_tensor_info_array_t, 8),
      LAYOUT(nrt_tensor_info_array_t, tensor_array, 8),
      SIZE(nrt_version_t, 224),
      LAYOUT(nrt_version_t, rt_detail, 32),
      LAYOUT(nrt_version_t, git_hash, 160),
      SIZE(nrt_instance_info_t, 32),
      LAYOUT(nrt_instance_info_t, arch_name, 8),
      LAYOUT(nrt_instance_info_t, device_revision, 24),
      SIZE(nrt_model_info_t, 4),
      SIZE(nrt_vnc_memory_stats_t, 16),
      SIZE(nrt_tensor_device_allocation_info_t, 24),
      LAYOUT(nrt_tensor_device_allocation_info_t, hbm_index, 16),
      SIZE(nrt_tensor_batch_op_t, 24),
      SIZE(nrt_tensor_batch_t, 24),
      LAYOUT(nrt_tensor_batch_t, num_ops, 16),
      SIZE(nrt_ucode_img, 16),
      SIZE(nrt_ucode_info, 32),
      LAYOUT(nrt_ucode_info, dram, 16),
      SIZE(nrt_cc_comm_t, 32),
      LAYOUT(nrt_cc_comm_t, vnc, 24),
      SIZE(nrt_tensor_list_t, 16),
      SIZE(nrt_cc_param_t, 4),
      SIZE(neuron_ioctl_mem_chunk_info, 24),
      SIZE(ndebug_stream_event_header_t, 64),
      SIZE(ndebug_stream_payload_debug_tensor_read_t, 1024),
      LAYOUT(ndebug_stream_payload_debug_tensor_read_t, tensor_data_size, 600),
      LAYOUT(ndebug_stream_payload_debug_tensor_read_t, tensor_data, 1024),
  });
}

TEST(RuntimeHeaders, TensorInfoArrayIsFlexible) {
  // Built the way the runtime returns it: one block, header then entries.
  constexpr size_t kCount = 3;
  void* block =
      std::calloc(1, sizeof(nrt_tensor_info_array_t) + kCount * sizeof(nrt_tensor_info_t));
  ASSERT_NE(block, nullptr);
  auto* array = static_cast<nrt_tensor_info_array_t*>(block);
  array->tensor_count = kCount;
  array->tensor_array[2].usage = NRT_TENSOR_USAGE_OUTPUT;
  array->tensor_array[2].dtype = NRT_DTYPE_BFLOAT16;
  const auto* base = static_cast<const unsigned char*>(block);
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(&array->tensor_array[2]) - base, 8 + 2 * 296);
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(&array->tensor_array[2].dtype) - base,
            8 + 2 * 296 + 272);
  EXPECT_EQ(base[8 + 2 * 296 + 272], 0x6);  // little-endian enum value
  std::free(block);
}

// ---------------------------------------------------------------------------
// Coverage: every function the headers declare has a prototype check above,
// and every checked name is declared by some header.
// ---------------------------------------------------------------------------

std::string StripComments(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 2;
      out += ' ';
    } else if (text.compare(i, 2, "//") == 0) {
      i = text.find('\n', i);
      if (i == std::string::npos) {
        i = text.size();
      }
    } else {
      out += text[i++];
    }
  }
  return out;
}

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Names of the functions a header declares: for each top-level statement that
// is not a typedef, the identifier right before its first '('.
std::set<std::string> DeclaredFunctions(const std::filesystem::path& header) {
  std::ifstream in(header);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string code;
  std::istringstream lines(StripComments(buffer.str()));
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '#') {
      continue;  // preprocessor line (the headers have no multi-line macros)
    }
    code += line + '\n';
  }
  std::set<std::string> names;
  std::istringstream statements(code);
  for (std::string stmt; std::getline(statements, stmt, ';');) {
    const size_t brace = stmt.find_last_of("{}");
    if (brace != std::string::npos) {
      stmt = stmt.substr(brace + 1);
    }
    const size_t start = stmt.find_first_not_of(" \t\n");
    if (start == std::string::npos || stmt.compare(start, 7, "typedef") == 0) {
      continue;
    }
    const size_t paren = stmt.find('(');
    if (paren == std::string::npos) {
      continue;
    }
    size_t end = paren;
    while (end > 0 && (stmt[end - 1] == ' ' || stmt[end - 1] == '\t' || stmt[end - 1] == '\n')) {
      --end;
    }
    size_t begin = end;
    while (begin > 0 && IsIdentChar(stmt[begin - 1])) {
      --begin;
    }
    const std::string name = stmt.substr(begin, end - begin);
    if (name.rfind("nrt", 0) == 0 || name.rfind("nec_", 0) == 0) {
      names.insert(name);
    }
  }
  return names;
}

TEST(RuntimeHeaders, EveryDeclaredFunctionIsChecked) {
#ifndef NEURONSIM_SOURCE_DIR
  GTEST_SKIP() << "NEURONSIM_SOURCE_DIR not defined";
#else
  const std::filesystem::path include_dir =
      std::filesystem::path(NEURONSIM_SOURCE_DIR) / "runtime_shim" / "include";
  ASSERT_TRUE(std::filesystem::is_directory(include_dir)) << include_dir;
  std::set<std::string> declared;
  size_t headers = 0;
  for (const char* sub : {"nrt", "ndl"}) {
    for (const auto& entry : std::filesystem::directory_iterator(include_dir / sub)) {
      if (entry.path().extension() == ".h") {
        ++headers;
        const std::set<std::string> names = DeclaredFunctions(entry.path());
        declared.insert(names.begin(), names.end());
      }
    }
  }
  EXPECT_EQ(headers, 12U) << "header count changed: update this test and docs/runtime-compat.md";
  const std::set<std::string> checked(kCheckedFunctions.begin(), kCheckedFunctions.end());
  EXPECT_EQ(checked.size(), kCheckedFunctions.size()) << "a function is listed twice";
  for (const std::string& name : declared) {
    EXPECT_TRUE(checked.count(name)) << name << " is declared but has no prototype check";
  }
  for (const std::string& name : checked) {
    EXPECT_TRUE(declared.count(name)) << name << " is checked but not declared";
  }
  EXPECT_EQ(declared.size(), 158U);
#endif
}

TEST(RuntimeHeaders, FunctionCounts) {
  // 146 declarations make the 2.31 surface: the 145 functions libnrt 2.31.24
  // exports (121 nrt_*, 8 nrta_*, 16 nec_*) plus nrt_get_status_as_str.
  // Twelve more come from later runtimes (three of them the error trackers of the SDK 2.28
  // header, which TorchNeuron's runtime calls).
  size_t nrt = 0;
  size_t nrta = 0;
  size_t nec = 0;
  for (const std::string& name : kCheckedFunctions) {
    if (name.rfind("nrta_", 0) == 0) {
      ++nrta;
    } else if (name.rfind("nec_", 0) == 0) {
      ++nec;
    } else {
      ++nrt;
    }
  }
  EXPECT_EQ(kCheckedFunctions.size(), static_cast<size_t>(kFunctionCount));
  EXPECT_EQ(kLaterFunctions.size(), 12U);
  EXPECT_EQ(nrt, 122U + 7U);
  EXPECT_EQ(nrta, 8U + 5U);
  EXPECT_EQ(nec, 16U);
}

}  // namespace
