/*
 * neuronsim libnrt-compatible runtime: experimental API (nrt/nrt_experimental.h).
 *
 * Model I/O metadata, implicit-async execution hooks, host collectives helpers,
 * microcode override and miscellaneous utilities. AWS marks this header as
 * experimental: entries can change between releases.
 */
#ifndef NEURONSIM_NRT_NRT_EXPERIMENTAL_H
#define NEURONSIM_NRT_NRT_EXPERIMENTAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt_status.h"
#include "nrt/nrt.h"
#include "nrt/nrt_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a model tensor is read or written by the model. */
typedef enum nrt_tensor_usage {
    NRT_TENSOR_USAGE_INPUT = 0,
    NRT_TENSOR_USAGE_OUTPUT = 1
} nrt_tensor_usage_t;

/* Longest tensor name, including the terminating NUL. */
#define NRT_TENSOR_NAME_MAX 256

/* One model input or output. */
typedef struct nrt_tensor_info {
    char name[NRT_TENSOR_NAME_MAX]; /* NUL-terminated; the key for tensor sets */
    nrt_tensor_usage_t usage;
    size_t size;                    /* bytes */
    nrt_dtype_t dtype;
    uint32_t *shape;                /* ndim dimensions, owned by the runtime */
    uint32_t ndim;
} nrt_tensor_info_t;

/* All inputs (first) and outputs (after them) of a model. */
NEURONSIM_NRT_FAM_BEGIN
typedef struct nrt_tensor_info_array {
    uint64_t tensor_count;
    nrt_tensor_info_t tensor_array[]; /* tensor_count entries */
} nrt_tensor_info_array_t;
NEURONSIM_NRT_FAM_END

/* Called when an execution queued in implicit-async mode finishes. */
typedef void (*NRT_ASYNC_EXEC_STATUS_CALLBACK)(void *params, uint32_t model_id, uint32_t vnc, uint64_t job_id,
                                               NRT_STATUS status);

/* Describe the model's inputs and outputs. The runtime allocates the result;
 * release it only with nrt_free_model_tensor_info. */
NRT_STATUS nrt_get_model_tensor_info(nrt_model_t *model, nrt_tensor_info_array_t **tensor_info);

/* Number of copies of the model staged for concurrent nrt_execute calls (deprecated). */
NRT_STATUS nrt_get_model_instance_count(nrt_model_t *model, uint32_t *instance_count);

/* Release what nrt_get_model_tensor_info returned (NULL is accepted). */
NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t *tensor_info);

/* Start tracing on every visible core, optionally recording memory allocations. */
NRT_STATUS nrt_trace_start(bool trace_mem);

/* Stop tracing and write the collected data to `filename`. */
NRT_STATUS nrt_trace_stop(const char *filename);

/* Network plugin interface of the collectives library (internal use). */
void *nrt_get_libnccl_net(int *err, char *err_msg, size_t err_msg_size);

/* A microcode image. (These two types have no _t names.) */
typedef struct nrt_ucode_img {
    uint8_t *bin;
    size_t size;
} nrt_ucode_img;

/* Instruction-RAM and data-RAM images of the pooling engine microcode. */
typedef struct nrt_ucode_info {
    nrt_ucode_img iram;
    nrt_ucode_img dram;
} nrt_ucode_info;

/* Replace the pooling engine microcode. Must be called before nrt_init. */
NRT_STATUS nrt_set_pool_eng_ucode(const nrt_ucode_info *ucode_info);

/* Copy into host-mapped device memory (e.g. from nrt_tensor_get_va). */
NRT_STATUS nrt_memcpy_to_device(void *dest, const void *src, size_t size);

/* Install the completion callback for implicit-async executions, replacing
 * any previous one. params is handed back to the callback. */
NRT_STATUS nrt_register_async_exec_callback(NRT_ASYNC_EXEC_STATUS_CALLBACK callback, void *params);

/* Barrier across all workers (a small all-reduce). */
NRT_STATUS nrt_barrier(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count);

/* Gather rank_input_size bytes from every worker; output holds
 * g_device_count * rank_input_size bytes. */
NRT_STATUS nrt_all_gather(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count, uint32_t rank_input_size,
                          void *input, void *output);

/* Block until the implicit-async queue of core `vnc` is empty. */
NRT_STATUS nrt_async_drain_queued_execs(int32_t vnc);

/* Facts about a loaded model. Fields are only ever appended. */
typedef struct nrt_model_info {
    uint32_t vnc; /* first core of the model */
} nrt_model_info_t;

