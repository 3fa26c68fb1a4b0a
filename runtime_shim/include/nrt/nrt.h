/*
 * neuronsim libnrt-compatible runtime: core API (nrt/nrt.h).
 *
 * Lifecycle, models, tensors, tensor sets, execution and host-driven
 * collectives. Names, prototypes, enum values and struct layouts follow the
 * Neuron runtime C API (runtime library 2.28-2.31); see docs/runtime-compat.md.
 *
 * Core indices ("vnc") are relative to the cores visible to this process
 * (NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES); 0 is the first visible one.
 */
#ifndef NEURONSIM_NRT_NRT_H
#define NEURONSIM_NRT_NRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt_status.h"
#include "ndl/neuron_driver_shared_tensor_batch_op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* API version of the runtime interface (unchanged since 2022). */
#define NRT_MAJOR_VERSION 2
#define NRT_MINOR_VERSION 0

/* Opaque handles. */
typedef struct nrt_model nrt_model_t;
typedef struct nrt_tensor nrt_tensor_t;
typedef struct nrt_cc_context nrt_cc_context_t;

/* Where nrt_tensor_allocate places a tensor's storage. */
typedef enum {
    NRT_TENSOR_PLACEMENT_DEVICE = 0,  /* device memory (HBM) */
    NRT_TENSOR_PLACEMENT_HOST = 1,    /* DMA-able pinned host memory (deprecated) */
    NRT_TENSOR_PLACEMENT_VIRTUAL = 2  /* ordinary host memory; absent from 2.34 headers */
} nrt_tensor_placement_t;

/* Caller's framework, for logging and telemetry only. */
typedef enum {
    NRT_FRAMEWORK_TYPE_INVALID = 0,
    NRT_FRAMEWORK_TYPE_NO_FW = 1,     /* direct API use */
    NRT_FRAMEWORK_TYPE_TENSORFLOW = 2,
    NRT_FRAMEWORK_TYPE_PYTORCH = 3,
    NRT_FRAMEWORK_TYPE_MXNET = 4,
    NRT_FRAMEWORK_TYPE_PRECHECK = 5   /* node precheck tool (2.28+) */
} nrt_framework_type_t;

/* Instance family, reported in nrt_instance_info_t.family. */
enum {
    NRT_INSTANCE_UNKNOWN = 0,
    NRT_INSTANCE_INF1 = 1,
    NRT_INSTANCE_TRN1 = 2,
    NRT_INSTANCE_TRN1N = 3,
    NRT_INSTANCE_INF2 = 4,
    NRT_INSTANCE_TRN2 = 5,
    NRT_INSTANCE_TRN2N = 6,
    NRT_INSTANCE_INF2E = 7,
    NRT_INSTANCE_TRN2P = 8,
    NRT_INSTANCE_TRN2U = 9,
    NRT_INSTANCE_TRN2E = 10,
    NRT_INSTANCE_TRN2EU = 11,
    NRT_INSTANCE_TRN2AC = 12,
    NRT_INSTANCE_TRN2UAC = 13,
    NRT_INSTANCE_TRN3 = 14,
    NRT_INSTANCE_TRN3PDS98 = 15
#ifndef NEURONSIM_NRT_STRICT_2_31
    ,
    NRT_INSTANCE_TRN2EN = 16,         /* 2.34 */
    NRT_INSTANCE_TRN3E = 17           /* 2.34 */
#endif
};

/* Instance size, reported in nrt_instance_info_t.size. */
enum {
    NRT_INSTANCE_SIZE_1XL = 0,
    NRT_INSTANCE_SIZE_2XL = 1,
    NRT_INSTANCE_SIZE_4XL = 2,
    NRT_INSTANCE_SIZE_6XL = 3,
    NRT_INSTANCE_SIZE_8XL = 4,
    NRT_INSTANCE_SIZE_24XL = 5,
    NRT_INSTANCE_SIZE_32XL = 6,
    NRT_INSTANCE_SIZE_48XL = 7,
    NRT_INSTANCE_SIZE_3XL = 8,
    NRT_INSTANCE_SIZE_UNKNOWN = 9,
    NRT_INSTANCE_SIZE_NUM = NRT_INSTANCE_SIZE_UNKNOWN
};

/* Reduction operator of a collective. */
typedef enum nrt_op_type {
    NRT_OP_ADD = 0x0,
    NRT_OP_FMA = 0x1,
    NRT_OP_MAX = 0x2,
    NRT_OP_MIN = 0x3,
    NRT_OP_INVALID = 0xF
} nrt_op_type_t;

