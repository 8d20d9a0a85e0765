#include "common/crc32.h"

#include <zlib.h>

#include <algorithm>

namespace cohort {

uint32_t Crc32(std::string_view data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths; feed large spans in pieces.
  while (!data.empty()) {
    const size_t n = std::min<size_t>(data.size(), size_t{1} << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data()),
                static_cast<uInt>(n));
    data.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace cohort
