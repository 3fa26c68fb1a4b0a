/*
 * neuronsim libnrt-compatible runtime: shared definitions for the public C headers.
 *
 * This header is not part of the AWS header set. Every other header under
 * runtime_shim/include/{nrt,ndl} includes it. It supplies:
 *   - macros that identify the shim and the runtime release whose C API it follows;
 *   - the feature switches described in docs/runtime-compat.md;
 *   - a static-assertion macro that works in C99, C11 and C++;
 *   - the switch that enables the LP64 layout checks in the headers.
 * Only standard C headers are used.
 */
#ifndef NEURONSIM_NRT_SHIM_H
#define NEURONSIM_NRT_SHIM_H

#include <stddef.h>

/* Present only in the neuronsim headers, so clients can tell them from the AWS ones. */
#define NEURONSIM_NRT_SHIM 1

/* The headers follow the public C API of aws-neuronx-runtime-lib 2.31 (SDK 2.29):
 * the SDK 2.28 header set plus the 2.31 additions, with hardware dtype codes. */
#define NEURONSIM_NRT_COMPAT_MAJOR 2
#define NEURONSIM_NRT_COMPAT_MINOR 31

/*
 * Feature switches (define before including any nrt header):
 *
 *   NEURONSIM_NRT_STRICT_2_31
 *       Hide the declarations that only later runtimes (2.32 to 2.34) added.
 *       Off by default: those declarations are additive and are visible.
 *
 *   NEURONSIM_NRT_BATCH_OPS_2_34
 *       Declare nrt_tensor_read_batch/nrt_tensor_write_batch in the 2.34 form
 *       (no trailing `bool unsafe`). Off by default (2.28-2.31 form).
 *
 *   NEURONSIM_NRT_NO_LAYOUT_CHECKS
 *       Turn off the struct size/offset assertions in the headers.
 */

/* Static assertion usable at file scope and inside extern "C" blocks.
 * `tag` must be unique per assertion; it only names the C99 fallback typedef. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define NEURONSIM_NRT_STATIC_ASSERT(tag, cond, msg) static_assert(cond, msg)
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define NEURONSIM_NRT_STATIC_ASSERT(tag, cond, msg) _Static_assert(cond, msg)
#else
/* Pre-C11 C and pre-C++11: a negative array size breaks the build on failure. */
#define NEURONSIM_NRT_STATIC_ASSERT(tag, cond, msg) \
    typedef char neuronsim_nrt_static_assert_##tag[(cond) ? 1 : -1]
#endif

/* The layouts pinned by the headers are those of x86-64 LP64 (the only ABI libnrt
 * ships for); they hold on any LP64 target. Other data models skip the checks. */
#if !defined(NEURONSIM_NRT_NO_LAYOUT_CHECKS) && (defined(__LP64__) || defined(_LP64))
#define NEURONSIM_NRT_CHECK_LAYOUT 1
#else
#define NEURONSIM_NRT_CHECK_LAYOUT 0
#endif

/* Two public structs end in a flexible array member. That is standard C99 but a
 * GNU extension in C++, where -Wpedantic would flag it; silence it locally. */
#if defined(__cplusplus) && defined(__GNUC__)
#define NEURONSIM_NRT_FAM_BEGIN \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wpedantic\"")
#define NEURONSIM_NRT_FAM_END _Pragma("GCC diagnostic pop")
#else
#define NEURONSIM_NRT_FAM_BEGIN
#define NEURONSIM_NRT_FAM_END
#endif

#endif /* NEURONSIM_NRT_SHIM_H */
