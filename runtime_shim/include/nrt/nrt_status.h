/*
 * neuronsim libnrt-compatible runtime: status codes (nrt/nrt_status.h).
 *
 * Numeric values are part of the ABI and match the Neuron runtime. The gaps at
 * 8 and 12 are deliberate; values are only ever appended.
 */
#ifndef NEURONSIM_NRT_NRT_STATUS_H
#define NEURONSIM_NRT_NRT_STATUS_H

#include "nrt/neuronsim_nrt_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    NRT_SUCCESS = 0,
    NRT_FAILURE = 1,                  /* unspecified failure */
    NRT_INVALID = 2,                  /* bad NEFF, bad argument, tensor name/size mismatch */
    NRT_INVALID_HANDLE = 3,           /* bad handle (e.g. model) */
    NRT_RESOURCE = 4,                 /* could not allocate a resource (e.g. device memory) */
    NRT_TIMEOUT = 5,                  /* operation or execution timed out */
    NRT_HW_ERROR = 6,                 /* hardware failure */
    NRT_QUEUE_FULL = 7,               /* too many pending execution requests */
    NRT_LOAD_NOT_ENOUGH_NC = 9,       /* not enough NeuronCores to load the NEFF */
    NRT_UNSUPPORTED_NEFF_VERSION = 10, /* NEFF version not supported */
    NRT_FAIL_HOST_MEM_ALLOC = 11,     /* legacy; kept for compatibility only */
    NRT_UNINITIALIZED = 13,           /* called before nrt_init() */
    NRT_CLOSED = 14,                  /* called during/after nrt_close() */
    NRT_QUEUE_EMPTY = 15,             /* nothing to consume (e.g. debug stream) */
    NRT_EXEC_UNIT_UNRECOVERABLE = 101, /* execution unit needs a reset */
    NRT_EXEC_BAD_INPUT = 1002,        /* invalid input passed to an execution */
    NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003, /* finished, with numerical errors (NaN) */
    NRT_EXEC_COMPLETED_WITH_ERR = 1004, /* finished, with other errors */
    NRT_EXEC_NC_BUSY = 1005,          /* core held by another model or process */
    NRT_EXEC_OOB = 1006,              /* out-of-bounds indirect access */
    NRT_COLL_PENDING = 1100,          /* collective operation still in progress */
    NRT_EXEC_HW_ERR_COLLECTIVES = 1200, /* stuck in collectives */
    NRT_EXEC_HW_ERR_HBM_UE = 1201,    /* unrepairable HBM uncorrectable error */
    NRT_EXEC_HW_ERR_NC_UE = 1202,     /* on-chip memory parity error */
    NRT_EXEC_HW_ERR_DMA_ABORT = 1203, /* DMA engine abort */
    NRT_EXEC_SW_NQ_OVERFLOW = 1204,   /* software notification queue overflow */
    NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE = 1205, /* repairable HBM uncorrectable error */
    NRT_NETWORK_PROXY_FAILURE = 1206  /* EFA network proxy failure */
} NRT_STATUS;

/* Printable name of a status code. Declared by the real header, but not exported
 * by libnrt 2.31.24; the shim may export it (see docs/runtime-compat.md). */
const char *nrt_get_status_as_str(NRT_STATUS status);

#if NEURONSIM_NRT_CHECK_LAYOUT
NEURONSIM_NRT_STATIC_ASSERT(nrt_status_size, sizeof(NRT_STATUS) == 4, "NRT_STATUS must be 4 bytes");
#endif

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NRT_STATUS_H */