/* Element type, as hardware type codes (the numbering used by runtime 2.30+
 * headers and by the 2.31 binary). Releases up to SDK 2.27 documented a
 * different, sequential numbering in nrt_experimental.h; see
 * docs/runtime-compat.md for both. */
typedef enum nrt_dtype {
    NRT_DTYPE_UNKNOWN = 0x0,
    NRT_DTYPE_INVALID = 0x0,
    NRT_DTYPE_UINT64 = 0x1,
    NRT_DTYPE_INT8 = 0x2,
    NRT_DTYPE_UINT8 = 0x3,
    NRT_DTYPE_INT16 = 0x4,
    NRT_DTYPE_UINT16 = 0x5,
    NRT_DTYPE_BFLOAT16 = 0x6,
    NRT_DTYPE_FLOAT16 = 0x7,
    NRT_DTYPE_INT32 = 0x8,
    NRT_DTYPE_UINT32 = 0x9,
    NRT_DTYPE_FLOAT32 = 0xA,
    NRT_DTYPE_FP32R = 0xB,
    NRT_DTYPE_INT64 = 0xC,
    NRT_DTYPE_FP8_E3 = 0xD,
    NRT_DTYPE_FP8_E4 = 0xE,
    NRT_DTYPE_FP8_E5 = 0xF
} nrt_dtype_t;

/* Collective operation kind. */
typedef enum nrt_cc_op_type {
    NRT_CC_ALLGATHER = 0,
    NRT_CC_ALLREDUCE = 1,
    NRT_CC_REDUCESCATTER = 2
} nrt_cc_op_type_t;

/* Instance description. Older runtimes had only family and size; the length
 * argument of nrt_get_instance_info tells the runtime how much to copy. */
typedef struct nrt_instance_info {
    uint32_t family;            /* NRT_INSTANCE_* */
    uint32_t size;              /* NRT_INSTANCE_SIZE_* */
    char arch_name[16];         /* NUL-terminated device architecture name */
    char device_revision[8];    /* NUL-terminated silicon revision */
} nrt_instance_info_t;

NRT_STATUS nrt_get_instance_info(nrt_instance_info_t *info, size_t instance_info_len);

/* ---- Lifecycle ---------------------------------------------------------- */

/* Start the runtime and reserve the visible cores. Version strings may be
 * empty or NULL. A second call while initialized succeeds and does nothing. */
NRT_STATUS nrt_init(nrt_framework_type_t framework, const char *fw_version, const char *fal_version);

/* Unload everything, release the cores and return to the uninitialized state. */
void nrt_close(void);

/* ---- Models ------------------------------------------------------------- */

/* Load a NEFF image from memory. vnc = -1 picks the first free core;
 * vnc_count is deprecated (pass -1). The bytes are not used after return. */
NRT_STATUS nrt_load(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count, nrt_model_t **model);

/* As nrt_load, for NEFFs with collective operations. ctx_device_id is this
 * worker's rank and ctx_device_count the number of workers. */
NRT_STATUS nrt_load_collectives(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                                uint32_t ctx_device_id, uint32_t ctx_device_count, nrt_model_t **model);

NRT_STATUS nrt_unload(nrt_model_t *model);

/* Cores used by a loaded model. Both names are deprecated; they return the same. */
NRT_STATUS nrt_get_model_nc_count(const nrt_model_t *model, uint32_t *vnc_count);
NRT_STATUS nrt_get_model_vnc_count(const nrt_model_t *model, uint32_t *vnc_count);

/* ---- Core counts (usable before nrt_init) -------------------------------- */

/* All cores of the instance; the *_nc_* name is a deprecated alias. */
NRT_STATUS nrt_get_total_nc_count(uint32_t *vnc_count);
NRT_STATUS nrt_get_total_vnc_count(uint32_t *vnc_count);
/* Cores this process may use; the *_nc_* name is a deprecated alias. */
NRT_STATUS nrt_get_visible_nc_count(uint32_t *vnc_count);
NRT_STATUS nrt_get_visible_vnc_count(uint32_t *vnc_count);

/* ---- Tensor sets ---------------------------------------------------------- */

/* A name -> tensor map that binds tensors to a model's inputs or outputs.
 * It does not own the tensors. */
typedef void nrt_tensor_set_t;

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t **result);
/* Frees the set (not its tensors) and sets *tensor_set to NULL. */
void nrt_destroy_tensor_set(nrt_tensor_set_t **tensor_set);
/* Inserts or replaces the tensor stored under tensor_name. */
NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t *tensor_set, const char *tensor_name, nrt_tensor_t *tensor);
NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t *tensor_set, const char *tensor_name, nrt_tensor_t **tensor);

