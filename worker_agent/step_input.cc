#include "worker_agent/step_input.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "worker_agent/user_code.h"

namespace cohort::agent {

struct StepInput::Pool {
  absl::Mutex mu;
  // Device buffers free for reuse, per local replica.
  std::vector<std::vector<DeviceBuffer>> free ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<StepInput>> StepInput::Create(
    std::unique_ptr<InputPipeline> indexed,
    std::unique_ptr<StreamPipeline> stream, Options options) {
  if ((indexed == nullptr) == (stream == nullptr)) {
    return absl::InvalidArgumentError(
        "step input: needs exactly one of a data set and a stream");
  }
  if (options.prefetch_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DatasetOptions::prefetch_steps is ",
                     options.prefetch_steps, "; it must be 0 or more"));
  }
  if (options.to_device && options.prefetch_steps == 0) {
    return absl::InvalidArgumentError(
        "DatasetOptions::prefetch_to_device copies on the input thread, so "
        "prefetch_steps must be at least 1");
  }
  if (options.devices.empty()) {
    return absl::InvalidArgumentError("step input: no local replicas");
  }
  return std::unique_ptr<StepInput>(
      new StepInput(std::move(indexed), std::move(stream), std::move(options)));
}

StepInput::StepInput(std::unique_ptr<InputPipeline> indexed,
                     std::unique_ptr<StreamPipeline> stream, Options options)
    : indexed_(std::move(indexed)),
      stream_(std::move(stream)),
      options_(std::move(options)),
      description_(absl::StrCat(
          indexed_ != nullptr ? indexed_->description()
                              : stream_->description(),
          options_.prefetch_steps > 0
              ? absl::StrCat("; ", options_.prefetch_steps,
                             options_.prefetch_steps == 1 ? " step" : " steps",
                             " prefetched",
                             options_.to_device ? " to each replica's device"
                                                : "")
              : "")),
      pool_(std::make_shared<Pool>()),
      held_(options_.devices.size(), -1) {
  absl::MutexLock lock(&pool_->mu);
  pool_->free.resize(options_.devices.size());
}

StepInput::~StepInput() { Shutdown(); }

absl::Status StepInput::Begin(int64_t first_step) {
  absl::MutexLock lock(&mu_);
  if (begun_) {
    if (first_step == first_step_) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(
        "replicas of one agent resume at steps ", first_step_, " and ",
        first_step));
  }
  begun_ = true;
  first_step_ = next_ = first_step;
  std::fill(held_.begin(), held_.end(), first_step - 1);
  if (options_.prefetch_steps > 0) thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void StepInput::Abort(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = status;
}

void StepInput::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  prepared_.clear();
  for (const Device& d : copy_devices_) {
    if (d.is_cuda()) DestroyStream(d.index, d.stream);
  }
  copy_devices_.clear();
}

bool StepInput::MayProduce() const {
  if (stopping_ || !error_.ok() || ended_at_.has_value() || producing_ ||
      next_ >= options_.end_step) {
    return false;
  }
  const int64_t oldest = *std::min_element(held_.begin(), held_.end());
  return next_ - oldest <= options_.prefetch_steps;
}

void StepInput::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto work = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return stopping_ || MayProduce();
    };
    mu_.Await(absl::Condition(&work));
    if (stopping_) return;
    ProduceOne();
  }
}

void StepInput::ProduceOne() {
  const int64_t step = next_;
  producing_ = true;
  mu_.Unlock();
  absl::StatusOr<std::optional<std::vector<Batch>>> cut =
      CallUserCode([&] { return Cut(step); },
                   absl::StrCat("the job's dataset, at step ", step, ","));
  absl::StatusOr<std::vector<DeviceBuffer>> copies = std::vector<DeviceBuffer>();
  if (cut.ok() && cut->has_value() && options_.to_device) {
    copies = CopyToDevices(**cut);
  }
  mu_.Lock();
  producing_ = false;
  if (!cut.ok() || !copies.ok()) {
    if (error_.ok()) error_ = !cut.ok() ? cut.status() : copies.status();
    return;
  }
  if (!cut->has_value()) {
    ended_at_ = step;
    return;
  }
  Prepared& prepared = prepared_[step];
  prepared.batches = **std::move(cut);
  prepared.copies = *std::move(copies);
  next_ = step + 1;
}

absl::StatusOr<std::optional<std::vector<Batch>>> StepInput::Cut(
    int64_t step) {
  if (indexed_ != nullptr) return indexed_->BatchesForStep(step);
  // Only this call cuts, so the stream needs no lock of its own.
  if (stream_->next_step() != step) {
    if (absl::Status skipped =
            stream_->SkipTo(step,
                            [this, step](int64_t done, int64_t total) {
                              NoteSkipped(step, done, total);
                            });
        !skipped.ok()) {
      return skipped;
    }
  }
  return stream_->NextStep();
}

void StepInput::NoteSkipped(int64_t step, int64_t done, int64_t total) {
  absl::MutexLock lock(&mu_);
  skip_moved_ = absl::Now();
  if (skip_moved_ - skip_logged_ >= absl::Seconds(10) || done == total) {
    skip_logged_ = skip_moved_;
    spdlog::info(
        "input: resuming the stream at step {}: passed over {} of {} "
        "elements",
        step, done, total);
  }
}

