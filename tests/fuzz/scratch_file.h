#pragma once

// A file of this process's own under $TMPDIR (or /tmp), for fuzz targets
// whose readers take a path: each input is written there, then read back.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace cohort::fuzz {

inline std::string ScratchPath(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
         "/cohort-fuzz-" + std::to_string(getpid()) + "-" + name;
}

inline void WriteScratch(const std::string& path, const uint8_t* data,
                         size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data),
            static_cast<std::streamsize>(size));
}

}  // namespace cohort::fuzz
