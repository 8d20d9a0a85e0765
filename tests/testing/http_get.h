#pragma once

// Plain HTTP GETs for tests of the daemons' /metrics pages (cpp-httplib).

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

namespace cohort::testing {

// GET http://address/path, with "Authorization: Bearer <bearer>" unless
// it is empty: the body, or "" with a test failure.
inline std::string HttpGet(const std::string& address, const std::string& path,
                           int* status = nullptr,
                           const std::string& bearer = "") {
  httplib::Client client("http://" + address);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  httplib::Headers headers;
  if (!bearer.empty()) headers.emplace("Authorization", "Bearer " + bearer);
  httplib::Result result = client.Get(path.c_str(), headers);
  if (!result) {
    ADD_FAILURE() << "GET http://" << address << path << ": "
                  << httplib::to_string(result.error());
    return "";
  }
  if (status != nullptr) *status = result->status;
  return result->body;
}

// The value of the sample `series` (name and labels exactly as rendered,
// e.g. `cohort_x{a="b"}`) in a text exposition; nullopt when absent.
inline std::optional<double> SampleValue(const std::string& exposition,
                                         const std::string& series) {
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return std::nullopt;
}

}  // namespace cohort::testing