/* info_size_in: caller's sizeof; *info_size_out: bytes the runtime wrote. */
NRT_STATUS nrt_get_model_info(const nrt_model_t *model, nrt_model_info_t *info, size_t info_size_in,
                              size_t *info_size_out);

#ifndef NEURONSIM_NRT_STRICT_2_31
/* ---- Later runtime additions (2.33-2.34) ---------------------------------- */

/* Device id of a logical core (2.34). */
NRT_STATUS nrt_get_device_id(int lnc_idx, int *device_id);

/* One device memory allocation, as listed by nrt_dump_device_allocation_info
 * (2.34; the Neuron driver's ioctl record, with standard integer types). */
struct neuron_ioctl_mem_chunk_info {
    uint64_t pa;
    uint64_t size;
    uint32_t mem_type;
};
typedef struct neuron_ioctl_mem_chunk_info neuron_ioctl_mem_chunk_info;

/* List the device allocations of a logical core. *num_entries: in = capacity
 * of `data`, out = entries written (2.34). */
NRT_STATUS nrt_dump_device_allocation_info(int lnc_idx, neuron_ioctl_mem_chunk_info *data, uint32_t *num_entries);

/* Log a report of the device memory use of a logical core (2.33+). */
NRT_STATUS nrt_debug_log_oom_report(int lnc_idx);
#endif /* !NEURONSIM_NRT_STRICT_2_31 */

#if NEURONSIM_NRT_CHECK_LAYOUT
NEURONSIM_NRT_STATIC_ASSERT(nrt_enum_size_usage, sizeof(nrt_tensor_usage_t) == 4, "enum is 4 bytes");

NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_info_size, sizeof(nrt_tensor_info_t) == 296, "nrt_tensor_info_t is 296 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_info_name, offsetof(nrt_tensor_info_t, name) == 0, "name @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_info_usage, offsetof(nrt_tensor_info_t, usage) == 256, "usage @256");
NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_info_sz, offsetof(nrt_tensor_info_t, size) == 264, "size @264");
NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_info_dtype, offsetof(nrt_tensor_info_t, dtype) == 272, "dtype @272");
NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_info_shape, offsetof(nrt_tensor_info_t, shape) == 280, "shape @280");
NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_info_ndim, offsetof(nrt_tensor_info_t, ndim) == 288, "ndim @288");

NEURONSIM_NRT_STATIC_ASSERT(nrt_info_array_size, sizeof(nrt_tensor_info_array_t) == 8, "nrt_tensor_info_array_t header is 8 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_info_array_count, offsetof(nrt_tensor_info_array_t, tensor_count) == 0, "tensor_count @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_info_array_array, offsetof(nrt_tensor_info_array_t, tensor_array) == 8, "tensor_array @8");

NEURONSIM_NRT_STATIC_ASSERT(nrt_ucode_img_size, sizeof(nrt_ucode_img) == 16, "nrt_ucode_img is 16 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_ucode_img_bin, offsetof(nrt_ucode_img, bin) == 0, "bin @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_ucode_img_sz, offsetof(nrt_ucode_img, size) == 8, "size @8");
NEURONSIM_NRT_STATIC_ASSERT(nrt_ucode_info_size, sizeof(nrt_ucode_info) == 32, "nrt_ucode_info is 32 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_ucode_info_iram, offsetof(nrt_ucode_info, iram) == 0, "iram @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_ucode_info_dram, offsetof(nrt_ucode_info, dram) == 16, "dram @16");

NEURONSIM_NRT_STATIC_ASSERT(nrt_model_info_size, sizeof(nrt_model_info_t) == 4, "nrt_model_info_t is 4 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_model_info_vnc, offsetof(nrt_model_info_t, vnc) == 0, "vnc @0");

#ifndef NEURONSIM_NRT_STRICT_2_31
NEURONSIM_NRT_STATIC_ASSERT(nrt_mem_chunk_size, sizeof(neuron_ioctl_mem_chunk_info) == 24, "neuron_ioctl_mem_chunk_info is 24 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_mem_chunk_pa, offsetof(neuron_ioctl_mem_chunk_info, pa) == 0, "pa @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_mem_chunk_sz, offsetof(neuron_ioctl_mem_chunk_info, size) == 8, "size @8");
NEURONSIM_NRT_STATIC_ASSERT(nrt_mem_chunk_type, offsetof(neuron_ioctl_mem_chunk_info, mem_type) == 16, "mem_type @16");
#endif
#endif /* NEURONSIM_NRT_CHECK_LAYOUT */

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NRT_EXPERIMENTAL_H */
