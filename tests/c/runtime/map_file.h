/* map_file: a whole file mapped read-only, for the C clients of the runtime tests. */
#ifndef NEURONSIM_TESTS_MAP_FILE_H
#define NEURONSIM_TESTS_MAP_FILE_H

#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Returns the mapping and sets *size, or NULL when the file cannot be read or is empty. */
static inline void* map_file(const char* path, size_t* size) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  void* p;
  if (fd < 0) return NULL;
  if (fstat(fd, &st) != 0 || st.st_size == 0) {
    close(fd);
    return NULL;
  }
  p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return NULL;
  *size = (size_t)st.st_size;
  return p;
}

#endif
