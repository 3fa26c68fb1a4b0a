/*
 * Proves that the public libnrt-compatible headers (runtime_shim/include/{nrt,ndl})
 * compile as C and have the LP64 layouts the Neuron runtime ABI requires.
 *
 * Written for C11 (_Static_assert, _Generic). It also builds as C99: the
 * assertions then fall back to the headers' typedef-based static assertion and
 * the _Generic prototype checks are skipped. Build it with and without
 * -DNEURONSIM_NRT_STRICT_2_31 and -DNEURONSIM_NRT_BATCH_OPS_2_34.
 *
 * Nothing here calls into a library: the object file only needs to compile.
 */
#include "ndl/neuron_driver_shared_tensor_batch_op.h"
#include "nrt/ndebug_stream.h"
#include "nrt/nec.h"
#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt.h"
#include "nrt/nrt_async.h"
#include "nrt/nrt_async_sendrecv.h"
#include "nrt/nrt_experimental.h"
#include "nrt/nrt_profile.h"
#include "nrt/nrt_status.h"
#include "nrt/nrt_sys_trace.h"
#include "nrt/nrt_version.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define HEADERS_C11 1
#define CHECK(tag, cond) _Static_assert(cond, #cond)
#else
#define HEADERS_C11 0
#define CHECK(tag, cond) NEURONSIM_NRT_STATIC_ASSERT(headers_c_##tag, cond, #cond)
#endif

/* ---- Enum values (independent of the data model) ------------------------- */

CHECK(st0, NRT_SUCCESS == 0);
CHECK(st1, NRT_FAILURE == 1);
CHECK(st2, NRT_INVALID == 2);
CHECK(st3, NRT_INVALID_HANDLE == 3);
CHECK(st4, NRT_RESOURCE == 4);
CHECK(st5, NRT_TIMEOUT == 5);
CHECK(st6, NRT_HW_ERROR == 6);
CHECK(st7, NRT_QUEUE_FULL == 7);
CHECK(st9, NRT_LOAD_NOT_ENOUGH_NC == 9);
CHECK(st10, NRT_UNSUPPORTED_NEFF_VERSION == 10);
CHECK(st11, NRT_FAIL_HOST_MEM_ALLOC == 11);
CHECK(st13, NRT_UNINITIALIZED == 13);
CHECK(st14, NRT_CLOSED == 14);
CHECK(st15, NRT_QUEUE_EMPTY == 15);
CHECK(st101, NRT_EXEC_UNIT_UNRECOVERABLE == 101);
CHECK(st1002, NRT_EXEC_BAD_INPUT == 1002);
CHECK(st1003, NRT_EXEC_COMPLETED_WITH_NUM_ERR == 1003);
CHECK(st1004, NRT_EXEC_COMPLETED_WITH_ERR == 1004);
CHECK(st1005, NRT_EXEC_NC_BUSY == 1005);
CHECK(st1006, NRT_EXEC_OOB == 1006);
CHECK(st1100, NRT_COLL_PENDING == 1100);
CHECK(st1200, NRT_EXEC_HW_ERR_COLLECTIVES == 1200);
CHECK(st1201, NRT_EXEC_HW_ERR_HBM_UE == 1201);
CHECK(st1202, NRT_EXEC_HW_ERR_NC_UE == 1202);
CHECK(st1203, NRT_EXEC_HW_ERR_DMA_ABORT == 1203);
CHECK(st1204, NRT_EXEC_SW_NQ_OVERFLOW == 1204);
CHECK(st1205, NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE == 1205);
CHECK(st1206, NRT_NETWORK_PROXY_FAILURE == 1206);

