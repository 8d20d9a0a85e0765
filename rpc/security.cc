#include "rpc/security.h"

#include <grpcpp/security/server_credentials.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace cohort::rpc {
namespace {

absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag,
                                         const std::string& path) {
  absl::StatusOr<std::string> contents = ReadFile(path);
  if (!contents.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", contents.status().message()));
  }
  return contents;
}

// The flag's file as PEM holding a block of `what` ("CERTIFICATE", "PRIVATE
// KEY"): gRPC would take anything, a certificate request say, and fail only
// at its first handshake or bind, naming neither the file nor the flag.
absl::StatusOr<std::string> ReadPemFlagFile(absl::string_view flag,
                                            const std::string& path,
                                            absl::string_view what) {
  COHORT_ASSIGN_OR_RETURN(std::string pem, ReadFlagFile(flag, path));
  constexpr char kBegin[] = "-----BEGIN ";
  for (size_t at = pem.find(kBegin); at != std::string::npos;
       at = pem.find(kBegin, at + 1)) {
    const size_t start = at + sizeof(kBegin) - 1;
    const size_t end = pem.find("-----", start);
    if (end == std::string::npos) break;
    const absl::string_view label =
        absl::string_view(pem).substr(start, end - start);
    // Keys: "PRIVATE KEY", "RSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY"
    // (refused below, by name). Certificates: not "CERTIFICATE REQUEST".
    const bool matches = what == "PRIVATE KEY"
                             ? absl::EndsWith(label, what)
                             : label == what || label == "TRUSTED CERTIFICATE";
    if (matches) return pem;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, ": ", path, " holds no PEM ", absl::AsciiStrToLower(what),
      " (a \"-----BEGIN ", what, "-----\" block)"));
}

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

std::unique_ptr<BIO, BioFree> ReadOnlyBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Refuses rather than prompts for a passphrase on the terminal.
int NoPassphrase(char*, int, int, void*) { return -1; }

// That the key is the certificate's: a mismatched pair makes gRPC fail to
// bind, reported as an address in use.
absl::Status CheckKeyPair(const SecurityFiles& files,
                          const std::string& cert_pem,
                          const std::string& key_pem) {
  std::unique_ptr<X509, X509Free> cert(PEM_read_bio_X509_AUX(
      ReadOnlyBio(cert_pem).get(), nullptr, nullptr, nullptr));
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_bio_PrivateKey(
      ReadOnlyBio(key_pem).get(), nullptr, NoPassphrase, nullptr));
  const bool paired = cert != nullptr && key != nullptr &&
                      X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();  // what failed is said below, not left to gRPC's log
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert_file: ", files.tls_cert_file,
                     ": its first certificate cannot be read (damaged?)"));
  }
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key_file: ", files.tls_key_file,
        ": its private key cannot be read (damaged, or encrypted: give it "
        "without a passphrase)"));
  }
  if (!paired) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key_file: ", files.tls_key_file,
        " is not the key of the certificate in ", files.tls_cert_file));
  }
  return absl::OkStatus();
}

// The token in `path`, given as --`flag`: one printable word.
absl::StatusOr<std::string> ReadTokenFile(absl::string_view flag,
                                          const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(std::string token, ReadFlagFile(flag, path));
  token = std::string(absl::StripAsciiWhitespace(token));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", path, " is empty"));
  }
  if (token.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", path,
                     " holds more than one word; a token is a single line "
                     "without spaces"));
  }
  // gRPC refuses any other byte in a header value, and aborts the
  // process that sends it, with the token in its log.
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": ", path, " holds byte 0x",
                       absl::Hex(c, absl::kZeroPad2), " at offset ", i,
                       "; a token is printable ASCII (base64, for example)"));
    }
  }
  return token;
}

}  // namespace

absl::StatusOr<Security> Security::Load(const SecurityFiles& files) {
  Security security;
  if (!files.auth_token_file.empty()) {
    COHORT_ASSIGN_OR_RETURN(
        security.token,
        ReadTokenFile("auth_token_file", files.auth_token_file));
  }
  if (!files.metrics_token_file.empty()) {
    COHORT_ASSIGN_OR_RETURN(
        security.metrics_token,
        ReadTokenFile("metrics_token_file", files.metrics_token_file));
  }
  if (files.tls_cert_file.empty() != files.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file must be given together");
  }
  if (!files.tls_cert_file.empty()) {
    COHORT_ASSIGN_OR_RETURN(
        security.cert_pem,
        ReadPemFlagFile("tls_cert_file", files.tls_cert_file, "CERTIFICATE"));
    COHORT_ASSIGN_OR_RETURN(
        security.key_pem,
        ReadPemFlagFile("tls_key_file", files.tls_key_file, "PRIVATE KEY"));
    COHORT_RETURN_IF_ERROR(
        CheckKeyPair(files, security.cert_pem, security.key_pem));
  }
  if (!files.tls_ca_file.empty()) {
    COHORT_ASSIGN_OR_RETURN(
        security.ca_pem,
        ReadPemFlagFile("tls_ca_file", files.tls_ca_file, "CERTIFICATE"));
  }
  return security;
}

std::shared_ptr<grpc::ServerCredentials> Security::ServerCredentials() const {
  if (cert_pem.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      ca_pem.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = ca_pem;
  options.pem_key_cert_pairs.push_back({key_pem, cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> Security::ChannelCredentials() const {
  if (!tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ca_pem;
  options.pem_private_key = key_pem;
  options.pem_cert_chain = cert_pem;
  return grpc::SslCredentials(options);
}

std::vector<std::string> Security::ToFlags(const SecurityFiles& files) {
  std::vector<std::string> flags;
  auto add = [&](absl::string_view name, const std::string& value) {
    if (!value.empty()) flags.push_back(absl::StrCat("--", name, "=", value));
  };
  add("auth_token_file", files.auth_token_file);
  add("metrics_token_file", files.metrics_token_file);
  add("tls_cert_file", files.tls_cert_file);
  add("tls_key_file", files.tls_key_file);
  add("tls_ca_file", files.tls_ca_file);
  return flags;
}

std::vector<std::string> SecretFileWarnings(const SecurityFiles& files) {
  std::vector<std::string> warnings;
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string&>{"auth_token_file",
                                                   files.auth_token_file},
        {"metrics_token_file", files.metrics_token_file},
        {"tls_key_file", files.tls_key_file}}) {
    struct stat info;
    if (path.empty() || stat(path.c_str(), &info) != 0 ||
        (info.st_mode & S_IROTH) == 0) {
      continue;
    }
    warnings.push_back(absl::StrFormat(
        "--%s: %s can be read by every user of this machine (mode %04o); "
        "chmod o-r it",
        flag, path, info.st_mode & 07777));
  }
  return warnings;
}

}  // namespace cohort::rpc