absl::StatusOr<std::vector<DeviceBuffer>> StepInput::CopyToDevices(
    std::vector<Batch>& batches) {
  if (copy_devices_.empty()) {
    for (const Device& d : options_.devices) {
      Device copy = d;
      copy.stream = nullptr;
      if (d.is_cuda()) {
        absl::StatusOr<void*> stream = CreateStream(d.index);
        if (!stream.ok()) return stream.status();
        copy.stream = *stream;
      }
      copy_devices_.push_back(copy);
    }
  }
  std::vector<DeviceBuffer> copies;
  std::string packed;
  for (size_t r = 0; r < batches.size(); ++r) {
    const Batch& batch = batches[r];
    const size_t element = batch.size() > 0 ? batch.element(0).size() : 0;
    packed.clear();
    packed.reserve(element * batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch.element(i).size() != element) {
        return absl::InvalidArgumentError(absl::StrCat(
            "prefetch_to_device packs a batch densely, and its element ", i,
            " has ", batch.element(i).size(), " bytes where element 0 has ",
            element));
      }
      packed.append(batch.element(i));
    }
    DeviceBuffer buffer;
    {
      absl::MutexLock lock(&pool_->mu);
      std::vector<DeviceBuffer>& free = pool_->free[r];
      if (!free.empty() && free.back().bytes() >= packed.size()) {
        buffer = std::move(free.back());
        free.pop_back();
      }
    }
    if (buffer.data() == nullptr) {
      absl::StatusOr<DeviceBuffer> made =
          DeviceBuffer::Allocate(copy_devices_[r], std::max<size_t>(1, packed.size()));
      if (!made.ok()) return made.status();
      buffer = *std::move(made);
    }
    if (absl::Status s = CopyToDevice(copy_devices_[r], buffer.data(),
                                      packed.data(), packed.size());
        !s.ok()) {
      return s;
    }
    copies.push_back(std::move(buffer));
  }
  return copies;
}

bool StepInput::Ready(int64_t step) const {
  return !error_.ok() || prepared_.contains(step) ||
         (ended_at_.has_value() && *ended_at_ <= step) ||
         step >= options_.end_step;
}

absl::StatusOr<bool> StepInput::AwaitStep(int64_t step) {
  if (!begun_) {
    return absl::FailedPreconditionError("step input: Begin() was not called");
  }
  absl::Time deadline = absl::Now() + options_.wait_limit;
  while (!Ready(step)) {
    if (step < next_) {
      return absl::InternalError(absl::StrCat(
          "step input: step ", step, " was asked for after every replica took it"));
    }
    if (options_.prefetch_steps == 0 && !producing_) {
      ProduceOne();
      continue;
    }
    // Without prefetch, a replica also wakes to cut the step itself.
    auto wake = [this, step]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return Ready(step) || (options_.prefetch_steps == 0 && !producing_);
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&wake), deadline)) {
      // A skip that is still moving is waited for, however long it takes.
      if (skip_moved_ + options_.wait_limit > absl::Now()) {
        deadline = skip_moved_ + options_.wait_limit;
        continue;
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "the input of step ", step, " was not ready after ",
          absl::FormatDuration(options_.wait_limit),
          " without progress; the data set or stream is not producing"));
    }
  }
  // A step cut before the input failed is still served: the error is for
  // the first step it cost.
  if (prepared_.contains(step)) return true;
  if (!error_.ok()) return error_;
  return false;
}

absl::StatusOr<bool> StepInput::HasStep(int64_t step) {
  absl::MutexLock lock(&mu_);
  return AwaitStep(step);
}

absl::StatusOr<std::optional<Batch>> StepInput::Take(
    int local, int64_t step, const Device& replica_device) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<bool> ready = AwaitStep(step);
  if (!ready.ok()) return ready.status();
  held_[static_cast<size_t>(local)] = step;
  if (!*ready) return std::nullopt;
  auto it = prepared_.find(step);
  Prepared& prepared = it->second;
  Batch batch = prepared.batches[static_cast<size_t>(local)];
  if (options_.to_device) {
    auto buffer = std::shared_ptr<DeviceBuffer>(
        new DeviceBuffer(
            std::move(prepared.copies[static_cast<size_t>(local)])),
        [pool = pool_, local, replica_device](DeviceBuffer* b) {
          // The step's kernels may still read it: reuse it only after they
          // have run. A failed sync leaves the buffer to be freed instead.
          if (Synchronize(replica_device).ok()) {
            absl::MutexLock lock(&pool->mu);
            pool->free[static_cast<size_t>(local)].push_back(std::move(*b));
          }
          delete b;
        });
    batch.set_device_copy(buffer->data(), batch.size() > 0
                                              ? batch.element(0).size()
                                              : 0,
                          buffer);
  }
  if (++prepared.taken == static_cast<int>(held_.size())) prepared_.erase(it);
  return batch;
}

}  // namespace cohort::agent
