/* check.h: the checks shared by the C test programs (CHECK counts passes and failures; ok and
 * fails_with take a ct_error and free it). Each program defines nothing else of the kind. */
#ifndef CT_CTEST_CHECK_H
#define CT_CTEST_CHECK_H

#include <stdio.h>
#include <string.h>

#include "cgotorch.h"

static int passed, failed;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (cond) {                                                                \
      passed++;                                                                \
    } else {                                                                   \
      failed++;                                                                \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

/* 1 when err is NULL; otherwise prints and frees it and returns 0. */
static int ok(ct_error err) {
  if (err == NULL) return 1;
  fprintf(stderr, "unexpected error: %s\n", err);
  ct_error_free(err);
  return 0;
}

/* 1 when err contains want and no libtorch backtrace; prints otherwise; frees err. */
static int fails_with(ct_error err, const char *want) {
  int good = err != NULL && strstr(err, want) != NULL && strstr(err, "Exception raised from") == NULL;
  if (!good) fprintf(stderr, "expected an error containing \"%s\", got %s\n", want, err ? err : "NULL");
  ct_error_free(err);
  return good;
}

#endif /* CT_CTEST_CHECK_H */