CHECK(dt0, NRT_DTYPE_UNKNOWN == 0x0 && NRT_DTYPE_INVALID == 0x0);
CHECK(dt1, NRT_DTYPE_UINT64 == 0x1 && NRT_DTYPE_INT8 == 0x2 && NRT_DTYPE_UINT8 == 0x3);
CHECK(dt2, NRT_DTYPE_INT16 == 0x4 && NRT_DTYPE_UINT16 == 0x5 && NRT_DTYPE_BFLOAT16 == 0x6);
CHECK(dt3, NRT_DTYPE_FLOAT16 == 0x7 && NRT_DTYPE_INT32 == 0x8 && NRT_DTYPE_UINT32 == 0x9);
CHECK(dt4, NRT_DTYPE_FLOAT32 == 0xA && NRT_DTYPE_FP32R == 0xB && NRT_DTYPE_INT64 == 0xC);
CHECK(dt5, NRT_DTYPE_FP8_E3 == 0xD && NRT_DTYPE_FP8_E4 == 0xE && NRT_DTYPE_FP8_E5 == 0xF);

CHECK(pl, NRT_TENSOR_PLACEMENT_DEVICE == 0 && NRT_TENSOR_PLACEMENT_HOST == 1 &&
              NRT_TENSOR_PLACEMENT_VIRTUAL == 2);
CHECK(fw0, NRT_FRAMEWORK_TYPE_INVALID == 0 && NRT_FRAMEWORK_TYPE_NO_FW == 1 &&
               NRT_FRAMEWORK_TYPE_TENSORFLOW == 2);
CHECK(fw1, NRT_FRAMEWORK_TYPE_PYTORCH == 3 && NRT_FRAMEWORK_TYPE_MXNET == 4 &&
               NRT_FRAMEWORK_TYPE_PRECHECK == 5);
CHECK(if0, NRT_INSTANCE_UNKNOWN == 0 && NRT_INSTANCE_INF1 == 1 && NRT_INSTANCE_TRN1 == 2 &&
               NRT_INSTANCE_TRN1N == 3);
CHECK(if1, NRT_INSTANCE_INF2 == 4 && NRT_INSTANCE_TRN2 == 5 && NRT_INSTANCE_TRN2N == 6 &&
               NRT_INSTANCE_INF2E == 7);
CHECK(if2, NRT_INSTANCE_TRN2P == 8 && NRT_INSTANCE_TRN2U == 9 && NRT_INSTANCE_TRN2E == 10 &&
               NRT_INSTANCE_TRN2EU == 11);
CHECK(if3, NRT_INSTANCE_TRN2AC == 12 && NRT_INSTANCE_TRN2UAC == 13 && NRT_INSTANCE_TRN3 == 14);
CHECK(if4, NRT_INSTANCE_TRN3PDS98 == 15);
CHECK(is0, NRT_INSTANCE_SIZE_1XL == 0 && NRT_INSTANCE_SIZE_2XL == 1 && NRT_INSTANCE_SIZE_4XL == 2);
CHECK(is1, NRT_INSTANCE_SIZE_6XL == 3 && NRT_INSTANCE_SIZE_8XL == 4 && NRT_INSTANCE_SIZE_24XL == 5);
CHECK(is2,
      NRT_INSTANCE_SIZE_32XL == 6 && NRT_INSTANCE_SIZE_48XL == 7 && NRT_INSTANCE_SIZE_3XL == 8);
CHECK(is3, NRT_INSTANCE_SIZE_UNKNOWN == 9 && NRT_INSTANCE_SIZE_NUM == 9);
CHECK(us, NRT_TENSOR_USAGE_INPUT == 0 && NRT_TENSOR_USAGE_OUTPUT == 1);
CHECK(op, NRT_OP_ADD == 0 && NRT_OP_FMA == 1 && NRT_OP_MAX == 2 && NRT_OP_MIN == 3 &&
              NRT_OP_INVALID == 0xF);
CHECK(cc, NRT_CC_ALLGATHER == 0 && NRT_CC_ALLREDUCE == 1 && NRT_CC_REDUCESCATTER == 2);
CHECK(xu, NRTA_XU_TENSOR_OP == 0 && NRTA_XU_COMPUTE == 1 && NRTA_XU_COLLECTIVES == 2 &&
              NRTA_XU_TYPE_NUM == 3);