/* ---- Execution ------------------------------------------------------------ */

/* Run the model once; tensors are matched to the model's I/O by name. */
NRT_STATUS nrt_execute(nrt_model_t *model, const nrt_tensor_set_t *input_set, nrt_tensor_set_t *output_set);

/* Run repeat_count times, feeding each iteration's outputs to the next one. */
NRT_STATUS nrt_execute_repeat(nrt_model_t *model, const nrt_tensor_set_t *input_set, nrt_tensor_set_t *output_set,
                              int repeat_count);

/* Set up the global communicator used by nrt_barrier / nrt_all_gather. */
NRT_STATUS nrt_build_global_comm(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count);

/* ---- Tensors -------------------------------------------------------------- */

/* Allocate `size` bytes. vnc is the (visible-relative) core; pass -1 for host
 * placements. name is optional (NULL allowed) and only used in logs. */
NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t tensor_placement, int vnc, size_t size, const char *name,
                               nrt_tensor_t **tensor);

/* Free a tensor and set *tensor to NULL. */
void nrt_tensor_free(nrt_tensor_t **tensor);

/* Byte copies between a host buffer and the tensor at `offset`. */
NRT_STATUS nrt_tensor_read(const nrt_tensor_t *tensor, void *buf, size_t offset, size_t size);
NRT_STATUS nrt_tensor_write(nrt_tensor_t *tensor, const void *buf, size_t offset, size_t size);

/* All operations of one batched read/write that target one tensor. */
typedef struct nrt_tensor_batch {
    const nrt_tensor_t *tensor;
    const nrt_tensor_batch_op_t *ops; /* array of num_ops operations */
    uint32_t num_ops;
} nrt_tensor_batch_t;

#ifdef NEURONSIM_NRT_BATCH_OPS_2_34
/* 2.34 form. */
NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t *batches, uint64_t num_batches);
NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t *batches, uint64_t num_batches);
#else
/* 2.28-2.31 form. unsafe = true skips the wait for executions using the tensors. */
NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t *batches, uint64_t num_batches, bool unsafe);
NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t *batches, uint64_t num_batches, bool unsafe);
#endif

/* Copy between tensors. Two device tensors must live on the same core. */
NRT_STATUS nrt_tensor_copy(const nrt_tensor_t *src, size_t src_offset, nrt_tensor_t *dst, size_t dst_offset,
                           size_t size);

/* Size in bytes (no status: the tensor must be valid). */
size_t nrt_tensor_get_size(const nrt_tensor_t *tensor);

/* Fill `size` bytes at `offset` with the byte `value`. */
NRT_STATUS nrt_tensor_memset(nrt_tensor_t *tensor, uint64_t offset, int value, size_t size);

/* Create a tensor without storage; give it storage with nrt_tensor_attach_buffer. */
NRT_STATUS nrt_tensor_allocate_empty(const char *name, nrt_tensor_t **tensor);

/* Use a caller-owned buffer as the tensor's storage; storage the tensor owned
 * before is released. The buffer must outlive the tensor and is never freed
 * by the runtime. */
NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t *tensor, void *buffer, size_t size);

/* New tensor viewing [offset, offset + size) of another one's storage (no copy). */
NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t *tensor_source, size_t offset, size_t size, const char *name,
                                     nrt_tensor_t **tensor_slice);

/* Host-visible address of the tensor's storage, or NULL. */
void *nrt_tensor_get_va(const nrt_tensor_t *tensor);

/* Where a tensor lives on the device. */
typedef struct nrt_tensor_device_allocation_info {
    uint64_t physical_address;  /* device physical address */
    size_t size;                /* allocation size; may exceed the tensor size */
    int hbm_index;              /* HBM holding the allocation */
} nrt_tensor_device_allocation_info_t;

NRT_STATUS nrt_tensor_get_device_allocation_info(const nrt_tensor_t *tensor,
                                                 nrt_tensor_device_allocation_info_t *alloc_info);

/* Wait until the tensor's completion counter reaches expected_completion_count.
 * timeout is in microseconds; negative waits forever. Returns NRT_SUCCESS,
 * NRT_INVALID (NULL tensor) or NRT_TIMEOUT. */
NRT_STATUS nrt_tensor_check_output_completion(const nrt_tensor_t *output_tensor, int64_t timeout,
                                              uint64_t expected_completion_count);

