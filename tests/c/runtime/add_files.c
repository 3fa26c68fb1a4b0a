/*
 * Input and expected-output files for run_neff on build/examples/add.neff
 * (out = a + b, [128,512] float32).
 *
 *   add_files make DIR    writes DIR/a.bin, DIR/b.bin and DIR/expected_out.bin
 *   add_files check DIR   compares DIR/out.out with DIR/expected_out.bin (exit 0 when equal)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (128 * 512)

static int write_floats(const char* dir, const char* name, const float* v) {
  char path[4096];
  FILE* f;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (f == NULL || fwrite(v, sizeof(float), N, f) != N) return 1;
  return fclose(f) != 0;
}

static int read_floats(const char* dir, const char* name, float* v) {
  char path[4096];
  FILE* f;
  size_t n;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "rb");
  if (f == NULL) return 1;
  n = fread(v, sizeof(float), N + 1, f);
  fclose(f);
  return n != N;
}

int main(int argc, char** argv) {
  static float a[N], b[N], c[N], got[N];
  int i;
  if (argc != 3) return 2;
  for (i = 0; i < N; i++) {
    a[i] = (float)(i % 251) * 0.5f;
    b[i] = (float)(i % 13) - 6.0f;
    c[i] = a[i] + b[i];
  }
  if (strcmp(argv[1], "make") == 0)
    return write_floats(argv[2], "a.bin", a) || write_floats(argv[2], "b.bin", b) ||
           write_floats(argv[2], "expected_out.bin", c);
  if (read_floats(argv[2], "out.out", got)) {
    fprintf(stderr, "cannot read %s/out.out\n", argv[2]);
    return 1;
  }
  for (i = 0; i < N; i++)
    if (got[i] != c[i]) {
      fprintf(stderr, "out[%d] = %g, expected %g\n", i, got[i], c[i]);
      return 1;
    }
  printf("out.out matches a + b (%d values)\n", N);
  return 0;
}
