/*
 * neuronsim libnrt-compatible runtime: one operation of a batched tensor
 * read/write (ndl/neuron_driver_shared_tensor_batch_op.h).
 *
 * The include guard has the same name as the one in the Neuron driver's copy,
 * so including both never defines the type twice. The kernel-mode branch of the
 * original (linux/types.h) is not provided: only standard C headers are used.
 */
#ifndef NEURON_DRIVER_SHARED_TENSOR_BATCH_OP_H
#define NEURON_DRIVER_SHARED_TENSOR_BATCH_OP_H

#include <stdint.h>

#include "nrt/neuronsim_nrt_shim.h"

typedef uint64_t nrt_tensor_batch_offset_t;
typedef uint64_t nrt_tensor_batch_size_t;

/* Copy `size` bytes between `buffer` (host) and the tensor at byte `offset`. */
typedef struct nrt_tensor_batch_op {
    nrt_tensor_batch_offset_t offset;
    nrt_tensor_batch_size_t size;
    void *buffer;
} nrt_tensor_batch_op_t;

#if NEURONSIM_NRT_CHECK_LAYOUT
NEURONSIM_NRT_STATIC_ASSERT(batch_op_size, sizeof(nrt_tensor_batch_op_t) == 24, "nrt_tensor_batch_op_t is 24 bytes");
NEURONSIM_NRT_STATIC_ASSERT(batch_op_offset, offsetof(nrt_tensor_batch_op_t, offset) == 0, "nrt_tensor_batch_op_t.offset @0");
NEURONSIM_NRT_STATIC_ASSERT(batch_op_sz, offsetof(nrt_tensor_batch_op_t, size) == 8, "nrt_tensor_batch_op_t.size @8");
NEURONSIM_NRT_STATIC_ASSERT(batch_op_buffer, offsetof(nrt_tensor_batch_op_t, buffer) == 16, "nrt_tensor_batch_op_t.buffer @16");
#endif

#endif /* NEURON_DRIVER_SHARED_TENSOR_BATCH_OP_H */
