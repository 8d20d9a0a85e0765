#pragma once

// Content digests: step libraries are stored and fetched by theirs.

#include <string>
#include <string_view>

namespace cohort {

// The SHA-256 of `data` as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view data);

// Whether `digest` has that form (so it is safe in a file name).
bool IsSha256Hex(std::string_view digest);

}  // namespace cohort
