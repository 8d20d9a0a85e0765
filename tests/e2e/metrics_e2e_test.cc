// /metrics end to end: a real coordinator with --metrics_listen launches its
// tasks with metrics of their own; a real Prometheus server (Debian's
// `prometheus`) finds them through the coordinator's /sd page and scrapes
// them while a job trains.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/host_info.h"
#include "nlohmann/json.hpp"
#include "tests/testing/http_get.h"
#include "tests/testing/jobs.h"
#include "tests/testing/test_cluster.h"

namespace cohort::testing {
namespace {

using ::testing::HasSubstr;

// The value of a Prometheus instant query whose result is one sample;
// nullopt when it has none (yet).
std::optional<double> QueryOne(const std::string& prometheus,
                               const std::string& query) {
  httplib::Client client("http://" + prometheus);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  httplib::Params params{{"query", query}};
  httplib::Result result =
      client.Get("/api/v1/query", params, httplib::Headers{});
  if (!result || result->status != 200) return std::nullopt;
  const nlohmann::json body = nlohmann::json::parse(result->body, nullptr,
                                                    /*allow_exceptions=*/false);
  if (!body.is_object() || body.value("status", "") != "success") {
    return std::nullopt;
  }
  const nlohmann::json& samples = body["data"]["result"];
  if (!samples.is_array() || samples.size() != 1) return std::nullopt;
  return std::strtod(samples[0]["value"][1].get<std::string>().c_str(),
                     nullptr);
}

std::string FindPrometheus() {
  for (const char* path :
       {"/usr/bin/prometheus", "/usr/local/bin/prometheus"}) {
    if (std::filesystem::exists(path)) return path;
  }
  return "";
}

class MetricsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<SuiteCluster>> cluster = SuiteCluster::Start(
        /*workers=*/1, /*ps=*/1,
        {"--cpu_devices=2", "--metrics_listen=127.0.0.1:0"});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    state_ = &cluster_->state;
    client_ = cluster_->client.get();
  }
  static void TearDownTestSuite() { delete cluster_; }

  static inline SuiteCluster* cluster_ = nullptr;
  static inline const v1::ClusterState* state_ = nullptr;
  static inline Client* client_ = nullptr;
};

