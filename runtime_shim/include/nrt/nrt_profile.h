/*
 * neuronsim libnrt-compatible runtime: profiling (nrt/nrt_profile.h).
 *
 * Four ways to capture profiles:
 *   - per model:   nrt_profile_start / nrt_profile_stop (one NTFF file);
 *   - continuous:  nrt_profile_continuous_* (profile every run, save on demand);
 *   - sessions:    nrt_profile_session_* (2.31+);
 *   - inspect:     nrt_inspect_* (system traces and device profiles for the
 *                  whole process, configured by NEURON_RT_INSPECT_* variables
 *                  or by an nrt_inspect_config_t).
 */
#ifndef NEURONSIM_NRT_NRT_PROFILE_H
#define NEURONSIM_NRT_NRT_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Per-model profiling -------------------------------------------------- */

/* Profile the executions of `model` until nrt_profile_stop(filename). */
NRT_STATUS nrt_profile_start(nrt_model_t *model, const char *filename);

/* Stop profiling and write the NTFF file (same name as given to start; an
 * existing file is overwritten). */
NRT_STATUS nrt_profile_stop(const char *filename);

/* ---- Continuous profiling ------------------------------------------------- */

/* Opaque options; defaults: output directory "./output". */
typedef struct nrt_profile_continuous_options nrt_profile_continuous_options_t;

NRT_STATUS nrt_profile_continuous_options_allocate(nrt_profile_continuous_options_t **options);
NRT_STATUS nrt_profile_continuous_options_free(nrt_profile_continuous_options_t *options);
NRT_STATUS nrt_profile_continuous_options_set_output_dir(nrt_profile_continuous_options_t *options,
                                                         const char *output_dir);

/* Profile every execution; nothing is written until nrt_profile_continuous_save. */
NRT_STATUS nrt_profile_continuous_start(nrt_profile_continuous_options_t *options);

/* Write the profile of the latest execution on core `vnc` (file name chosen by the runtime). */
NRT_STATUS nrt_profile_continuous_save(uint32_t vnc, nrt_profile_continuous_options_t *options);

/* Stop continuous profiling without saving. */
NRT_STATUS nrt_profile_continuous_stop(void);

/* ---- Session profiling (2.31+) -------------------------------------------- */

NRT_STATUS nrt_profile_session_start(int32_t vnc);
/* End the session on `vnc`; *session_id identifies the captured data. */
NRT_STATUS nrt_profile_session_stop(int32_t vnc, uint64_t *session_id);
/* Write a captured session to `filename`. */
NRT_STATUS nrt_profile_session_serialize(uint64_t session_id, const char *filename);
/* Discard one captured session, or all sessions of a core. */
NRT_STATUS nrt_profile_session_drop(uint64_t session_id);
NRT_STATUS nrt_profile_session_drop_all(int32_t vnc);

/* ---- Inspect ------------------------------------------------------------- */

/* Start capturing with options taken from the NEURON_RT_INSPECT_* variables. */
NRT_STATUS nrt_inspect_begin(void);

/* Stop capturing and write what was captured. */
NRT_STATUS nrt_inspect_stop(void);

/* Opaque inspect configuration. */
typedef struct nrt_inspect_config nrt_inspect_config_t;

/* Device profile capture mode (2.31+). */
typedef enum nrt_inspect_device_profile_mode {
    NRT_INSPECT_DEVICE_PROFILE_MODE_DISABLED = 0,
    NRT_INSPECT_DEVICE_PROFILE_MODE_MODEL = 1,   /* first execution of each NEFF on each core */
    NRT_INSPECT_DEVICE_PROFILE_MODE_SESSION = 2  /* everything, one NTFF per core */
} nrt_inspect_device_profile_mode_t;

/* Allocate a configuration holding the defaults. */
NRT_STATUS nrt_inspect_config_allocate(nrt_inspect_config_t **options);

/* Reset to the defaults (independent of the environment): session id 1,
 * output directory "./output", all activities, all cores and event types,
 * inspect off, inspect-on-failure off. */
NRT_STATUS nrt_inspect_config_set_defaults(nrt_inspect_config_t *options);

NRT_STATUS nrt_inspect_config_free(nrt_inspect_config_t *options);
NRT_STATUS nrt_inspect_config_set_session_id(nrt_inspect_config_t *options, int session_id);
/* The string is copied. */
NRT_STATUS nrt_inspect_config_set_output_dir(nrt_inspect_config_t *options, const char *output_dir);
NRT_STATUS nrt_inspect_config_set_sys_trace_max_events_per_nc(nrt_inspect_config_t *options,
                                                              uint64_t sys_trace_max_events_per_nc);
NRT_STATUS nrt_inspect_config_set_capture_enabled_for_nc(nrt_inspect_config_t *options, uint32_t nc_idx,
                                                         bool enabled);
/* event_type: one of the names from nrt_sys_trace_get_event_types. */
NRT_STATUS nrt_inspect_config_set_capture_enabled_for_event_type_string(nrt_inspect_config_t *options,
                                                                        const char *event_type, bool enabled);
/* Capture profiles for every execution. */
NRT_STATUS nrt_inspect_config_set_enable_inspect(nrt_inspect_config_t *options, bool enable_inspect);
/* Capture device profiles of failed executions. */
NRT_STATUS nrt_inspect_config_set_enable_inspect_on_fail(nrt_inspect_config_t *options, bool enable_inspect_on_fail);

/* Start capturing with `options` (NULL = defaults); the environment is ignored. */
NRT_STATUS nrt_inspect_begin_with_options(nrt_inspect_config_t *options);

/* Activity names ("system_profile", "device_profile", "host_memory",
 * "cpu_util"). The array and its strings are allocated by the runtime; free
 * them with nrt_inspect_config_free_activity_types. */
NRT_STATUS nrt_inspect_config_get_all_activity_types(const char ***activity_types, size_t *count);
NRT_STATUS nrt_inspect_config_get_enabled_activity_types(nrt_inspect_config_t *options, const char ***activity_types,
                                                         size_t *count);
void nrt_inspect_config_free_activity_types(const char **activity_types, size_t count);

/* Enable or disable one activity by name ("all" selects every activity). */
NRT_STATUS nrt_inspect_config_set_activity(nrt_inspect_config_t *options, const char *activity_type, bool enabled);

/* 2.31+ */
NRT_STATUS nrt_inspect_config_set_inspect_device_profile_mode(nrt_inspect_config_t *options,
                                                              nrt_inspect_device_profile_mode_t mode);

/* Directory below output_dir that this process writes to (2.31+). */
NRT_STATUS nrt_inspect_get_instance_output_dir(const char *output_dir, char *instance_dir_buf, size_t buf_size);

#if NEURONSIM_NRT_CHECK_LAYOUT
NEURONSIM_NRT_STATIC_ASSERT(nrt_enum_size_profile_mode, sizeof(nrt_inspect_device_profile_mode_t) == 4,
                            "enum is 4 bytes");
#endif

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NRT_PROFILE_H */
