/*
 * neuronsim libnrt-compatible runtime: library version query (nrt/nrt_version.h).
 *
 * Before SDK 2.28 this lived in nrt_experimental.h, which still includes this
 * header. Unlike the AWS original, this header includes what it needs itself.
 */
#ifndef NEURONSIM_NRT_NRT_VERSION_H
#define NEURONSIM_NRT_NRT_VERSION_H

#include <stddef.h>
#include <stdint.h>

#include "nrt/neuronsim_nrt_shim.h"
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RT_VERSION_DETAIL_LEN 128
#define GIT_HASH_LEN 64

typedef struct nrt_version {
    uint64_t rt_major;
    uint64_t rt_minor;
    uint64_t rt_patch;
    uint64_t rt_maintenance;
    char rt_detail[RT_VERSION_DETAIL_LEN]; /* NUL-terminated description */
    char git_hash[GIT_HASH_LEN];           /* NUL-terminated build hash */
} nrt_version_t;

/* Fill *ver. `size` is how many bytes of *ver the caller provides (normally
 * sizeof(nrt_version_t)); fields that do not fit are left untouched, and a size
 * too small for the numbers and rt_detail is an error. Usable before nrt_init. */
NRT_STATUS nrt_get_version(nrt_version_t *ver, size_t size);

#if NEURONSIM_NRT_CHECK_LAYOUT
NEURONSIM_NRT_STATIC_ASSERT(nrt_version_size, sizeof(nrt_version_t) == 224, "nrt_version_t is 224 bytes");
NEURONSIM_NRT_STATIC_ASSERT(nrt_version_major, offsetof(nrt_version_t, rt_major) == 0, "rt_major @0");
NEURONSIM_NRT_STATIC_ASSERT(nrt_version_minor, offsetof(nrt_version_t, rt_minor) == 8, "rt_minor @8");
NEURONSIM_NRT_STATIC_ASSERT(nrt_version_patch, offsetof(nrt_version_t, rt_patch) == 16, "rt_patch @16");
NEURONSIM_NRT_STATIC_ASSERT(nrt_version_maint, offsetof(nrt_version_t, rt_maintenance) == 24, "rt_maintenance @24");
NEURONSIM_NRT_STATIC_ASSERT(nrt_version_detail, offsetof(nrt_version_t, rt_detail) == 32, "rt_detail @32");
NEURONSIM_NRT_STATIC_ASSERT(nrt_version_hash, offsetof(nrt_version_t, git_hash) == 160, "git_hash @160");
#endif

#ifdef __cplusplus
}
#endif

#endif /* NEURONSIM_NRT_NRT_VERSION_H */