CHECK(pm, NRT_INSPECT_DEVICE_PROFILE_MODE_DISABLED == 0 &&
              NRT_INSPECT_DEVICE_PROFILE_MODE_MODEL == 1 &&
              NRT_INSPECT_DEVICE_PROFILE_MODE_SESSION == 2);
CHECK(ds, NDEBUG_STREAM_EVENT_TYPE_INVALID == 0 && NDEBUG_STREAM_EVENT_TYPE_DEBUG_TENSOR_READ == 1);
CHECK(pod, NEC_POD_TYPE_NONE == 0 && NEC_POD_TYPE_P2P == 1 && NEC_POD_TYPE_SWITCH == 2 &&
               NEC_POD_TYPE_INVALID == 3);
#ifndef NEURONSIM_NRT_STRICT_2_31
CHECK(if5, NRT_INSTANCE_TRN2EN == 16 && NRT_INSTANCE_TRN3E == 17);
CHECK(pin, NRT_PINNED_MALLOC == 0 && NRT_PINNED_HUGEPAGE_2M == 1 && NRT_PINNED_HUGEPAGE_1G == 2);
#endif

/* ---- Macros -------------------------------------------------------------- */

CHECK(m0, NRT_MAJOR_VERSION == 2 && NRT_MINOR_VERSION == 0);
CHECK(m1, NRT_TENSOR_NAME_MAX == 256 && RT_VERSION_DETAIL_LEN == 128 && GIT_HASH_LEN == 64);
CHECK(m2, NRTA_SEQ_NUM_MAX == 0xFFFFFFFFFFFFull && NRTA_SEQ_NUM_MASK == NRTA_SEQ_NUM_MAX);
CHECK(m3, NRTA_SEQ_GET_XU_ID(0x0002000000000005ull) == 2 &&
              NRTA_SEQ_GET_SEQ_NUM(0x0002000000000005ull) == 5);
CHECK(m4, NEURONSIM_NRT_SHIM == 1 && NEURONSIM_NRT_COMPAT_MAJOR == 2 &&
              NEURONSIM_NRT_COMPAT_MINOR == 31);

/* ---- Layouts (x86-64 LP64) ----------------------------------------------- */

#if NEURONSIM_NRT_CHECK_LAYOUT
CHECK(e0,
      sizeof(NRT_STATUS) == 4 && sizeof(nrt_dtype_t) == 4 && sizeof(nrt_tensor_placement_t) == 4);
CHECK(e1, sizeof(nrt_framework_type_t) == 4 && sizeof(nrt_tensor_usage_t) == 4 &&
              sizeof(nrta_xu_t) == 4);

CHECK(ti0, sizeof(nrt_tensor_info_t) == 296);
CHECK(ti1, offsetof(nrt_tensor_info_t, name) == 0);
CHECK(ti2, offsetof(nrt_tensor_info_t, usage) == 256);
CHECK(ti3, offsetof(nrt_tensor_info_t, size) == 264);
CHECK(ti4, offsetof(nrt_tensor_info_t, dtype) == 272);
CHECK(ti5, offsetof(nrt_tensor_info_t, shape) == 280);
CHECK(ti6, offsetof(nrt_tensor_info_t, ndim) == 288);
CHECK(ta0, sizeof(nrt_tensor_info_array_t) == 8);
CHECK(ta1, offsetof(nrt_tensor_info_array_t, tensor_count) == 0);
CHECK(ta2, offsetof(nrt_tensor_info_array_t, tensor_array) == 8);

CHECK(ve0, sizeof(nrt_version_t) == 224);
CHECK(ve1, offsetof(nrt_version_t, rt_major) == 0 && offsetof(nrt_version_t, rt_minor) == 8);
CHECK(ve2,
      offsetof(nrt_version_t, rt_patch) == 16 && offsetof(nrt_version_t, rt_maintenance) == 24);
CHECK(ve3, offsetof(nrt_version_t, rt_detail) == 32 && offsetof(nrt_version_t, git_hash) == 160);

CHECK(ii0, sizeof(nrt_instance_info_t) == 32);
CHECK(ii1, offsetof(nrt_instance_info_t, family) == 0 && offsetof(nrt_instance_info_t, size) == 4);
CHECK(ii2, offsetof(nrt_instance_info_t, arch_name) == 8 &&
               offsetof(nrt_instance_info_t, device_revision) == 24);

