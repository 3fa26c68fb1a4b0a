/*
 * neuronsim libnrt-compatible runtime: explicit asynchronous API (nrt/nrt_async.h).
 *
 * Experimental in the Neuron runtime, and changed incompatibly three times.
 * These declarations follow the generation exported by runtime 2.31 under the
 * symbol version NRT_3.0.0 ("v3"): every scheduling call takes the logical core
 * and queue, reports the request's final status through `exec_ret`, and returns
 * a sequence number. The 2.28 generation (error trackers, completion handles)
 * and the 2026-01 one (dependency lists) are not provided; see
 * docs/runtime-compat.md.
 *
 * Work is queued on execution units (XUs) of a logical core; each XU has
 * numbered queues. Requests on one queue complete in order.
 */
#ifndef NEURONSIM_NRT_NRT_ASYNC_H
#define NEURONSIM_NRT_NRT_ASYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Execution units (v3 numbering). */
typedef enum {
    NRTA_XU_TENSOR_OP = 0,   /* tensor reads, writes and copies */
    NRTA_XU_COMPUTE = 1,     /* model executions */
    NRTA_XU_COLLECTIVES = 2, /* collective operations */
    NRTA_XU_TYPE_NUM = 3     /* number of XU kinds */
} nrta_xu_t;

/* Sequence number of a request: XU id in the top 16 bits, a per-queue,
 * strictly increasing counter in the low 48 bits. */
typedef uint64_t nrta_seq_t;
typedef uint16_t nrta_xu_id_t;

#define NRTA_SEQ_NUM_MAX ((1ull << 48) - 1)
#define NRTA_SEQ_NUM_MASK NRTA_SEQ_NUM_MAX
#define NRTA_SEQ_GET_SEQ_NUM(seq_id) ((seq_id) & NRTA_SEQ_NUM_MASK)
#define NRTA_SEQ_GET_XU_ID(seq_id) ((seq_id) >> 48)

/* Queue a host -> tensor copy. */
NRT_STATUS nrta_tensor_write(nrt_tensor_t *tensor, const void *buf, uint64_t offset, uint64_t size, int lnc_idx,
                             int queue, NRT_STATUS *exec_ret, nrta_seq_t *req_sequence);

/* Queue a tensor -> host copy. */
NRT_STATUS nrta_tensor_read(void *buf, nrt_tensor_t *tensor, uint64_t offset, uint64_t size, int lnc_idx, int queue,
                            NRT_STATUS *exec_ret, nrta_seq_t *req_sequence);

/* Queue a copy between two tensors of the same logical core. Both must stay
 * allocated until the copy completes. */
NRT_STATUS nrta_tensor_copy(nrt_tensor_t *src, uint64_t src_offset, nrt_tensor_t *dst, uint64_t dst_offset,
                            uint64_t size, int lnc_idx, int queue, NRT_STATUS *exec_ret, nrta_seq_t *req_sequence);

/* Queue an execution of a loaded model. */
NRT_STATUS nrta_execute_schedule(nrt_model_t *model, const nrt_tensor_set_t *input, nrt_tensor_set_t *output,
                                 int queue, NRT_STATUS *exec_ret, nrta_seq_t *req_sequence);

/* Build the context of one collective operation; nrta_cc_schedule consumes it. */
NRT_STATUS nrta_cc_prepare(nrt_cc_comm_t *comm, nrt_tensor_list_t *input, nrt_tensor_list_t *output,
                           nrt_dtype_t dtype, nrt_op_type_t op, nrt_cc_op_type_t cc_op, nrt_cc_context_t **cc_ctx);

/* Queue a prepared collective operation. */
NRT_STATUS nrta_cc_schedule(nrt_cc_context_t **cc_ctx, int queue, NRT_STATUS *exec_ret, nrta_seq_t *req_sequence);

/* Has request `seq` finished? (The sequence number is passed by value.) */
NRT_STATUS nrta_is_completed(nrta_seq_t seq, bool *is_completed);

/* Sequence number of the last request that finished on (core, XU, queue). */
NRT_STATUS nrta_get_sequence(uint32_t lnc_idx, nrta_xu_t xu_type, int queue, nrta_seq_t *seq);

#ifndef NEURONSIM_NRT_STRICT_2_31
/* ---- 2.32+ completion events (argument types inferred from client use) ---- */

/* Signal the eventfd `eventfd` whenever a request on (core, XU, queue)
 * finishes; eventfd = -1 removes the registration. */
NRT_STATUS nrta_event_register_xu_completion(int lnc_idx, nrta_xu_t xu_type, int queue, int eventfd);

/* Signal `eventfd` when request `seq` finishes (at once if it already has);
 * eventfd = -1 removes the registration. */
NRT_STATUS nrta_event_register_seq_id_completion(nrta_seq_t seq, int eventfd);

/* ---- Error trackers (the SDK 2.28 header's; TorchNeuron creates one per logical core) ---- */

/* A failed request: its sequence number and its final status. */
typedef struct nrta_error {
    nrta_seq_t seq_id;
    uint64_t error_code; /* an NRT_STATUS */
} nrta_error_t;

typedef struct nrta_error_tracker nrta_error_tracker_t;

/* A tracker of the visible logical core `lnc_idx`: it collects every request of that core
 * that fails from now on. */
NRT_STATUS nrta_error_tracker_create(uint32_t lnc_idx, nrta_error_tracker_t **error_tracker);

/* Frees the tracker and the list it handed out last. */
void nrta_error_tracker_destroy(nrta_error_tracker_t *error_tracker);

/* The failures collected since the previous call (or since creation), oldest first. The
 * array stays valid until the next call on this tracker or its destruction. */
NRT_STATUS nrta_error_tracker_get_list(nrta_error_tracker_t *error_tracker, const nrta_error_t **list,
                                       size_t *error_count);
#endif /* !NEURONSIM_NRT_STRICT_2_31 */

#if NEURONSIM_NRT_CHECK_LAYOUT
NEURONSIM_NRT_STATIC_ASSERT(nrta_error_size, sizeof(nrta_error_t) == 16, "nrta_error_t is 16 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrta_enum_size_xu, sizeof(nrta_xu_t) == 4, "enum is 4 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrta_seq_size, sizeof(nrta_seq_t) == 8, "nrta_seq_t is 8 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrta_xu_id_size, sizeof(nrta_xu_id_t) == 2, "nrta_xu_id_t is 2 bytes");
#endif

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NRT_ASYNC_H */
