/*
 * Loads libnrt.so.1 at run time the way libfabric's Neuron HMEM provider does:
 * dlopen by soname, nrt_get_total_nc_count before nrt_init (must be > 0), then
 * allocate a device tensor, use its VA with nrt_memcpy_to_device, and read it back.
 * Also looks the symbols up by version (NRT_2.0.0, and NRT_3.0.0 for nrta_*), and uses the
 * async error tracker as TorchNeuron's runtime does: one per logical core, drained on read.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nrt/nrt.h"
#include "nrt/nrt_async.h"
#include "nrt/nrt_experimental.h"

#define LOOKUP3(name)                                                      \
  typeof(&name) p_##name = (typeof(&name))dlvsym(lib, #name, "NRT_3.0.0"); \
  if (p_##name == NULL) {                                                  \
    fprintf(stderr, "missing %s@NRT_3.0.0\n", #name);                      \
    return 1;                                                              \
  }

#define LOOKUP(name)                                                       \
  typeof(&name) p_##name = (typeof(&name))dlvsym(lib, #name, "NRT_2.0.0"); \
  if (p_##name == NULL) {                                                  \
    fprintf(stderr, "missing %s@NRT_2.0.0\n", #name);                      \
    return 1;                                                              \
  }

int main(void) {
  void* lib = dlopen("libnrt.so.1", RTLD_NOW | RTLD_LOCAL);
  uint32_t count = 0;
  nrt_tensor_t* t = NULL;
  char* va;
  char back[6] = {0};
  nrta_error_tracker_t* tracker = NULL;
  const nrta_error_t* errors = NULL;
  size_t error_count = 1;
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  LOOKUP(nrt_get_total_nc_count)
  LOOKUP(nrt_init)
  LOOKUP(nrt_close)
  LOOKUP(nrt_tensor_allocate)
  LOOKUP(nrt_tensor_get_va)
  LOOKUP(nrt_tensor_read)
  LOOKUP(nrt_tensor_free)
  LOOKUP(nrt_memcpy_to_device)
  LOOKUP3(nrta_execute_schedule)
  LOOKUP3(nrta_error_tracker_create)
  LOOKUP3(nrta_error_tracker_get_list)
  LOOKUP3(nrta_error_tracker_destroy)
  if (dlsym(lib, "neuronsim_internal_symbol_check") != NULL ||
      dlsym(lib, "_ZN9neuronsim3sim12SparseMemory4readEmPvm") != NULL) {
    fprintf(stderr, "internal symbols are exported\n");
    return 1;
  }
  if (p_nrt_get_total_nc_count(&count) != NRT_SUCCESS || count == 0) {
    fprintf(stderr, "nrt_get_total_nc_count before nrt_init: %u\n", count);
    return 1;
  }
  if (p_nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "2.0", "") != NRT_SUCCESS) return 1;
  if (p_nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 4096, "libfabric", &t) != NRT_SUCCESS)
    return 1;
  va = p_nrt_tensor_get_va(t);
  if (va == NULL) return 1;
  if (p_nrt_memcpy_to_device(va + 100, "hello", 5) != NRT_SUCCESS) return 1;
  if (p_nrt_tensor_read(t, back, 100, 5) != NRT_SUCCESS || strcmp(back, "hello") != 0) return 1;
  p_nrt_tensor_free(&t);
  if (p_nrta_error_tracker_create(0, &tracker) != NRT_SUCCESS || tracker == NULL) return 1;
  if (p_nrta_error_tracker_get_list(tracker, &errors, &error_count) != NRT_SUCCESS ||
      error_count != 0) {
    fprintf(stderr, "a new error tracker holds %zu errors\n", error_count);
    return 1;
  }
  p_nrta_error_tracker_destroy(tracker);
  p_nrt_close();
  dlclose(lib);
  printf("dlopen client: %u cores, tensor VA round trip ok, error tracker ok\n", count);
  return 0;
}