CHECK(mi0, sizeof(nrt_model_info_t) == 4 && offsetof(nrt_model_info_t, vnc) == 0);
CHECK(ms0, sizeof(nrt_vnc_memory_stats_t) == 16);
CHECK(ms1, offsetof(nrt_vnc_memory_stats_t, bytes_used) == 0 &&
               offsetof(nrt_vnc_memory_stats_t, bytes_limit) == 8);

CHECK(da0, sizeof(nrt_tensor_device_allocation_info_t) == 24);
CHECK(da1, offsetof(nrt_tensor_device_allocation_info_t, physical_address) == 0);
CHECK(da2, offsetof(nrt_tensor_device_allocation_info_t, size) == 8);
CHECK(da3, offsetof(nrt_tensor_device_allocation_info_t, hbm_index) == 16);

CHECK(bo0, sizeof(nrt_tensor_batch_op_t) == 24);
CHECK(bo1,
      offsetof(nrt_tensor_batch_op_t, offset) == 0 && offsetof(nrt_tensor_batch_op_t, size) == 8);
CHECK(bo2, offsetof(nrt_tensor_batch_op_t, buffer) == 16);
CHECK(bt0, sizeof(nrt_tensor_batch_t) == 24);
CHECK(bt1, offsetof(nrt_tensor_batch_t, tensor) == 0 && offsetof(nrt_tensor_batch_t, ops) == 8);
CHECK(bt2, offsetof(nrt_tensor_batch_t, num_ops) == 16);

CHECK(uc0, sizeof(nrt_ucode_img) == 16 && offsetof(nrt_ucode_img, bin) == 0 &&
               offsetof(nrt_ucode_img, size) == 8);
CHECK(uc1, sizeof(nrt_ucode_info) == 32 && offsetof(nrt_ucode_info, iram) == 0 &&
               offsetof(nrt_ucode_info, dram) == 16);

CHECK(cm0, sizeof(nrt_cc_comm_t) == 32);
CHECK(cm1, offsetof(nrt_cc_comm_t, replica_group) == 0 && offsetof(nrt_cc_comm_t, rank) == 8);
CHECK(cm2, offsetof(nrt_cc_comm_t, rank_n) == 12 && offsetof(nrt_cc_comm_t, ctx_device_id) == 16);
CHECK(cm3, offsetof(nrt_cc_comm_t, ctx_device_count) == 20 && offsetof(nrt_cc_comm_t, vnc) == 24);
CHECK(tl0, sizeof(nrt_tensor_list_t) == 16);
CHECK(tl1,
      offsetof(nrt_tensor_list_t, tensors) == 0 && offsetof(nrt_tensor_list_t, num_tensors) == 8);

CHECK(dh0, sizeof(ndebug_stream_event_header_t) == 64);
CHECK(dh1, offsetof(ndebug_stream_event_header_t, data_size) == 0 &&
               offsetof(ndebug_stream_event_header_t, type) == 8);
CHECK(dh2, offsetof(ndebug_stream_event_header_t, reserved) == 12);
CHECK(dp0, sizeof(ndebug_stream_payload_debug_tensor_read_t) == 1024);
CHECK(dp1, offsetof(ndebug_stream_payload_debug_tensor_read_t, prefix) == 0);
CHECK(dp2, offsetof(ndebug_stream_payload_debug_tensor_read_t, logical_nc_id) == 512);
CHECK(dp3, offsetof(ndebug_stream_payload_debug_tensor_read_t, pipe) == 516);
CHECK(dp4, offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_dtype) == 520);
CHECK(dp5, offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_shape) == 536);
CHECK(dp6, offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_data_size) == 600);
CHECK(dp7, offsetof(ndebug_stream_payload_debug_tensor_read_t, reserved0) == 608);
CHECK(dp8, offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_data) == 1024);