/* Reset the tensor's completion counter to 0. */
NRT_STATUS nrt_tensor_reset_output_completion(nrt_tensor_t *output_tensor);

/* ---- Device memory and topology ------------------------------------------- */

/* Export a device address range as a dma-buf file descriptor. */
NRT_STATUS nrt_get_dmabuf_fd(uint64_t va, uint64_t size, int *fd);

/* Map a container-visible device id to the host device id. */
NRT_STATUS nrt_host_device_id_get(int neuron_dev, uint32_t *host_device_id);

/* Routing ids indexed by host device id. *count: in = table entries, out = entries written. */
NRT_STATUS nrt_host_device_id_rid_map_get(uint32_t *count, uint32_t *host_did_to_rid_map);

/* Host mapping of one HBM region. NRT_INVALID_HANDLE once hbm_idx is past the
 * last region, NRT_INVALID if unsupported, NRT_FAILURE otherwise. */
NRT_STATUS nrt_get_hbm_mmap_va(int device_id, int hbm_idx, void **addr, size_t *size);

/* Device memory use of one core. Fields are only ever appended. */
typedef struct nrt_vnc_memory_stats {
    size_t bytes_used;
    size_t bytes_limit;
} nrt_vnc_memory_stats_t;

/* stats_size_in: caller's sizeof; *stats_size_out: bytes the runtime wrote. */
NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t *stats, size_t stats_size_in,
                                    size_t *stats_size_out);

/* PCI BDF of the EFA device next to the Neuron device holding `va`.
 * *len: in = buffer size including the NUL, out = string length.
 * NRT_RESOURCE when the buffer is too small. */
NRT_STATUS nrt_get_attached_efa_bdf(const void *va, char *efa_bdf, size_t *len);

/* ---- Host-driven collectives (2.28+) -------------------------------------- */

/* Participants of a collective. */
typedef struct nrt_cc_comm {
    uint32_t *replica_group;    /* ranks taking part */
    uint32_t rank;              /* this worker's rank within replica_group */
    uint32_t rank_n;            /* number of entries in replica_group */
    uint32_t ctx_device_id;
    uint32_t ctx_device_count;
    uint32_t vnc;
} nrt_cc_comm_t;

/* A list of tensors (collective inputs or outputs). */
typedef struct nrt_tensor_list {
    nrt_tensor_t **tensors;
    size_t num_tensors;
} nrt_tensor_list_t;

/* Set up the global communicator for host-driven collectives. */
NRT_STATUS nrt_cc_global_comm_init(uint32_t vnc, uint32_t g_device_id, uint32_t g_device_count);

/* Create an additional collectives stream (2.31+). */
NRT_STATUS nrt_cc_create_stream(uint32_t stream_id);

#ifndef NEURONSIM_NRT_STRICT_2_31
/* ---- Later runtime additions (2.32-2.34) ---------------------------------- */

/* Parameters of a collective (2.34). */
typedef struct nrt_cc_param {
    uint32_t num_ops;
} nrt_cc_param_t;

/* As nrt_get_dmabuf_fd, also returning the offset of `va` inside the buffer (2.34). */
NRT_STATUS nrt_get_dmabuf_fd_v2(uint64_t va, uint64_t size, int *fd, uint64_t *offset);

/* Kind of pinned host memory (2.34). */
typedef enum {
    NRT_PINNED_MALLOC = 0,
    NRT_PINNED_HUGEPAGE_2M = 1,
    NRT_PINNED_HUGEPAGE_1G = 2
} nrt_pinned_alloc_type_t;

void *nrt_pinned_malloc(size_t size, nrt_pinned_alloc_type_t type); /* 2.34 */
void nrt_pinned_free(void *ptr);                                   /* 2.34 */

/* Logical core that owns the tensor (2.34). */
NRT_STATUS nrt_tensor_get_lnc_index(const nrt_tensor_t *tensor, int *lnc_idx);
#endif /* !NEURONSIM_NRT_STRICT_2_31 */

/* ---- Layout checks (x86-64 LP64) ------------------------------------------ */
#if NEURONSIM_NRT_CHECK_LAYOUT
NEURONSIM_NRT_STATIC_ASSERT(nrt_enum_size_placement, sizeof(nrt_tensor_placement_t) == 4, "enum is 4 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_enum_size_framework, sizeof(nrt_framework_type_t) == 4, "enum is 4 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_enum_size_dtype, sizeof(nrt_dtype_t) == 4, "enum is 4 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_enum_size_op, sizeof(nrt_op_type_t) == 4, "enum is 4 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_enum_size_cc_op, sizeof(nrt_cc_op_type_t) == 4, "enum is 4 bytes");

