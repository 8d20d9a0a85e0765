// The Jobs service over a real gRPC server: what its slow executor does
// with a call whose caller has given up, what a call that could not be
// saved leaves behind, and how many watches it serves.

#include "coordinator/job_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/synchronization/notification.h"
#include "cohort/v1/job.grpc.pb.h"
#include "common/digest.h"
#include "common/library_files.h"
#include "common/status_macros.h"
#include "coordinator/test_job_spec.h"
#include "rpc/channel.h"
#include "rpc/server.h"
#include "rpc/status_conversion.h"
#include "rpc/stream_pump.h"
#include "tests/testing/wait.h"

namespace cohort::coordinator {
namespace {

class JobServiceTest : public ::testing::Test {
 protected:
  explicit JobServiceTest(int slow_threads = 1)
      : slow_(slow_threads, "test-slow") {}

  void SetUp() override {
    server_.AddService(&service_);
    ASSERT_TRUE(server_.Start().ok());
    connection_ = std::make_unique<rpc::Connection>(server_.DialAddress(),
                                                    rpc::Security{});
    stub_ = v1::Jobs::NewStub(connection_->channel());
    absl::StatusOr<std::string> id = manager_.Submit(
        TestJobSpec(v1::MULTI_WORKER_MIRRORED, 10), absl::Now());
    ASSERT_TRUE(id.ok()) << id.status();
    id_ = *id;
  }
  void TearDown() override {
    pump_.Shutdown();
    server_.Shutdown(absl::Seconds(1));
    slow_.Shutdown();
    fan_out_.Shutdown();
  }

  grpc::Status Cancel(absl::Duration timeout) {
    v1::CancelJobRequest request;
    request.set_job_id(id_);
    v1::CancelJobResponse response;
    return stub_->CancelJob(connection_->NewContext(timeout).get(), request,
                            &response);
  }

  // Submits `spec` with `library` uploaded; the job's id, or why not.
  absl::StatusOr<std::string> Submit(v1::JobSpec spec,
                                     const std::string& library) {
    v1::SubmitJobRequest request;
    spec.set_library_digest(Sha256Hex(library));
    *request.mutable_spec() = std::move(spec);
    request.set_library(library);
    v1::SubmitJobResponse response;
    COHORT_RETURN_IF_ERROR(rpc::FromGrpcStatus(stub_->SubmitJob(
        connection_->NewContext(absl::Seconds(30)).get(), request, &response)));
    return response.job_id();
  }

  // Schedules `fns` on ParameterServer job `job`; their ids, or why not.
  absl::StatusOr<std::vector<int64_t>> Schedule(const std::string& job,
                                                std::vector<std::string> fns) {
    v1::ScheduleRequest request;
    request.set_job_id(job);
    for (const std::string& fn : fns) request.add_calls()->set_fn(fn);
    v1::ScheduleResponse response;
    COHORT_RETURN_IF_ERROR(rpc::FromGrpcStatus(stub_->Schedule(
        connection_->NewContext(absl::Seconds(30)).get(), request, &response)));
    return std::vector<int64_t>(response.ids().begin(), response.ids().end());
  }

  JobManager manager_{*ClusterSpec::FromJson(
                          R"({"cluster": {"chief": ["127.0.0.1:1"],
                                          "worker": ["127.0.0.1:2"],
                                          "ps": ["127.0.0.1:3"]}})"),
                      {}};
  LibraryStore libraries_{::testing::TempDir() + "/job-service-libraries"};
  rpc::Authenticator auth_{std::nullopt};
  Executor slow_;
  Executor fan_out_{1, "test-fan-out"};
  std::atomic<bool> fail_saves_{false};
  // While set, each save waits for it (at most 30 s).
  std::atomic<absl::Notification*> hold_saves_{nullptr};
  std::atomic<int> saves_{0};
  rpc::StreamPump pump_{absl::Milliseconds(10), /*max_streams=*/2};
  JobsService service_{
      &manager_,
      &libraries_,
      &auth_,
      &slow_,
      &fan_out_,
      [this]() -> absl::Status {
        ++saves_;
        if (absl::Notification* hold = hold_saves_) {
          hold->WaitForNotificationWithTimeout(absl::Seconds(30));
        }
        if (fail_saves_) return absl::InternalError("disk full");
        return absl::OkStatus();
      },
      rpc::Security{},
      &pump_};
  rpc::RpcServer server_{{.listen = "127.0.0.1:0"}};
  std::unique_ptr<rpc::Connection> connection_;
  std::unique_ptr<v1::Jobs::Stub> stub_;
  std::string id_;
};

