/*
 * neuronsim libnrt-compatible runtime: system trace capture and fetch
 * (nrt/nrt_sys_trace.h).
 *
 * Capture: allocate a config, adjust it, nrt_sys_trace_start, ..., nrt_sys_trace_stop.
 * Fetch:   nrt_sys_trace_fetch_events returns the events captured so far as a
 *          NUL-terminated JSON string; fetched events are consumed.
 */
#ifndef NEURONSIM_NRT_NRT_SYS_TRACE_H
#define NEURONSIM_NRT_NRT_SYS_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Capture ------------------------------------------------------------- */

typedef struct nrt_sys_trace_config nrt_sys_trace_config_t;

/* Allocate a capture configuration holding the defaults. */
NRT_STATUS nrt_sys_trace_config_allocate(nrt_sys_trace_config_t **options);
void nrt_sys_trace_config_set_defaults(nrt_sys_trace_config_t *options);
void nrt_sys_trace_config_free(nrt_sys_trace_config_t *options);
/* Capacity of each core's event ring. */
void nrt_sys_trace_config_set_max_events_per_nc(nrt_sys_trace_config_t *options, uint64_t max_events_per_nc);
void nrt_sys_trace_config_set_capture_enabled_for_nc(nrt_sys_trace_config_t *options, uint32_t nc_idx, bool enabled);
/* event_type: one of the names from nrt_sys_trace_get_event_types. */
NRT_STATUS nrt_sys_trace_config_set_capture_enabled_for_event_type(nrt_sys_trace_config_t *options,
                                                                   const char *event_type, bool enabled);

/* All event type names. The array and its strings are allocated; free them
 * yourself (free each, then the array) or with nrt_sys_trace_free_event_types. */
NRT_STATUS nrt_sys_trace_get_event_types(const char ***event_types, size_t *count);
void nrt_sys_trace_free_event_types(const char **event_types, size_t count);

/* Event type names enabled in a configuration (allocated as above). */
NRT_STATUS nrt_sys_trace_config_get_enabled_event_types(nrt_sys_trace_config_t *options, const char ***event_types,
                                                        size_t *count);

/* Allocate the event rings and start capturing. */
NRT_STATUS nrt_sys_trace_start(nrt_sys_trace_config_t *options);
/* Stop capturing and release the event rings. */
NRT_STATUS nrt_sys_trace_stop(void);

/* ---- Fetch --------------------------------------------------------------- */

typedef struct nrt_sys_trace_fetch_options nrt_sys_trace_fetch_options_t;

NRT_STATUS nrt_sys_trace_fetch_options_allocate(nrt_sys_trace_fetch_options_t **options);
void nrt_sys_trace_fetch_options_set_defaults(nrt_sys_trace_fetch_options_t *options);
void nrt_sys_trace_fetch_options_free(nrt_sys_trace_fetch_options_t *options);
/* Fetch at most this many events per core. */
void nrt_sys_trace_fetch_options_set_max_events_per_nc(nrt_sys_trace_fetch_options_t *options,
                                                       uint64_t max_events_per_nc);
/* Fetch events of this core only. */
void nrt_sys_trace_fetch_options_set_nc_idx(nrt_sys_trace_fetch_options_t *options, uint64_t nc_idx);

/* *buffer receives a runtime-allocated JSON string (release it with
 * nrt_sys_trace_buffer_free), *written_size its length. options may be NULL. */
NRT_STATUS nrt_sys_trace_fetch_events(char **buffer, size_t *written_size,
                                      const nrt_sys_trace_fetch_options_t *options);
void nrt_sys_trace_buffer_free(char *buffer);

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NRT_SYS_TRACE_H */
