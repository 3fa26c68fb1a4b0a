/*
 * run_neff: the canonical single-model flow of the Neuron runtime developer guide
 * (spec §12), written against the libnrt headers and linked with -lnrt.
 *
 *   run_neff model.neff [input_name input_file]...
 *
 * Inputs not named on the command line are left zero-filled. Each output is
 * written to <output_name>.out in the current directory.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "map_file.h"
#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"

#define CHECK(call)                                                       \
  do {                                                                    \
    NRT_STATUS status_ = (call);                                          \
    if (status_ != NRT_SUCCESS) {                                         \
      fprintf(stderr, "%s failed with status %d\n", #call, (int)status_); \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

int main(int argc, char** argv) {
  size_t neff_size = 0;
  void* neff;
  nrt_model_t* model = NULL;
  nrt_tensor_info_array_t* info = NULL;
  nrt_tensor_set_t *inputs = NULL, *outputs = NULL;
  nrt_tensor_t** tensors;
  uint64_t i;
  int a;

  if (argc < 2 || argc % 2 != 0) {
    fprintf(stderr, "usage: %s model.neff [input_name input_file]...\n", argv[0]);
    return 2;
  }
  neff = map_file(argv[1], &neff_size);
  if (neff == NULL) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }

  CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
  CHECK(nrt_load(neff, neff_size, -1, -1, &model));
  munmap(neff, neff_size); /* the runtime does not need the bytes after nrt_load */

  CHECK(nrt_get_model_tensor_info(model, &info));
  CHECK(nrt_allocate_tensor_set(&inputs));
  CHECK(nrt_allocate_tensor_set(&outputs));
  tensors = calloc(info->tensor_count, sizeof *tensors);
  for (i = 0; i < info->tensor_count; i++) {
    const nrt_tensor_info_t* e = &info->tensor_array[i];
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, e->size, e->name, &tensors[i]));
    CHECK(nrt_add_tensor_to_tensor_set(e->usage == NRT_TENSOR_USAGE_INPUT ? inputs : outputs,
                                       e->name, tensors[i]));
  }

  for (a = 2; a + 1 < argc; a += 2) {
    nrt_tensor_t* t = NULL;
    size_t size = 0, expected = 0;
    void* data;
    for (i = 0; i < info->tensor_count; i++)
      if (strcmp(info->tensor_array[i].name, argv[a]) == 0) expected = info->tensor_array[i].size;
    if (nrt_get_tensor_from_tensor_set(inputs, argv[a], &t) != NRT_SUCCESS) {
      fprintf(stderr, "the model has no input named %s\n", argv[a]);
      return 1;
    }
    data = map_file(argv[a + 1], &size);
    if (data == NULL || size != expected) {
      fprintf(stderr, "%s: cannot read it, or its size is not %zu bytes\n", argv[a + 1], expected);
      return 1;
    }
    CHECK(nrt_tensor_write(t, data, 0, size));
    munmap(data, size);
  }

  CHECK(nrt_execute(model, inputs, outputs));

  for (i = 0; i < info->tensor_count; i++) {
    const nrt_tensor_info_t* e = &info->tensor_array[i];
    char path[NRT_TENSOR_NAME_MAX + 8];
    void* buf;
    FILE* f;
    if (e->usage != NRT_TENSOR_USAGE_OUTPUT) continue;
    buf = malloc(e->size);
    CHECK(nrt_tensor_read(tensors[i], buf, 0, e->size));
    snprintf(path, sizeof path, "%s.out", e->name);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, e->size, f) != e->size) {
      fprintf(stderr, "cannot write %s\n", path);
      return 1;
    }
    fclose(f);
    free(buf);
    printf("wrote %s (%zu bytes)\n", path, e->size);
  }

  /* As in the guide: unload first, then free the tensors. */
  CHECK(nrt_unload(model));
  for (i = 0; i < info->tensor_count; i++) nrt_tensor_free(&tensors[i]);
  free(tensors);
  nrt_destroy_tensor_set(&inputs);
  nrt_destroy_tensor_set(&outputs);
  nrt_free_model_tensor_info(info);
  nrt_close();
  return 0;
}
