#include "coordinator/job_loop.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/steady_time.h"
#include "spdlog/spdlog.h"

namespace cohort::coordinator {

namespace {
// How often the libraries no job uses are looked for.
constexpr absl::Duration kLibrarySweep = absl::Minutes(10);
}  // namespace

std::vector<AgentView> AgentViews(const ClusterManager& cluster,
                                  absl::Time now) {
  std::vector<AgentView> views;
  for (const v1::TaskStatus& task : cluster.Snapshot(now)) {
    if (task.task().type() != kChief && task.task().type() != kWorker &&
        task.task().type() != kPs) {
      continue;
    }
    AgentView view;
    view.task = TaskId{task.task().type(), task.task().index()};
    view.state = task.state();
    view.num_devices = task.devices_size();
    view.cuda = task.devices_size() > 0;
    for (const v1::Device& device : task.devices()) {
      if (device.kind() != v1::Device::CUDA) view.cuda = false;
      view.gpu_uuids.push_back(device.uuid());
    }
    for (const std::string& feature : task.features()) {
      if (feature.rfind("nccl", 0) == 0) view.nccl = true;
    }
    view.last_error = task.last_error();
    views.push_back(std::move(view));
  }
  return views;
}

JobLoop::JobLoop(const ClusterManager* cluster, JobManager* jobs,
                 StoreManager* store, std::string table_path,
                 LibraryStore* libraries, absl::Duration period)
    : cluster_(cluster),
      jobs_(jobs),
      store_(store),
      libraries_(libraries),
      next_library_sweep_(SteadyNow() + kLibrarySweep),
      table_path_(std::move(table_path)),
      period_(period) {}

JobLoop::~JobLoop() { Shutdown(); }

absl::Status JobLoop::Restore() {
  if (table_path_.empty()) return absl::OkStatus();
  // Only a table that is not there is no table: one that cannot be looked
  // at (EIO, a stale mount) would otherwise be saved over by an empty one.
  struct stat info;
  if (lstat(table_path_.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(
        table_path_,
        ": cannot look at the saved job table: ", std::strerror(errno)));
  }
  absl::StatusOr<std::string> text = ReadFile(table_path_);
  if (!text.ok()) {
    return absl::DataLossError(absl::StrCat("cannot read the saved job table: ",
                                            text.status().message()));
  }
  absl::Status restored = jobs_->Restore(*text, SteadyNow());
  if (!restored.ok()) {
    return absl::DataLossError(
        absl::StrCat(table_path_, ": ", restored.message()));
  }
  spdlog::info("restored the job table from {}", table_path_);
  return absl::OkStatus();
}

void JobLoop::Start() {
  thread_ = std::thread([this] { Run(); });
}

void JobLoop::Shutdown() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  (void)Save(SteadyNow(), /*force=*/true);
}

void JobLoop::SaveFinal() {
  const absl::Time now = SteadyNow();
  jobs_->SettleFinished(AgentViews(*cluster_, now), now);
  (void)Save(now, /*force=*/true);
}

void JobLoop::Run() {
  while (!stop_.WaitForNotificationWithTimeout(period_)) {
    const absl::Time now = SteadyNow();
    jobs_->Tick(AgentViews(*cluster_, now), now);
    ForgetRetired(now);
    (void)Save(now, /*force=*/false);
    RemoveUnusedLibraries(now);
  }
}

void JobLoop::RemoveUnusedLibraries(absl::Time now) {
  if (libraries_ == nullptr || now < next_library_sweep_) return;
  next_library_sweep_ = now + kLibrarySweep;
  // Against the files' times of use, which are on the wall clock.
  for (const std::string& removed : libraries_->RemoveUnused(
           jobs_->LibraryDigests(), absl::Now(), kLibraryGrace)) {
    spdlog::info("removed step library {}: no job in the table uses it",
                 removed);
  }
}

void JobLoop::ForgetRetired(absl::Time now) {
  // Longer than an agent takes to notice that its attempt ended.
  constexpr absl::Duration kSecondSweep = absl::Seconds(30);
  for (std::string& prefix : jobs_->TakeRetiredGroups()) {
    if (store_ == nullptr) continue;
    store_->ErasePrefix(prefix);
    second_sweep_.emplace_back(now + kSecondSweep, std::move(prefix));
  }
  while (!second_sweep_.empty() && second_sweep_.front().first <= now) {
    store_->ErasePrefix(second_sweep_.front().second);
    second_sweep_.pop_front();
  }
}

absl::Status JobLoop::SaveNow() { return Save(SteadyNow(), /*force=*/true); }

absl::Status JobLoop::Save(absl::Time now, bool force) {
  if (table_path_.empty()) return absl::OkStatus();
  absl::MutexLock lock(&save_mu_);
  absl::StatusOr<std::optional<std::string>> table =
      jobs_->TakeSnapshotIfChanged(
          now, force ? absl::ZeroDuration() : absl::Seconds(2));
  if (!table.ok()) {
    spdlog::error("cannot save the job table (will retry): {}",
                  table.status().ToString());
    return table.status();
  }
  if (!table->has_value()) return absl::OkStatus();
  absl::Status saved = WriteFileAtomically(table_path_, **table);
  if (!saved.ok()) {
    spdlog::error("cannot save the job table (will retry): {}",
                  saved.ToString());
    jobs_->MarkUnsaved();
  }
  return saved;
}

}  // namespace cohort::coordinator
