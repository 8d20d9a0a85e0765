// The rendezvous store's request handling (the coordinator's Store
// service): a sequence of Set, Get and Barrier requests (fuzz_input.h
// framing; the kind byte picks the request, modulo 3). Every callback runs
// exactly once, by the time the store shuts down.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cohort/v1/store.pb.h"
#include "coordinator/store_manager.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cohort;
  int issued = 0;
  int completed = 0;
  {
    coordinator::StoreManager store({.max_keys = 64,
                                     .max_value_bytes = 4096,
                                     .max_key_bytes = 256,
                                     .max_total_bytes = 64 << 10});
    // No expiry thread: the waits still parked end at Shutdown.
    const absl::Time deadline = absl::InfiniteFuture();
    fuzz::ForEachRequest(data, size, [&](uint8_t kind, std::string_view bytes) {
      switch (kind % 3) {
        case 0: {
          v1::StoreSetRequest request;
          if (fuzz::Parse(bytes, &request)) {
            (void)store.Set(request.key(), request.value());
          }
          break;
        }
        case 1: {
          v1::StoreGetRequest request;
          if (!fuzz::Parse(bytes, &request)) break;
          ++issued;
          store.Get(request.key(), deadline,
                    [&](absl::StatusOr<std::string>) { ++completed; });
          break;
        }
        case 2: {
          v1::StoreBarrierRequest request;
          if (!fuzz::Parse(bytes, &request)) break;
          ++issued;
          store.Barrier(request.name(), request.participants(), request.rank(),
                        deadline, [&](absl::Status) { ++completed; });
          break;
        }
      }
    });
    store.Shutdown();
  }
  if (completed != issued) std::abort();  // a wait left hanging
  return 0;
}
