#pragma once

// COHORT_CHECK guards true invariants of our own code: a failure is a bug, so
// it logs and aborts. Never use it for what a peer, the disk or the
// configuration can cause; return an absl::Status for those.

#include <cstdio>
#include <cstdlib>

#define COHORT_CHECK(cond)                                              \
  do {                                                                  \
    if (!(cond)) {                                                      \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, \
                   __LINE__, #cond);                                    \
      std::abort();                                                     \
    }                                                                   \
  } while (false)

#define COHORT_CHECK_OK(expr)                                            \
  do {                                                                   \
    const ::absl::Status cohort_check_status_ = (expr);                  \
    if (!cohort_check_status_.ok()) {                                    \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, \
                   #expr, cohort_check_status_.ToString().c_str());      \
      std::abort();                                                      \
    }                                                                    \
  } while (false)
