// A ps shard's request handling, as its service calls it: a sequence of
// CreateVariables, Push and Pull requests (fuzz_input.h framing; the kind
// byte picks the request, modulo 3), each parsed from bytes. A Push request
// stands for a whole stream: its chunks go through one PushAssembler.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ps_server/push_assembler.h"
#include "ps_server/variable_store.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

constexpr int64_t kMaxChunkBytes = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cohort;
  // Small enough that no create can exhaust the fuzzer's memory.
  ps::VariableStore store(
      {.shard_id = 0, .max_shard_bytes = int64_t{16} << 20, .max_workers = 8});
  fuzz::ForEachRequest(data, size, [&](uint8_t kind, std::string_view bytes) {
    switch (kind % 3) {
      case 0: {
        v1::CreateVariablesRequest request;
        if (!fuzz::Parse(bytes, &request)) break;
        (void)store.Create(request.job_id(), request.job_sequence(),
                           request.variables());
        break;
      }
      case 1: {
        v1::PushRequest request;
        if (!fuzz::Parse(bytes, &request)) break;
        ps::PushAssembler push(&store, kMaxChunkBytes);
        if (!push.Begin(request.job_id(), request.worker(),
                        request.num_variables())
                 .ok()) {
          break;
        }
        bool ok = true;
        for (v1::TensorChunk& chunk : *request.mutable_chunks()) {
          if (!push.Add(&chunk).ok()) {
            ok = false;
            break;
          }
        }
        if (ok) (void)push.End();
        break;
      }
      case 2: {
        v1::PullRequest request;
        if (!fuzz::Parse(bytes, &request)) break;
        const std::vector<std::string> names(request.names().begin(),
                                             request.names().end());
        (void)store.Pull(request.job_id(), names, kMaxChunkBytes);
        break;
      }
    }
  });
  int64_t generation = 0;
  (void)store.Capture(&generation);
  v1::PsInfo info;
  store.FillInfo(&info);
  return 0;
}