CHECK(sq0, sizeof(nrta_seq_t) == 8 && sizeof(nrta_xu_id_t) == 2);

#ifndef NEURONSIM_NRT_STRICT_2_31
CHECK(cp0, sizeof(nrt_cc_param_t) == 4 && offsetof(nrt_cc_param_t, num_ops) == 0);
CHECK(mc0, sizeof(neuron_ioctl_mem_chunk_info) == 24 &&
               sizeof(struct neuron_ioctl_mem_chunk_info) == 24);
CHECK(mc1, offsetof(neuron_ioctl_mem_chunk_info, pa) == 0 &&
               offsetof(neuron_ioctl_mem_chunk_info, size) == 8);
CHECK(mc2, offsetof(neuron_ioctl_mem_chunk_info, mem_type) == 16);
#endif
#endif /* NEURONSIM_NRT_CHECK_LAYOUT */

/* ---- Prototypes as C sees them (C11 only) --------------------------------
 * _Generic picks by type compatibility, and its operand is not evaluated, so
 * nothing needs to link. The C++ test checks every prototype exactly; these
 * cover the spots where C differs: (void) parameter lists, `void` tensor sets,
 * bool, const-qualified handles, the callback type and the nec_* returns. */
#if HEADERS_C11
#define IS_PROTO(fn, type) _Generic(&(fn), type : 1, default : 0)

CHECK(p_init, IS_PROTO(nrt_init, NRT_STATUS (*)(nrt_framework_type_t, const char*, const char*)));
CHECK(p_close, IS_PROTO(nrt_close, void (*)(void)));
CHECK(p_load,
      IS_PROTO(nrt_load, NRT_STATUS (*)(const void*, size_t, int32_t, int32_t, nrt_model_t**)));
CHECK(p_set_alloc, IS_PROTO(nrt_allocate_tensor_set, NRT_STATUS (*)(nrt_tensor_set_t**)));
CHECK(p_set_destroy, IS_PROTO(nrt_destroy_tensor_set, void (*)(void**)));
CHECK(p_execute, IS_PROTO(nrt_execute, NRT_STATUS (*)(nrt_model_t*, const void*, void*)));
CHECK(p_read,
      IS_PROTO(nrt_tensor_read, NRT_STATUS (*)(const nrt_tensor_t*, void*, size_t, size_t)));
CHECK(p_get_va, IS_PROTO(nrt_tensor_get_va, void* (*)(const nrt_tensor_t*)));
CHECK(p_get_size, IS_PROTO(nrt_tensor_get_size, size_t (*)(const nrt_tensor_t*)));
#ifdef NEURONSIM_NRT_BATCH_OPS_2_34
CHECK(p_read_batch,
      IS_PROTO(nrt_tensor_read_batch, NRT_STATUS (*)(const nrt_tensor_batch_t*, uint64_t)));
CHECK(p_write_batch,
      IS_PROTO(nrt_tensor_write_batch, NRT_STATUS (*)(const nrt_tensor_batch_t*, uint64_t)));
#else
CHECK(p_read_batch,
      IS_PROTO(nrt_tensor_read_batch, NRT_STATUS (*)(const nrt_tensor_batch_t*, uint64_t, bool)));
CHECK(p_write_batch,
      IS_PROTO(nrt_tensor_write_batch, NRT_STATUS (*)(const nrt_tensor_batch_t*, uint64_t, bool)));
#endif
CHECK(p_status_str, IS_PROTO(nrt_get_status_as_str, const char* (*)(NRT_STATUS)));
CHECK(p_version, IS_PROTO(nrt_get_version, NRT_STATUS (*)(nrt_version_t*, size_t)));
CHECK(p_tensor_info,
      IS_PROTO(nrt_get_model_tensor_info, NRT_STATUS (*)(nrt_model_t*, nrt_tensor_info_array_t**)));
CHECK(p_callback,
      IS_PROTO(nrt_register_async_exec_callback,
               NRT_STATUS (*)(void (*)(void*, uint32_t, uint32_t, uint64_t, NRT_STATUS), void*)));
