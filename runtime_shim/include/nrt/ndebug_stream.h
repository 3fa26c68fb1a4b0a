/*
 * neuronsim libnrt-compatible runtime: per-core debug event stream
 * (nrt/ndebug_stream.h).
 *
 * A client connects to one logical core's stream and gets a file descriptor
 * that can be polled; events are read only through
 * nrt_debug_client_read_one_event. One client per core at a time. Events
 * emitted before the connection, or beyond the buffer size
 * (NEURON_RT_DEBUG_STREAM_BUFFER_SIZE, default 64K events), are dropped.
 */
#ifndef NEURONSIM_NRT_NDEBUG_STREAM_H
#define NEURONSIM_NRT_NDEBUG_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ndebug_stream_event_type {
    NDEBUG_STREAM_EVENT_TYPE_INVALID = 0,
    NDEBUG_STREAM_EVENT_TYPE_DEBUG_TENSOR_READ = 1
} ndebug_stream_event_type_t;

/* Header of every event; `type` holds an ndebug_stream_event_type_t and
 * data_size the payload size in bytes. */
typedef struct ndebug_stream_event_header {
    uint64_t data_size;
    uint32_t type;
    char reserved[52];
} ndebug_stream_event_header_t;

/* Payload of NDEBUG_STREAM_EVENT_TYPE_DEBUG_TENSOR_READ. */
NEURONSIM_NRT_FAM_BEGIN
typedef struct ndebug_stream_payload_debug_tensor_read {
    char prefix[512];            /* NUL-terminated message prefix */
    uint32_t logical_nc_id;
    uint32_t pipe;
    char tensor_dtype[16];       /* NUL-terminated dtype name */
    uint64_t tensor_shape[8];
    uint64_t tensor_data_size;   /* bytes in tensor_data */
    char reserved0[416];
    char tensor_data[];
} ndebug_stream_payload_debug_tensor_read_t;
NEURONSIM_NRT_FAM_END

/* Connect to a logical core's stream. A second client on the same core gets NRT_INVALID. */
NRT_STATUS nrt_debug_client_connect(int logical_nc_idx, int *stream_fd);

/* Close a connection made by nrt_debug_client_connect. */
void nrt_debug_client_connect_close(int stream_fd);

/* Take one event. *payload is allocated by the runtime and freed by the caller
 * (free()). NRT_QUEUE_EMPTY when there is no event. */
NRT_STATUS nrt_debug_client_read_one_event(int stream_fd, ndebug_stream_event_header_t *header, void **payload);

#if NEURONSIM_NRT_CHECK_LAYOUT
NEURONSIM_NRT_STATIC_ASSERT(ndebug_enum_size, sizeof(ndebug_stream_event_type_t) == 4, "enum is 4 bytes");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_header_size, sizeof(ndebug_stream_event_header_t) == 64, "event header is 64 bytes");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_header_data_size, offsetof(ndebug_stream_event_header_t, data_size) == 0, "data_size @0");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_header_type, offsetof(ndebug_stream_event_header_t, type) == 8, "type @8");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_header_reserved, offsetof(ndebug_stream_event_header_t, reserved) == 12, "reserved @12");

NEURONSIM_NRT_STATIC_ASSERT(ndebug_read_size, sizeof(ndebug_stream_payload_debug_tensor_read_t) == 1024, "tensor-read payload header is 1024 bytes");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_read_prefix, offsetof(ndebug_stream_payload_debug_tensor_read_t, prefix) == 0, "prefix @0");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_read_nc, offsetof(ndebug_stream_payload_debug_tensor_read_t, logical_nc_id) == 512, "logical_nc_id @512");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_read_pipe, offsetof(ndebug_stream_payload_debug_tensor_read_t, pipe) == 516, "pipe @516");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_read_dtype, offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_dtype) == 520, "tensor_dtype @520");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_read_shape, offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_shape) == 536, "tensor_shape @536");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_read_data_size, offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_data_size) == 600, "tensor_data_size @600");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_read_reserved0, offsetof(ndebug_stream_payload_debug_tensor_read_t, reserved0) == 608, "reserved0 @608");
NEURONSIM_NRT_STATIC_ASSERT(ndebug_read_data, offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_data) == 1024, "tensor_data @1024");
#endif

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NDEBUG_STREAM_H */
