#pragma once

// CRC-32 (zlib's: the reflected polynomial 0xEDB88320), the check code of
// every file Cohort writes: record files and checkpoints.

#include <cstdint>
#include <string_view>

namespace cohort {

uint32_t Crc32(std::string_view data);

}  // namespace cohort
