/*
 * neuronsim libnrt-compatible runtime: collectives back-channel (nrt/nec.h).
 *
 * These are the 16 nec_* functions libnrt 2.31 exports for the collectives
 * library (libnccom) to call back into the runtime; applications do not use
 * them. The AWS header also carries the runtime's internal collective data
 * structures; those are not reproduced here, and enc_host_mem_t is left
 * opaque (it is only passed by pointer). Note that most of these functions
 * do not return NRT_STATUS.
 */
#ifndef NEURONSIM_NRT_NEC_H
#define NEURONSIM_NRT_NEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kind of pod (multi-node NeuronLink domain) the instance belongs to. */
typedef enum nec_pod_type {
    NEC_POD_TYPE_NONE = 0,
    NEC_POD_TYPE_P2P = 1,
    NEC_POD_TYPE_SWITCH = 2,
    NEC_POD_TYPE_INVALID = 3
} nec_pod_type_t;

/* Host memory shared with the device during a collective (opaque here). */
typedef struct enc_host_mem enc_host_mem_t;

/* Add `val` to a device semaphore through its memory-mapped increment register. */
void nec_inc_semaphore(volatile uint32_t *sem_inc_addr, uint32_t val);

/* Device enumeration. */
int nec_get_device_count(int *available_devices_array, uint32_t array_size);
int nec_get_device_pci_bdf(int neuron_dev, uint32_t *domain, uint32_t *bus_num, uint8_t *pci_slot,
                           uint8_t *dev_func);

/* Physical cores per logical core. */
NRT_STATUS nec_get_virtual_core_size(uint32_t *virtual_core_size);

/* Topology: device (MLA) indices, routing ids and ports. */
NRT_STATUS nec_build_port_and_rid_map(int local_nec_dev_id, int *mla_indexes, int *host_device_ids, int count);
bool nec_is_mla_available(int local_nec_dev_id, int mla_idx);
int nec_mla_idx_to_rid(int local_nec_dev_id, int mla_idx);
int nec_rid_to_mla_idx(int local_nec_dev_id, int rid);
int nec_get_peer_mla_idx(int local_nec_dev_id, int mla_idx, int port);
int nec_get_p2p_pod_peer_node(uint32_t nec_dev_id, int node, uint32_t port_distance, int *peer_node);
NRT_STATUS nec_pod_node_can_access_peer_node(nec_pod_type_t pod_type, uint32_t local_rid, uint32_t local_node_id,
                                             uint32_t remote_rid, uint32_t remote_node_id, int *can_access_peer);

/* Forward a message to the driver's kernel log. */
void nec_ndl_printk(char *str, uint32_t size, uint32_t action);

/* Per-rank sizes and offsets of variable-size (all-to-all-v) transfers. */
size_t nec_get_dynamic_send_size_bytes(enc_host_mem_t *dyn_input, size_t data_type_sz, int dst_rank, int rank_n);
size_t nec_get_dynamic_send_offset_bytes(enc_host_mem_t *dyn_input, size_t data_type_sz, int dst_rank, int rank_n);
size_t nec_get_dynamic_recv_offset_bytes(enc_host_mem_t *dyn_input, size_t data_type_sz, int src_rank, int rank_n);
void nec_set_recv_size_bytes(enc_host_mem_t *dyn_input, size_t recv_size_bytes, size_t data_type_sz, int src_rank,
                             int rank_n);

#if NEURONSIM_NRT_CHECK_LAYOUT
NEURONSIM_NRT_STATIC_ASSERT(nec_enum_size_pod, sizeof(nec_pod_type_t) == 4, "enum is 4 bytes");
#endif

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NEC_H */
