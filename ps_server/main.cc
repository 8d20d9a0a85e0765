// cohort-ps: one per ps task. Registers with the coordinator, heartbeats,
// and serves its variable shard.

#include "ps_server/ps_service.h"
#include "rpc/task_runtime.h"

namespace {

constexpr char kUsage[] =
    "a Cohort parameter server (one per ps task).\n"
    "\n"
    "  cohort-ps --task=ps:0 --listen=10.0.0.3:2222 "
    "--coordinator=10.0.0.1:7070\n"
    "\n"
    "Exit codes: 0 stopped by a signal, 1 runtime failure, 2 bad "
    "configuration or refused by the coordinator.";

}  // namespace

int main(int argc, char** argv) {
  using namespace cohort;
  rpc::TaskConfig config =
      rpc::InitTaskDaemon(argc, argv, "ps", kUsage, {std::string(kPs)});
  rpc::TaskRuntime runtime("ps", std::move(config));
  ps::PsService service(&runtime);
  return runtime.Run({&service}, [&service] { return service.Report(); });
}