TEST_F(JobServiceTest, ACallWhoseCallerGaveUpInTheQueueIsNotRun) {
  // The executor is busy until the server's deadline for the call has
  // passed. That deadline is the caller's remaining time added to the moment
  // the server read the call, which is before the call was queued: so it is
  // at most `timeout` after the test sees the call in the queue.
  absl::Notification started, release;
  slow_.Post([&] {
    started.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(30));
  });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // Connected first, so that the call's time goes to reaching the queue.
  ASSERT_TRUE(connection_->channel()->WaitForConnected(
      absl::ToChronoTime(absl::Now() + absl::Seconds(30))));
  constexpr absl::Duration kTimeout = absl::Seconds(2);
  grpc::Status gave_up;
  std::thread caller([&] { gave_up = Cancel(kTimeout); });
  const absl::Time limit = absl::Now() + absl::Seconds(30);
  while (slow_.Queued() < 1 && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const absl::Time queued = absl::Now();
  caller.join();
  ASSERT_EQ(slow_.Queued(), 1u) << "the call never reached the queue";
  EXPECT_EQ(gave_up.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // gRPC converts the deadline between clocks; 100 ms covers its rounding.
  absl::SleepFor(queued + kTimeout + absl::Milliseconds(100) - absl::Now());
  release.Notify();
  // Once the queue has drained, the job is still queued, not cancelled.
  absl::Notification drained;
  slow_.Post([&drained] { drained.Notify(); });
  ASSERT_TRUE(drained.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(manager_.Get(id_)->state(), v1::JOB_SUBMITTED);

  // A caller still waiting has it done.
  const grpc::Status cancelled = Cancel(absl::Seconds(30));
  EXPECT_TRUE(cancelled.ok()) << cancelled.error_message();
  EXPECT_EQ(manager_.Get(id_)->state(), v1::JOB_CANCELLED);
}

TEST_F(JobServiceTest, ACancellationThatCouldNotBeSavedIsNotAcknowledged) {
  fail_saves_ = true;
  const grpc::Status unsaved = Cancel(absl::Seconds(30));
  EXPECT_EQ(unsaved.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(unsaved.error_message(),
              ::testing::HasSubstr("is cancelled, but the job table could not "
                                   "be saved (disk full)"));
  EXPECT_EQ(manager_.Get(id_)->state(), v1::JOB_CANCELLED);
  // Cancelling again, once saves work, is acknowledged.
  fail_saves_ = false;
  const grpc::Status saved = Cancel(absl::Seconds(30));
  EXPECT_TRUE(saved.ok()) << saved.error_message();
}

TEST_F(JobServiceTest, CallsWhoseSaveFailedAreTakenBackNotRunWithTheirRetry) {
  // Regression: refused calls stayed queued, and ran besides the client's
  // retry of them.
  v1::JobSpec spec = TestJobSpec(v1::PARAMETER_SERVER, 0);
  spec.mutable_ps()->set_schedule_from_client(true);
  absl::StatusOr<std::string> job = manager_.Submit(spec, absl::Now());
  ASSERT_TRUE(job.ok()) << job.status();

  fail_saves_ = true;
  absl::StatusOr<std::vector<int64_t>> refused = Schedule(*job, {"f", "g"});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("the calls were not accepted (disk full)"));
  v1::GetCallsRequest request;
  request.set_job_id(*job);
  EXPECT_EQ(manager_.GetCalls(request, absl::Now())->scheduled(), 0);

  fail_saves_ = false;
  absl::StatusOr<std::vector<int64_t>> retried = Schedule(*job, {"f", "g"});
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(*retried, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(manager_.GetCalls(request, absl::Now())->scheduled(), 2);
}

class JobServiceTwoThreadsTest : public JobServiceTest {
 protected:
  JobServiceTwoThreadsTest() : JobServiceTest(/*slow_threads=*/2) {}
};

TEST_F(JobServiceTwoThreadsTest, CallsWhoseCallerGaveUpBehindASaveAreNotRun) {
  // Regression: a Schedule that waited past its deadline for another's save
  // scheduled its calls, besides the retry of a client told it failed.
  v1::JobSpec spec = TestJobSpec(v1::PARAMETER_SERVER, 0);
  spec.mutable_ps()->set_schedule_from_client(true);
  absl::StatusOr<std::string> job = manager_.Submit(spec, absl::Now());
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(connection_->channel()->WaitForConnected(
      absl::ToChronoTime(absl::Now() + absl::Seconds(30))));
  // One slow thread holds the schedule lock in a save, the other is busy.
  absl::Notification release_save, busy, release_busy;
  hold_saves_ = &release_save;
  absl::StatusOr<std::vector<int64_t>> first;
  std::thread holder([&] { first = Schedule(*job, {"f"}); });
  ASSERT_TRUE(cohort::testing::WaitUntil([&] { return saves_ == 1; },
                                         absl::Seconds(30)));
  slow_.Post([&] {
    busy.Notify();
    release_busy.WaitForNotificationWithTimeout(absl::Seconds(30));
  });
  ASSERT_TRUE(busy.WaitForNotificationWithTimeout(absl::Seconds(30)));

  // The late call is queued, so the server has read it: its deadline there
  // is at most kTimeout from now. Freed, it waits for the lock.
  constexpr absl::Duration kTimeout = absl::Seconds(2);
  grpc::Status late;
  std::thread caller([&] {
    v1::ScheduleRequest request;
    request.set_job_id(*job);
    request.add_calls()->set_fn("g");
    v1::ScheduleResponse response;
    late = stub_->Schedule(connection_->NewContext(kTimeout).get(), request,
                           &response);
  });
  ASSERT_TRUE(cohort::testing::WaitUntil([&] { return slow_.Queued() == 1; },
                                         absl::Seconds(30)));
  const absl::Time server_deadline_by = absl::Now() + kTimeout;
  release_busy.Notify();
  caller.join();
  EXPECT_EQ(late.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  absl::SleepFor(server_deadline_by - absl::Now());  // passed there too

  release_save.Notify();
  holder.join();
  ASSERT_TRUE(first.ok()) << first.status();
  slow_.Shutdown();  // runs what is queued, then joins
  v1::GetCallsRequest calls;
  calls.set_job_id(*job);
  EXPECT_EQ(manager_.GetCalls(calls, absl::Now())->scheduled(), 1);
  EXPECT_EQ(saves_, 1);
}

TEST_F(JobServiceTest, ARetriedSubmissionMakesOneJobAndAnUnsavedOneNone) {
  v1::JobSpec spec = TestJobSpec(v1::MULTI_WORKER_MIRRORED, 10);
  spec.set_submission_id("nightly-42");
  fail_saves_ = true;
  // Refused, not lost: INTERNAL, which the client does not send again.
  absl::StatusOr<std::string> unsaved = Submit(spec, "library bytes");
  EXPECT_EQ(unsaved.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(unsaved.status().message(),
              ::testing::HasSubstr("the job was not accepted (disk full)"));
  fail_saves_ = false;
  absl::StatusOr<std::string> made = Submit(spec, "library bytes");
  ASSERT_TRUE(made.ok()) << made.status();
  // The answer lost, the client sends it again: the same job.
  absl::StatusOr<std::string> again = Submit(spec, "library bytes");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *made);

  int live = 0;
  for (const v1::JobStatus& job : manager_.List()) {
    if (job.spec().submission_id() == "nightly-42") {
      ++live;
      EXPECT_EQ(job.job_id(), *made);
    }
  }
  EXPECT_EQ(live, 1) << "the unsaved submission kept its id, or the retry "
                        "made a second job";
  EXPECT_EQ(manager_.List().size(), 3u);  // SetUp's, unsaved, made
}

TEST_F(JobServiceTest, ASubmissionTheClusterCannotRunLeavesNoLibraryBehind) {
  v1::JobSpec spec = TestJobSpec(v1::MULTI_WORKER_MIRRORED, 10);
  spec.set_eval_fn("eval");
  spec.set_eval_dataset_fn("eval_data");
  const std::string library = "a library for a cluster with an evaluator";
  absl::StatusOr<std::string> refused = Submit(spec, library);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("eval_fn needs the cluster's evaluator"));
  EXPECT_FALSE(std::filesystem::exists(LibraryPath(
      ::testing::TempDir() + "/job-service-libraries", Sha256Hex(library))));
}

TEST_F(JobServiceTest, AFinishThatCouldNotBeSavedHoldsAndSavesWhenRepeated) {
  v1::JobSpec spec = TestJobSpec(v1::PARAMETER_SERVER, 0);
  spec.mutable_ps()->set_schedule_from_client(true);
  absl::StatusOr<std::string> job = manager_.Submit(spec, absl::Now());
  ASSERT_TRUE(job.ok()) << job.status();
  v1::FinishJobRequest request;
  request.set_job_id(*job);
  v1::FinishJobResponse response;
  fail_saves_ = true;
  const grpc::Status unsaved = stub_->FinishJob(
      connection_->NewContext(absl::Seconds(30)).get(), request, &response);
  EXPECT_EQ(unsaved.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(unsaved.error_message(),
              ::testing::HasSubstr(absl::StrCat(
                  "job ", *job,
                  " has finished scheduling, but the job table could not be "
                  "saved (disk full)")));
  // It holds: no more calls are taken.
  EXPECT_EQ(Schedule(*job, {"f"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  fail_saves_ = false;
  const grpc::Status saved = stub_->FinishJob(
      connection_->NewContext(absl::Seconds(30)).get(), request, &response);
  EXPECT_TRUE(saved.ok()) << saved.error_message();
}

TEST_F(JobServiceTest, WatchesBeyondTheLimitAreRefusedUntilOneEnds) {
  v1::GetJobRequest request;
  request.set_job_id(id_);
  // Opens a watch; whether it read the job's status, and the watch.
  struct Watch {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<v1::JobStatus>> reader;
    bool read = false;
  };
  auto watch = [&] {
    Watch opened{.context = connection_->NewContext(absl::Seconds(30))};
    opened.reader = stub_->WatchJob(opened.context.get(), request);
    v1::JobStatus status;
    opened.read = opened.reader->Read(&status) && status.job_id() == id_;
    return opened;
  };
  // Two watches of a job that does not end stay open.
  std::vector<Watch> open;
  for (int i = 0; i < 2; ++i) {
    open.push_back(watch());
    ASSERT_TRUE(open.back().read)
        << open.back().reader->Finish().error_message();
  }
  Watch third = watch();
  EXPECT_FALSE(third.read);
  const grpc::Status refused = third.reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              ::testing::HasSubstr("2 streams (watches, followed logs) are "
                                   "open, the most this server serves"));

  // Once one ends, and the server has seen it go, a watch is taken again.
  open[0].context->TryCancel();
  (void)open[0].reader->Finish();
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        Watch again = watch();
        again.context->TryCancel();
        (void)again.reader->Finish();
        return again.read;
      },
      absl::Seconds(30)));
  open[1].context->TryCancel();
  (void)open[1].reader->Finish();
}

}  // namespace
}  // namespace cohort::coordinator
