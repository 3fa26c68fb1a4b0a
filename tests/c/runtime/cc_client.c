/*
 * cc_client: one rank of a collective job, as a process per rank runs it (torchrun style):
 *
 *   NEURON_RT_ROOT_COMM_ID=host:port NEURONSIM_JOB_TOKEN=secret NEURON_RT_VISIBLE_CORES=<core> \
 *     cc_client all_reduce.neff <rank> <world> [<expected nrt_load_collectives status>]
 *
 * Rank r's x holds ((i * 7 + r * 3) % 13) - 6 at element i; the model (examples/all_reduce.s)
 * all-reduces x into y, which must then hold the sum of that over every rank. With an expected
 * load status other than 0 the client only checks that nrt_load_collectives returns it.
 * Exit status 0 when everything is as expected.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "map_file.h"
#include "nrt/nrt.h"

#define N (128 * 64)

static float input_value(int rank, int i) {
  return (float)((i * 7 + rank * 3) % 13) - 6.0f;
}

static int fail(int rank, const char* what, int status) {
  fprintf(stderr, "cc_client rank %d: %s (status %d)\n", rank, what, status);
  return 1;
}

static int run(int rank, int world, const void* neff, size_t size, int expect_load) {
  static float x[N], y[N];
  nrt_model_t* model = NULL;
  nrt_tensor_t *tx = NULL, *ty = NULL;
  nrt_tensor_set_t *in = NULL, *out = NULL;
  NRT_STATUS s = nrt_load_collectives(neff, size, 0, 1, (uint32_t)rank, (uint32_t)world, &model);
  int i, q, wrong = 0;
  if ((int)s != expect_load)
    return fail(rank, "nrt_load_collectives returned an unexpected status", (int)s);
  if (s != NRT_SUCCESS) return 0;
  if (nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, sizeof x, "x", &tx) != NRT_SUCCESS ||
      nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, sizeof y, "y", &ty) != NRT_SUCCESS ||
      nrt_allocate_tensor_set(&in) != NRT_SUCCESS || nrt_allocate_tensor_set(&out) != NRT_SUCCESS ||
      nrt_add_tensor_to_tensor_set(in, "x", tx) != NRT_SUCCESS ||
      nrt_add_tensor_to_tensor_set(out, "y", ty) != NRT_SUCCESS)
    return fail(rank, "tensor setup failed", 0);
  for (i = 0; i < N; i++) x[i] = input_value(rank, i);
  if (nrt_tensor_write(tx, x, 0, sizeof x) != NRT_SUCCESS)
    return fail(rank, "nrt_tensor_write failed", 0);
  if ((s = nrt_execute(model, in, out)) != NRT_SUCCESS)
    return fail(rank, "nrt_execute failed", (int)s);
  if (nrt_tensor_read(ty, y, 0, sizeof y) != NRT_SUCCESS)
    return fail(rank, "nrt_tensor_read failed", 0);
  for (i = 0; i < N; i++) {
    float want = 0.0f;
    for (q = 0; q < world; q++) want += input_value(q, i);
    wrong += y[i] != want;
  }
  if (wrong) return fail(rank, "wrong sums", wrong);
  nrt_tensor_free(&tx);
  nrt_tensor_free(&ty);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
  return nrt_unload(model) == NRT_SUCCESS ? 0 : fail(rank, "nrt_unload failed", 0);
}

int main(int argc, char** argv) {
  size_t size = 0;
  void* neff;
  int rank, world, expect_load, rc;
  if (argc < 4 || argc > 5) {
    fprintf(stderr, "usage: %s model.neff rank world [expected load status]\n", argv[0]);
    return 2;
  }
  rank = atoi(argv[2]);
  world = atoi(argv[3]);
  expect_load = argc == 5 ? atoi(argv[4]) : 0;
  neff = map_file(argv[1], &size);
  if (neff == NULL) return fail(rank, "cannot read the NEFF", 0);
  if (nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "") != NRT_SUCCESS)
    return fail(rank, "nrt_init failed", 0);
  rc = run(rank, world, neff, size, expect_load);
  nrt_close();
  munmap(neff, size);
  if (rc == 0) printf("cc_client rank %d of %d: ok\n", rank, world);
  return rc;
}