TEST_F(MetricsE2eTest, EveryDaemonServesMetricsAndTheCoordinatorListsThem) {
  const std::string coordinator = state_->coordinator_metrics_address();
  ASSERT_FALSE(coordinator.empty());
  const nlohmann::json targets = nlohmann::json::parse(
      HttpGet(coordinator, "/sd"), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(targets.is_array()) << targets;
  std::set<std::string> tasks;
  for (const nlohmann::json& group : targets) {
    const std::string task = group["labels"]["task"];
    tasks.insert(task);
    const std::string address = group["targets"][0];
    int status = 0;
    const std::string text = HttpGet(address, "/metrics", &status);
    EXPECT_EQ(status, 200) << task;
    if (task == "coordinator") {
      EXPECT_THAT(text, HasSubstr("cohort_task_state{task=\"worker:0\","
                                  "state=\"ready\"} 1\n"));
      EXPECT_THAT(text, HasSubstr("# TYPE cohort_jobs gauge\n"));
      // The admin call that found this address was timed.
      EXPECT_THAT(text, HasSubstr("cohort_rpc_server_duration_seconds_count{"
                                  "method=\"/cohort.v1.Admin/"
                                  "GetClusterState\",code=\"OK\"}"));
    } else {
      EXPECT_THAT(text, HasSubstr("cohort_task_start_time_seconds{task=\"" +
                                  task + "\""));
    }
    if (task == "ps:0") {
      EXPECT_THAT(text, HasSubstr("# TYPE cohort_ps_updates_total counter\n"));
    }
  }
  EXPECT_EQ(tasks, (std::set<std::string>{"coordinator", "chief:0", "worker:0",
                                          "ps:0"}));
  for (const v1::TaskStatus& task : state_->tasks()) {
    EXPECT_FALSE(task.metrics_address().empty()) << task.ShortDebugString();
  }
}

TEST_F(MetricsE2eTest, ANotFoundPageSaysSo) {
  int status = 0;
  HttpGet(state_->coordinator_metrics_address(), "/nothing", &status);
  EXPECT_EQ(status, 404);
}

TEST_F(MetricsE2eTest, PrometheusScrapesAJobAsItTrains) {
  const std::string prometheus = FindPrometheus();
  if (prometheus.empty()) {
    GTEST_SKIP() << "prometheus is not installed (tools/setup.sh installs it)";
  }
  const absl::StatusOr<int> port = PickUnusedPort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string web = absl::StrCat("127.0.0.1:", *port);
  const std::string config = cluster_->dir.Write(
      "prometheus.yml",
      absl::StrCat("global:\n"
                   "  scrape_interval: 1s\n"
                   "  scrape_timeout: 1s\n"
                   "scrape_configs:\n"
                   "  - job_name: cohort\n"
                   "    honor_labels: true\n"
                   "    http_sd_configs:\n"
                   "      - url: http://",
                   state_->coordinator_metrics_address(), "/sd\n",
                   "        refresh_interval: 1s\n"));
  absl::StatusOr<Subprocess> server = Subprocess::Spawn(
      {.argv = {prometheus, "--config.file=" + config,
                "--storage.tsdb.path=" + cluster_->dir.path() + "/tsdb",
                "--web.listen-address=" + web, "--log.level=warn"},
       .output_file = cluster_->dir.path() + "/prometheus.log"});
  ASSERT_TRUE(server.ok()) << server.status();
  struct Stop {
    Subprocess& s;
    ~Stop() { s.Stop(absl::Seconds(10)); }
  } stop{*server};

  // A job long enough to be scraped many times; cancelled once seen.
  JobSpec spec = SlowLinearJob(StrategyKind::kMultiWorkerMirrored, 100000,
                               /*step_sleep_ms=*/5);
  absl::StatusOr<std::string> id = client_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string step_query =
      absl::StrCat("cohort_job_step{job=\"", *id, "\"}");

  // The job's step, as Prometheus stored it, rises.
  std::optional<double> first;
  std::optional<double> later;
  const bool rose = WaitUntil(
      [&] {
        const std::optional<double> step = QueryOne(web, step_query);
        if (!step.has_value() || *step <= 0) return false;
        if (!first.has_value()) first = step;
        later = step;
        return *later > *first;
      },
      absl::Seconds(90), absl::Milliseconds(250));
  EXPECT_TRUE(rose) << "cohort_job_step: first " << first.value_or(-1)
                    << ", later " << later.value_or(-1) << "\n"
                    << ReadFile(cluster_->dir.path() + "/prometheus.log")
                           .value_or("(no log)");
  std::printf("cohort_job_step rose from %.0f to %.0f\n", first.value_or(-1),
              later.value_or(-1));

  // The agents' collective histograms fill: every step all-reduces.
  std::optional<double> allreduces;
  EXPECT_TRUE(WaitUntil(
      [&] {
        allreduces = QueryOne(
            web,
            "sum(cohort_collective_duration_seconds_count{op=\"allreduce\"})");
        return allreduces.value_or(0) > 0;
      },
      absl::Seconds(30), absl::Milliseconds(250)));
  const std::optional<double> in_buckets = QueryOne(
      web,
      "sum(cohort_collective_size_bytes_bucket{op=\"allreduce\",le=\"+Inf\"})");
  EXPECT_GT(in_buckets.value_or(0), 0);
  std::printf("all-reduces scraped: %.0f\n", allreduces.value_or(-1));

  // Every target is up (one scrape of a busy machine may be late).
  EXPECT_TRUE(WaitUntil(
      [&] { return QueryOne(web, "count(up == 1)").value_or(0) == 4; },
      absl::Seconds(30), absl::Milliseconds(250)));
  EXPECT_TRUE(client_->CancelJob(*id).ok());
}

}  // namespace
}  // namespace cohort::testing