CHECK(p_trace_start, IS_PROTO(nrt_trace_start, NRT_STATUS (*)(bool)));
CHECK(p_ucode, IS_PROTO(nrt_set_pool_eng_ucode, NRT_STATUS (*)(const nrt_ucode_info*)));
CHECK(p_cont_stop, IS_PROTO(nrt_profile_continuous_stop, NRT_STATUS (*)(void)));
CHECK(p_inspect_begin, IS_PROTO(nrt_inspect_begin, NRT_STATUS (*)(void)));
CHECK(p_sys_trace_stop, IS_PROTO(nrt_sys_trace_stop, NRT_STATUS (*)(void)));
CHECK(p_fetch, IS_PROTO(nrt_sys_trace_fetch_events,
                        NRT_STATUS (*)(char**, size_t*, const nrt_sys_trace_fetch_options_t*)));
CHECK(p_nrta_write,
      IS_PROTO(nrta_tensor_write, NRT_STATUS (*)(nrt_tensor_t*, const void*, uint64_t, uint64_t,
                                                 int, int, NRT_STATUS*, nrta_seq_t*)));
CHECK(p_nrta_done, IS_PROTO(nrta_is_completed, NRT_STATUS (*)(nrta_seq_t, bool*)));
CHECK(p_sendrecv_test, IS_PROTO(nrt_async_sendrecv_test_request,
                                NRT_STATUS (*)(nrt_async_sendrecv_request_t*, bool*, size_t*)));
CHECK(p_debug_close, IS_PROTO(nrt_debug_client_connect_close, void (*)(int)));
CHECK(p_nec_sem, IS_PROTO(nec_inc_semaphore, void (*)(volatile uint32_t*, uint32_t)));
CHECK(p_nec_mla, IS_PROTO(nec_is_mla_available, bool (*)(int, int)));
CHECK(p_nec_dyn,
      IS_PROTO(nec_get_dynamic_send_size_bytes, size_t (*)(enc_host_mem_t*, size_t, int, int)));
#ifndef NEURONSIM_NRT_STRICT_2_31
CHECK(p_pinned, IS_PROTO(nrt_pinned_malloc, void* (*)(size_t, nrt_pinned_alloc_type_t)));
CHECK(p_xu_event,
      IS_PROTO(nrta_event_register_xu_completion, NRT_STATUS (*)(int, nrta_xu_t, int, int)));
CHECK(p_dump, IS_PROTO(nrt_dump_device_allocation_info,
                       NRT_STATUS (*)(int, struct neuron_ioctl_mem_chunk_info*, uint32_t*)));
#endif
#endif /* HEADERS_C11 */

/* Touch the types the way a C client would, so the object file is not empty. */
int neuronsim_nrt_headers_c_probe(void);

int neuronsim_nrt_headers_c_probe(void) {
  nrt_tensor_batch_op_t op = {0, 16, NULL};
  nrt_tensor_batch_t batch = {NULL, &op, 1};
  nrt_version_t version = {0, 0, 0, 0, {0}, {0}};
  nrt_instance_info_t instance = {NRT_INSTANCE_TRN2, NRT_INSTANCE_SIZE_48XL, {0}, {0}};
  nrt_cc_comm_t comm = {NULL, 0, 1, 0, 1, 0};
  ndebug_stream_event_header_t header = {0, NDEBUG_STREAM_EVENT_TYPE_DEBUG_TENSOR_READ, {0}};
  nrta_seq_t seq = ((nrta_seq_t)NRTA_XU_COMPUTE << 48) | 3u;
  NRT_STATUS status = NRT_SUCCESS;
  nrt_dtype_t dtype = NRT_DTYPE_FLOAT32;
  nrt_tensor_set_t* set = NULL;
  return (int)(batch.ops->size + (uint64_t)batch.num_ops + version.rt_major + instance.family +
               comm.rank_n + header.type + NRTA_SEQ_GET_XU_ID(seq) + NRTA_SEQ_GET_SEQ_NUM(seq) +
               (uint64_t)status + (uint64_t)dtype + (set == NULL ? 0u : 1u));
}
