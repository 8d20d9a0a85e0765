#include "tests/testing/test_pki.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace cohort::testing {

absl::StatusOr<TestPki> MakeTestPki(const ScratchDir& dir,
                                    const std::string& name) {
  const std::string prefix = absl::StrCat(dir.path(), "/", name);
  const std::string ext =
      dir.Write(absl::StrCat(name, "-ext.cnf"),
                "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth,clientAuth\n");
  const TestPki pki{prefix + "-ca.pem", prefix + "-node.pem",
                    prefix + "-node.key"};
  const std::vector<std::vector<std::string>> steps = {
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
       "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", prefix + "-ca.key",
       "-out", pki.ca, "-days", "1", "-subj",
       absl::StrCat("/CN=cohort-", name, "-ca")},
      {"/usr/bin/openssl", "req", "-newkey", "ec", "-pkeyopt",
       "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", pki.key, "-out",
       prefix + "-node.csr", "-subj", "/CN=localhost"},
      {"/usr/bin/openssl", "x509", "-req", "-in", prefix + "-node.csr", "-CA",
       pki.ca, "-CAkey", prefix + "-ca.key", "-CAcreateserial", "-out",
       pki.cert, "-days", "1", "-extfile", ext},
  };
  for (const std::vector<std::string>& step : steps) {
    CommandResult result = RunCommand(step, absl::Seconds(30));
    if (result.exit_code != 0) {
      return absl::InternalError(absl::StrCat("openssl: ", result.output));
    }
  }
  return pki;
}

}  // namespace cohort::testing
