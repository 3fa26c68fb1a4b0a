/*
 * A stand-in libnrt.so.1 that only fails: every function run_neff calls returns
 * NRT_FAILURE (or does nothing). Programs linked against it succeed only when
 * neuronsim's libnrt.so.1 is put in front, with LD_PRELOAD or LD_LIBRARY_PATH;
 * that is how a binary built against the AWS runtime is pointed at the simulator.
 */
#include <stdio.h>

#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"

static NRT_STATUS standin(const char* fn) {
  fprintf(stderr, "stand-in libnrt: %s is not implemented here\n", fn);
  return NRT_FAILURE;
}

NRT_STATUS nrt_init(nrt_framework_type_t f, const char* a, const char* b) {
  (void)f, (void)a, (void)b;
  return standin(__func__);
}
void nrt_close(void) {}
NRT_STATUS nrt_get_total_nc_count(uint32_t* n) {
  (void)n;
  return standin(__func__);
}
NRT_STATUS nrt_load(const void* p, size_t s, int32_t v, int32_t c, nrt_model_t** m) {
  (void)p, (void)s, (void)v, (void)c, (void)m;
  return standin(__func__);
}
NRT_STATUS nrt_unload(nrt_model_t* m) {
  (void)m;
  return standin(__func__);
}
NRT_STATUS nrt_get_model_tensor_info(nrt_model_t* m, nrt_tensor_info_array_t** i) {
  (void)m, (void)i;
  return standin(__func__);
}
NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t* i) {
  (void)i;
  return standin(__func__);
}
NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t** s) {
  (void)s;
  return standin(__func__);
}
void nrt_destroy_tensor_set(nrt_tensor_set_t** s) {
  (void)s;
}
NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t* s, const char* n, nrt_tensor_t* t) {
  (void)s, (void)n, (void)t;
  return standin(__func__);
}
NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t* s, const char* n, nrt_tensor_t** t) {
  (void)s, (void)n, (void)t;
  return standin(__func__);
}
NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t p, int v, size_t s, const char* n,
                               nrt_tensor_t** t) {
  (void)p, (void)v, (void)s, (void)n, (void)t;
  return standin(__func__);
}
void nrt_tensor_free(nrt_tensor_t** t) {
  (void)t;
}
NRT_STATUS nrt_tensor_read(const nrt_tensor_t* t, void* b, size_t o, size_t s) {
  (void)t, (void)b, (void)o, (void)s;
  return standin(__func__);
}
NRT_STATUS nrt_tensor_write(nrt_tensor_t* t, const void* b, size_t o, size_t s) {
  (void)t, (void)b, (void)o, (void)s;
  return standin(__func__);
}
NRT_STATUS nrt_execute(nrt_model_t* m, const nrt_tensor_set_t* i, nrt_tensor_set_t* o) {
  (void)m, (void)i, (void)o;
  return standin(__func__);
}
