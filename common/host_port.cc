#include "common/host_port.h"

#include <arpa/inet.h>

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/names.h"
#include "common/status_macros.h"

namespace cohort {
namespace {

// Hostname characters; anything else (':' included) needs brackets.
bool IsHostnameChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_';
}

// An IPv6 literal, with an optional "%zone" suffix (fe80::1%eth0).
bool IsIPv6(absl::string_view host) {
  absl::string_view address = host;
  const size_t percent = host.find('%');
  if (percent != absl::string_view::npos) {
    absl::string_view zone = host.substr(percent + 1);
    if (zone.empty()) return false;
    for (char c : zone) {
      if (!IsHostnameChar(c)) return false;
    }
    address = host.substr(0, percent);
  }
  if (address.empty() || address.size() >= INET6_ADDRSTRLEN) return false;
  in6_addr parsed;
  return inet_pton(AF_INET6, std::string(address).c_str(), &parsed) == 1;
}

absl::StatusOr<int> ParsePort(absl::string_view text, bool allow_port_zero) {
  if (text.empty()) return absl::InvalidArgumentError("empty port");
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("port ", Quoted(text), " is not a number"));
    }
  }
  // Cap the value as it grows, so that any digit string is out of range
  // rather than overflowing.
  long value = 0;
  for (char c : text) value = std::min(value * 10 + (c - '0'), 1000000L);
  const int low = allow_port_zero ? 0 : 1;
  if (value < low || value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port ", text, " is out of range ", low, "..65535"));
  }
  return static_cast<int>(value);
}

}  // namespace

absl::StatusOr<HostPort> SplitHostPort(absl::string_view text,
                                       bool allow_port_zero) {
  using absl::InvalidArgumentError;
  if (text.empty()) return InvalidArgumentError("empty address");
  for (char c : text) {
    if (absl::ascii_isspace(c) || absl::ascii_iscntrl(c)) {
      return InvalidArgumentError("contains whitespace or a control character");
    }
  }
  absl::string_view host, port;
  const bool bracketed = text.front() == '[';
  if (bracketed) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return InvalidArgumentError("no ']' closing the bracketed IPv6 host");
    }
    host = text.substr(1, close - 1);
    absl::string_view rest = text.substr(close + 1);
    if (rest.empty()) {
      return InvalidArgumentError("no port; expected \"[ipv6]:port\"");
    }
    if (rest.front() != ':')
      return InvalidArgumentError("expected ':' after ']'");
    port = rest.substr(1);
  } else {
    const size_t colon = text.find(':');
    if (colon == absl::string_view::npos) {
      return InvalidArgumentError("no port; expected \"host:port\"");
    }
    if (text.find(':', colon + 1) != absl::string_view::npos) {
      // Give the exact fix when the text is an IPv6 literal plus a port.
      const size_t last = text.rfind(':');
      if (IsIPv6(text.substr(0, last))) {
        return InvalidArgumentError(
            absl::StrCat("unbracketed IPv6 host; write ",
                         Quoted(absl::StrCat("[", text.substr(0, last), "]",
                                             text.substr(last)))));
      }
      return InvalidArgumentError(
          "more than one ':'; an IPv6 host must be bracketed, as in "
          "\"[::1]:2222\"");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) return InvalidArgumentError("empty host");
  if (bracketed) {
    if (!IsIPv6(host)) {
      return InvalidArgumentError(
          absl::StrCat(Quoted(host), " is not an IPv6 address"));
    }
  } else {
    for (char c : host) {
      if (!IsHostnameChar(c)) {
        return InvalidArgumentError(absl::StrCat(
            "host ", Quoted(host), " has a character that is not allowed: ",
            Quoted(absl::string_view(&c, 1)),
            "; a host is letters, digits, '.', '-' and '_', or a bracketed "
            "IPv6 address"));
      }
    }
  }
  COHORT_ASSIGN_OR_RETURN(int port_number, ParsePort(port, allow_port_zero));
  return HostPort{std::string(host), port_number};
}

std::string AddressKey(const HostPort& address) {
  HostPort key{absl::AsciiStrToLower(address.host), address.port};
  // Two tasks at "localhost:5" and "127.0.0.1:5" would collide on one
  // machine (localhost may resolve to ::1 first, but a spec that relies on
  // that difference is a mistake all the same).
  if (key.host == "localhost") key.host = "127.0.0.1";
  const size_t percent = key.host.find('%');
  const std::string ip = key.host.substr(0, percent);
  in6_addr parsed;
  char canonical[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET6, ip.c_str(), &parsed) == 1 &&
      inet_ntop(AF_INET6, &parsed, canonical, sizeof(canonical)) != nullptr) {
    key.host.replace(0, ip.size(), canonical);
  }
  return key.ToString();
}

bool HostPort::IsLoopback() const {
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

std::string LocalDialAddress(absl::string_view address) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(address, true);
  if (!parsed.ok()) return std::string(address);
  if (parsed->host == "0.0.0.0") parsed->host = "127.0.0.1";
  if (parsed->host == "::") parsed->host = "::1";
  return parsed->ToString();
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text,
                                       bool allow_port_zero) {
  absl::StatusOr<HostPort> address = SplitHostPort(text, allow_port_zero);
  if (!address.ok()) {
    return absl::Status(address.status().code(),
                        absl::StrCat("invalid address ", Quoted(text), ": ",
                                     address.status().message()));
  }
  return address;
}

std::string PortRange::ToString() const {
  return first == last ? absl::StrCat(first) : absl::StrCat(first, "-", last);
}

absl::StatusOr<PortRange> ParsePortRange(absl::string_view text) {
  if (text.empty()) return PortRange{};
  const size_t dash = text.find('-');
  const absl::string_view first_text = text.substr(0, dash);
  const absl::string_view last_text =
      dash == absl::string_view::npos ? first_text : text.substr(dash + 1);
  absl::StatusOr<int> first = ParsePort(first_text, false);
  absl::StatusOr<int> last = ParsePort(last_text, false);
  for (const absl::StatusOr<int>* port : {&first, &last}) {
    if (!port->ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "port range ", Quoted(text), ": ", port->status().message(),
          "; expected FIRST-LAST, e.g. 20000-20099"));
    }
  }
  if (*first > *last) {
    return absl::InvalidArgumentError(absl::StrCat(
        "port range ", Quoted(text), ": ", *first, " is above ", *last));
  }
  return PortRange{*first, *last};
}

}  // namespace cohort
