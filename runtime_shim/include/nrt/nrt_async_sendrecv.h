/*
 * neuronsim libnrt-compatible runtime: asynchronous point-to-point tensor
 * transfer (nrt/nrt_async_sendrecv.h). Experimental in the Neuron runtime.
 *
 * `lnc` arguments here are absolute logical-core ids on the host, not
 * relative to the visible cores. Flow: nrt_async_sendrecv_init(lnc), connect
 * (sender) or accept (receiver), poll nrt_async_sendrecv_test_comm until
 * connected, post send/recv requests, poll nrt_async_sendrecv_test_request,
 * then nrt_async_sendrecv_close(lnc) before nrt_close.
 */
#ifndef NEURONSIM_NRT_NRT_ASYNC_SENDRECV_H
#define NEURONSIM_NRT_NRT_ASYNC_SENDRECV_H

#include <stdbool.h>
#include <stddef.h>

#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt.h"
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nrt_async_sendrecv_comm nrt_async_sendrecv_comm_t;
typedef struct nrt_async_sendrecv_request nrt_async_sendrecv_request_t;

/* Limits: communicators per logical core, pending requests per communicator. */
NRT_STATUS nrt_async_sendrecv_get_max_num_communicators_per_lnc(int *num);
NRT_STATUS nrt_async_sendrecv_get_max_num_pending_request(int *num);

NRT_STATUS nrt_async_sendrecv_init(int lnc);
NRT_STATUS nrt_async_sendrecv_close(int lnc);

/* Create a send (connect) or receive (accept) communicator towards peer_lnc
 * on the host peer_ip. NRT_RESOURCE past the communicator limit. */
NRT_STATUS nrt_async_sendrecv_connect(const char *peer_ip, int peer_lnc, int lnc,
                                      nrt_async_sendrecv_comm_t **send_comm);
NRT_STATUS nrt_async_sendrecv_accept(const char *peer_ip, int peer_lnc, int lnc,
                                     nrt_async_sendrecv_comm_t **recv_comm);

/* *done = true once the communicator is connected. */
NRT_STATUS nrt_async_sendrecv_test_comm(nrt_async_sendrecv_comm_t *comm, bool *done);

/* Post a non-blocking send or receive of `length` bytes at `offset` of the
 * tensor. NRT_RESOURCE past the pending-request limit. */
NRT_STATUS nrt_async_sendrecv_send_tensor(nrt_tensor_t *tensor, size_t offset, size_t length,
                                          nrt_async_sendrecv_comm_t *send_comm,
                                          nrt_async_sendrecv_request_t **request);
NRT_STATUS nrt_async_sendrecv_recv_tensor(nrt_tensor_t *tensor, size_t offset, size_t length,
                                          nrt_async_sendrecv_comm_t *recv_comm,
                                          nrt_async_sendrecv_request_t **request);

/* *done = true once the request finished; *size = bytes transferred. */
NRT_STATUS nrt_async_sendrecv_test_request(nrt_async_sendrecv_request_t *request, bool *done, size_t *size);

/* Make data of completed receives on `lnc` visible in memory. */
NRT_STATUS nrt_async_sendrecv_flush(int lnc);

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NRT_ASYNC_SENDRECV_H */
