// The ps snapshot reader, as a restarting ps task meets its snapshot file,
// then the restore of what it decoded into a shard. The input is used
// twice: as a whole file (the header's checks), and as the payload of a
// file with a valid header (the payload's parse and the restore, which a
// checksum would otherwise keep the fuzzer from reaching).

#include <cstdint>
#include <string>
#include <string_view>

#include "common/digest.h"
#include "ps_server/snapshot.h"
#include "ps_server/variable_store.h"

namespace {

void DecodeAndRestore(absl::string_view file) {
  const absl::StatusOr<cohort::v1::PsSnapshot> snapshot =
      cohort::ps::DecodeSnapshotFile(file);
  if (!snapshot.ok()) return;
  cohort::ps::VariableStore store({.shard_id = snapshot->shard_id(),
                                   .max_shard_bytes = int64_t{16} << 20,
                                   .max_workers = 8});
  (void)store.Restore(*snapshot);
}

// The header snapshot.h lays out, around `payload`.
std::string WithHeader(std::string_view payload) {
  std::string file = "COHORTPS";
  auto little_endian = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) file.push_back(char(value >> (8 * i)));
  };
  little_endian(1, 4);
  little_endian(payload.size(), 8);
  file += cohort::Sha256Hex(payload);
  file += payload;
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  DecodeAndRestore(absl::string_view(bytes.data(), bytes.size()));
  DecodeAndRestore(WithHeader(bytes));
  return 0;
}