NEURONSIM_NRT_STATIC_ASSERT(nrt_instance_info_size, sizeof(nrt_instance_info_t) == 32, "nrt_instance_info_t is 32 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_instance_info_family, offsetof(nrt_instance_info_t, family) == 0, "family @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_instance_info_sz, offsetof(nrt_instance_info_t, size) == 4, "size @4");
NEURONSIM_NRT_STATIC_ASSERT(nrt_instance_info_arch, offsetof(nrt_instance_info_t, arch_name) == 8, "arch_name @8");
NEURONSIM_NRT_STATIC_ASSERT(nrt_instance_info_rev, offsetof(nrt_instance_info_t, device_revision) == 24, "device_revision @24");

NEURONSIM_NRT_STATIC_ASSERT(nrt_batch_size, sizeof(nrt_tensor_batch_t) == 24, "nrt_tensor_batch_t is 24 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_batch_tensor, offsetof(nrt_tensor_batch_t, tensor) == 0, "tensor @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_batch_ops, offsetof(nrt_tensor_batch_t, ops) == 8, "ops @8");
NEURONSIM_NRT_STATIC_ASSERT(nrt_batch_num_ops, offsetof(nrt_tensor_batch_t, num_ops) == 16, "num_ops @16");

NEURONSIM_NRT_STATIC_ASSERT(nrt_alloc_info_size, sizeof(nrt_tensor_device_allocation_info_t) == 24, "allocation info is 24 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_alloc_info_pa, offsetof(nrt_tensor_device_allocation_info_t, physical_address) == 0, "physical_address @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_alloc_info_sz, offsetof(nrt_tensor_device_allocation_info_t, size) == 8, "size @8");
NEURONSIM_NRT_STATIC_ASSERT(nrt_alloc_info_hbm, offsetof(nrt_tensor_device_allocation_info_t, hbm_index) == 16, "hbm_index @16");

NEURONSIM_NRT_STATIC_ASSERT(nrt_mem_stats_size, sizeof(nrt_vnc_memory_stats_t) == 16, "nrt_vnc_memory_stats_t is 16 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_mem_stats_used, offsetof(nrt_vnc_memory_stats_t, bytes_used) == 0, "bytes_used @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_mem_stats_limit, offsetof(nrt_vnc_memory_stats_t, bytes_limit) == 8, "bytes_limit @8");

NEURONSIM_NRT_STATIC_ASSERT(nrt_cc_comm_size, sizeof(nrt_cc_comm_t) == 32, "nrt_cc_comm_t is 32 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_cc_comm_group, offsetof(nrt_cc_comm_t, replica_group) == 0, "replica_group @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_cc_comm_rank, offsetof(nrt_cc_comm_t, rank) == 8, "rank @8");
NEURONSIM_NRT_STATIC_ASSERT(nrt_cc_comm_rank_n, offsetof(nrt_cc_comm_t, rank_n) == 12, "rank_n @12");
NEURONSIM_NRT_STATIC_ASSERT(nrt_cc_comm_ctx_id, offsetof(nrt_cc_comm_t, ctx_device_id) == 16, "ctx_device_id @16");
NEURONSIM_NRT_STATIC_ASSERT(nrt_cc_comm_ctx_count, offsetof(nrt_cc_comm_t, ctx_device_count) == 20, "ctx_device_count @20");
NEURONSIM_NRT_STATIC_ASSERT(nrt_cc_comm_vnc, offsetof(nrt_cc_comm_t, vnc) == 24, "vnc @24");

NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_list_size, sizeof(nrt_tensor_list_t) == 16, "nrt_tensor_list_t is 16 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_list_tensors, offsetof(nrt_tensor_list_t, tensors) == 0, "tensors @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_tensor_list_num, offsetof(nrt_tensor_list_t, num_tensors) == 8, "num_tensors @8");

#ifndef NEURONSIM_NRT_STRICT_2_31
NEURONSIM_NRT_STATIC_ASSERT(nrt_cc_param_size, sizeof(nrt_cc_param_t) == 4, "nrt_cc_param_t is 4 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_enum_size_pinned, sizeof(nrt_pinned_alloc_type_t) == 4, "enum is 4 bytes");
#endif
#endif /* NEURONSIM_NRT_CHECK_LAYOUT */

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NRT_H */
