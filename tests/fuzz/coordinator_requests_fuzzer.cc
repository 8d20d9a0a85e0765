// The coordinator's request handling, as its services call it: a sequence
// of Register, Heartbeat, Deregister, SubmitJob, agent Sync and RunClosures
// requests (fuzz_input.h framing; the kind byte picks the request, modulo
// 6), each parsed from bytes, with the job manager ticking in between.

#include <cstdint>
#include <string_view>

#include "coordinator/cluster_manager.h"
#include "coordinator/job_loop.h"
#include "coordinator/job_manager.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cohort;
  using namespace cohort::coordinator;
  const ClusterSpec spec = *ClusterSpec::FromJson(fuzz::kCluster);
  absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  ClusterManager cluster(spec, {}, now);
  JobManager jobs(spec, {});
  fuzz::ForEachRequest(data, size, [&](uint8_t kind, std::string_view bytes) {
    now += absl::Milliseconds(100);
    switch (kind % 6) {
      case 0: {
        v1::RegisterRequest request;
        if (fuzz::Parse(bytes, &request))
          (void)cluster.Register(request.report(), now);
        break;
      }
      case 1: {
        v1::HeartbeatRequest request;
        if (fuzz::Parse(bytes, &request)) (void)cluster.Heartbeat(request, now);
        break;
      }
      case 2: {
        v1::DeregisterRequest request;
        if (fuzz::Parse(bytes, &request))
          (void)cluster.Deregister(request, now);
        break;
      }
      case 3: {
        v1::JobSpec request;
        if (fuzz::Parse(bytes, &request)) (void)jobs.Submit(request, now);
        break;
      }
      case 4: {
        v1::AgentJobReport request;
        if (fuzz::Parse(bytes, &request)) (void)jobs.Sync(request, now);
        break;
      }
      case 5: {
        v1::ClosureRequest request;
        if (fuzz::Parse(bytes, &request)) (void)jobs.RunClosures(request, now);
        break;
      }
    }
    jobs.Tick(AgentViews(cluster, now), now);
    (void)cluster.Snapshot(now);
    (void)jobs.List();
  });
  return 0;
}
