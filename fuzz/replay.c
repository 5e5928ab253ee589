// Runs a fuzz target over files without libFuzzer: each argument is a file
// or a directory of files, fed once to LLVMFuzzerTestOneInput. Used to replay
// the seed corpora and the regression inputs with any compiler (and under
// ASan/UBSan builds), so every crash ever found stays a test.
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static int
run_file (const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) {
      cap *= 2;
      uint8_t *b = realloc(buf, cap);
      if (b == NULL)
        free(buf);
      buf = b;
    }
  }
  fclose(f);
  if (buf == NULL)
    return -1;
  // An exact-size copy, so a read past the end is caught by ASan.
  uint8_t *exact = malloc(len ? len : 1);
  if (exact == NULL) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, len);
  free(buf);
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 0;
}

static int
cmp_names (const void *a, const void *b) {
  return strcmp(*(char *const *) a, *(char *const *) b);
}

static int
run_path (const char *path, int *count) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: no such file or directory %s\n", path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    (*count)++;
    return run_file(path);
  }
  DIR *d = opendir(path);
  if (d == NULL)
    return -1;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      names = realloc(names, cap * sizeof(*names));
      if (names == NULL)
        return -1;
    }
    size_t len = strlen(path) + strlen(e->d_name) + 2;
    names[n] = malloc(len);
    snprintf(names[n], len, "%s/%s", path, e->d_name);
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof(*names), cmp_names);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    if (run_path(names[i], count) < 0)
      rc = -1;
    free(names[i]);
  }
  free(names);
  return rc;
}

int
main (int argc, char **argv) {
  int count = 0, rc = 0;
  for (int i = 1; i < argc; i++) {
    if (run_path(argv[i], &count) < 0)
      rc = 1;
  }
  printf("replayed %d inputs\n", count);
  return rc;
}
