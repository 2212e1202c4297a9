/* EXPECT for the C ABI tests: a failed condition is printed with kvtier_last_error() and counted
 * in `failures`; each test's main returns failures != 0. One copy per test program (static). */
#ifndef KVTIER_TESTS_CLIENT_C_ABI_EXPECT_H_
#define KVTIER_TESTS_CLIENT_C_ABI_EXPECT_H_

#include <stdio.h>

#include "client/kvtier_client_c.h"

static int failures = 0;

#define EXPECT(cond)                                                                     \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "%s:%d: failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              kvtier_last_error());                                                      \
      ++failures;                                                                        \
    }                                                                                    \
  } while (0)

#endif /* KVTIER_TESTS_CLIENT_C_ABI_EXPECT_H_ */
