// The record-file reader: any file gives its records or DATA_LOSS naming the
// offset, never a crash or an allocation the file does not justify.

#include <cstdint>
#include <string>

#include "cohort/dataset.h"
#include "tests/fuzz/scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = cohort::fuzz::ScratchPath("records");
  cohort::fuzz::WriteScratch(path, data, size);
  (void)cohort::ReadRecordFile(path);
  return 0;
}
