#include "rpc/security.h"

#include <grpcpp/security/server_credentials.h>
#include <sys/stat.h>

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

// The flag's file as PEM holding `what` ("CERTIFICATE", "PRIVATE KEY"):
// gRPC would take anything and fail only at its first handshake or bind,
// naming neither the file nor the flag.
absl::StatusOr<std::string> ReadPemFlagFile(absl::string_view flag,
                                            const std::string& path,
                                            absl::string_view what) {
  COHORT_ASSIGN_OR_RETURN(std::string pem, ReadFlagFile(flag, path));
  constexpr char kBegin[] = "-----BEGIN ";
  for (size_t at = pem.find(kBegin); at != std::string::npos;
       at = pem.find(kBegin, at + 1)) {
    const size_t label = at + sizeof(kBegin) - 1;
    const size_t end = pem.find("-----", label);
    if (end == std::string::npos) break;
    if (absl::StrContains(absl::string_view(pem).substr(label, end - label),
                          what)) {
      return pem;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, ": ", path, " holds no PEM ", absl::AsciiStrToLower(what),
      " (a \"-----BEGIN ...", what, "-----\" block)"));
}

}  // namespace

absl::StatusOr<Security> Security::Load(const SecurityFiles& files) {
  Security security;
  if (!files.auth_token_file.empty()) {
    COHORT_ASSIGN_OR_RETURN(
        std::string token,
        ReadFlagFile("auth_token_file", files.auth_token_file));
    token = std::string(absl::StripAsciiWhitespace(token));
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth_token_file: ", files.auth_token_file, " is empty"));
    }
    if (token.find_first_of(" \t\r\n") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth_token_file: ", files.auth_token_file,
                       " holds more than one word; a token is a single line "
                       "without spaces"));
    }
    // gRPC refuses any other byte in a header value, and aborts the
    // process that sends it, with the token in its log.
    for (size_t i = 0; i < token.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(token[i]);
      if (c < 0x21 || c > 0x7e) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--auth_token_file: ", files.auth_token_file, " holds byte 0x",
            absl::Hex(c, absl::kZeroPad2), " at offset ", i,
            "; a token is printable ASCII (base64, for example)"));
      }
    }
    security.token = std::move(token);
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
