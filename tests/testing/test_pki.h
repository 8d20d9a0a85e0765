#pragma once

// Certificates for TLS tests, made with the openssl command line.

#include <string>

#include "absl/status/statusor.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {

// A CA and one certificate it signed, for 127.0.0.1 and localhost, good for
// server and client: PEM file paths.
struct TestPki {
  std::string ca, cert, key;
};

// Makes a fresh CA and certificate in `dir`, their files named after `name`
// ("<name>-ca.pem", ...), so that one directory can hold several unrelated
// ones. Fails with openssl's output.
absl::StatusOr<TestPki> MakeTestPki(const ScratchDir& dir,
                                    const std::string& name = "test");

}  // namespace cohort::testing
