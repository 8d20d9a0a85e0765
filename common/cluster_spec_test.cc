#include "common/cluster_spec.h"

#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cohort {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct MalformedCase {
  std::string name;
  std::string json;
  std::string path;     // the message starts with "<path>: "
  std::string message;  // and contains this
};

// Keeps gtest from printing a failing row as raw bytes.
void PrintTo(const MalformedCase& c, std::ostream* os) { *os << c.json; }

class MalformedSpecTest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedSpecTest, IsRejectedWithPathAndReason) {
  const MalformedCase& c = GetParam();
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJson(c.json);
  ASSERT_FALSE(spec.ok()) << c.json;
  const absl::Status& status = spec.status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string message(status.message());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_THAT(message, StartsWith(c.path + ": "));
  EXPECT_THAT(message, HasSubstr(c.message));
}

// Rows are {name, json, path, expected text}.
const MalformedCase kMalformed[] = {
    {"NotJson", R"({"cluster": {"worker": ["a:1"],}})", "$",
     "not valid JSON (parse error at byte 31"},
    {"EmptyInput", "", "$", "not valid JSON (parse error at byte 0"},
    {"TruncatedInput", R"({"cluster": )", "$", "unexpected end of input"},
    {"TopLevelArray", R"([1, 2])", "$", "expected an object, got array"},
    {"TopLevelString", R"("x")", "$", "expected an object, got string"},
    {"ClusterMissing", R"({"task": {"type": "worker", "index": 0}})",
     "$.cluster", "missing (a TF_CONFIG needs a \"cluster\" object)"},
    {"ClusterArray", R"({"cluster": ["a:1"]})", "$.cluster",
     "expected an object, got array"},
    {"ClusterEmpty", R"({"cluster": {}})", "$.cluster", "empty"},
    {"UnknownTaskType", R"({"cluster": {"master": ["a:1"]}})", "$.cluster",
     "unknown task type \"master\" (known: chief, worker, ps, evaluator)"},
    {"EmptyTaskType", R"({"cluster": {"": ["a:1"]}})", "$.cluster",
     "empty task type name"},
    {"NewlineInTaskTypeStaysOneLine", R"({"cluster": {"wor\nker": ["a:1"]}})",
     "$.cluster", "unknown task type \"wor\\nker\""},
    {"TaskListIsString", R"({"cluster": {"worker": "a:1"}})",
     "$.cluster.worker",
     "expected a list of \"host:port\" strings, got string"},
    {"TaskListEmpty", R"({"cluster": {"worker": []}})", "$.cluster.worker",
     "empty list"},
    {"ElementNotString", R"({"cluster": {"worker": ["a:1", 2222]}})",
     "$.cluster.worker[1]", "expected a \"host:port\" string, got number 2222"},
    {"NoPort", R"({"cluster": {"worker": ["localhost"]}})",
     "$.cluster.worker[0]", "no port"},
    {"EmptyAddress", R"({"cluster": {"worker": [""]}})", "$.cluster.worker[0]",
     "empty address"},
    {"EmptyHost", R"({"cluster": {"worker": [":2222"]}})",
     "$.cluster.worker[0]", "empty host"},
    {"EmptyPort", R"({"cluster": {"worker": ["a:"]}})", "$.cluster.worker[0]",
     "empty port"},
    {"PortNotNumber", R"({"cluster": {"worker": ["a:http"]}})",
     "$.cluster.worker[0]", "port \"http\" is not a number"},
    {"PortOutOfRange", R"({"cluster": {"worker": ["a:1", "a:70000"]}})",
     "$.cluster.worker[1]", "port 70000 is out of range 1..65535"},
    {"PortHuge", R"({"cluster": {"worker": ["a:99999999999999999999"]}})",
     "$.cluster.worker[0]", "is out of range 1..65535"},
    {"PortZero", R"({"cluster": {"worker": ["a:0"]}})", "$.cluster.worker[0]",
     "port 0 is out of range 1..65535"},
    {"NegativePort", R"({"cluster": {"worker": ["a:-1"]}})",
     "$.cluster.worker[0]", "port \"-1\" is not a number"},
    {"Whitespace", R"({"cluster": {"worker": ["a :2222"]}})",
     "$.cluster.worker[0]", "whitespace"},
    {"BadHostChar", R"({"cluster": {"worker": ["ho$t:2222"]}})",
     "$.cluster.worker[0]", "character that is not allowed: \"$\""},
    {"UnbracketedIPv6", R"({"cluster": {"worker": ["::1:2222"]}})",
     "$.cluster.worker[0]", "unbracketed IPv6 host; write \"[::1]:2222\""},
    {"BracketNotIPv6", R"({"cluster": {"worker": ["[nope]:2222"]}})",
     "$.cluster.worker[0]", "\"nope\" is not an IPv6 address"},
    {"UnclosedBracket", R"({"cluster": {"worker": ["[::1:2222"]}})",
     "$.cluster.worker[0]", "no ']'"},
    {"DuplicateAddress",
     R"({"cluster": {"chief": ["a:1"], "worker": ["b:1", "a:1"]}})",
     "$.cluster.worker[1]",
     "address \"a:1\" is already used by $.cluster.chief[0]"},
    {"DuplicateAddressDifferentSpelling",
     R"({"cluster": {"worker": ["[::1]:5", "[0:0::1]:5"]}})",
     "$.cluster.worker[1]", "already used by $.cluster.worker[0]"},
    {"DuplicateAddressAsLocalhost",
     R"({"cluster": {"chief": ["127.0.0.1:5"], "worker": ["LocalHost:5"]}})",
     "$.cluster.worker[0]", "already used by $.cluster.chief[0]"},
    {"TwoChiefs", R"({"cluster": {"chief": ["a:1", "a:2"]}})",
     "$.cluster.chief", "2 chief tasks (at most one is allowed)"},
    {"TwoEvaluators", R"({"cluster": {"evaluator": ["a:1", "a:2"]}})",
     "$.cluster.evaluator", "2 evaluator tasks (at most one is allowed)"},
    {"TaskNotObject", R"({"cluster": {"worker": ["a:1"]}, "task": "worker"})",
     "$.task", "expected an object, got string"},
    {"TaskTypeMissing",
     R"({"cluster": {"worker": ["a:1"]}, "task": {"index": 0}})", "$.task.type",
     "missing"},
    {"TaskTypeNotString",
     R"({"cluster": {"worker": ["a:1"]}, "task": {"type": 1, "index": 0}})",
     "$.task.type", "expected a string, got number 1"},
    {"TaskTypeUnknown",
     R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "master", "index": 0}})",
     "$.task.type", "unknown task type \"master\""},
    {"TaskTypeNotInCluster",
     R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}})",
     "$.task.type", "the cluster has no \"ps\" tasks (it has: worker)"},
    {"TaskIndexMissing",
     R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}})",
     "$.task.index", "missing"},
    {"TaskIndexString",
     R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": "0"}})",
     "$.task.index", "expected an integer, got string \"0\""},
    {"TaskIndexFloat",
     R"({"cluster": {"worker": ["a:1", "a:2"]}, "task": {"type": "worker", "index": 1.5}})",
     "$.task.index", "expected an integer, got number 1.5"},
    {"TaskIndexNegative",
     R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": -1}})",
     "$.task.index", "index -1 is negative"},
    {"TaskIndexOutOfRange",
     R"({"cluster": {"worker": ["a:1", "a:2"]}, "task": {"type": "worker", "index": 3}})",
     "$.task.index", "index 3 is out of range: cluster has 2 worker tasks"},
    {"TaskIndexHuge",
     R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 18446744073709551615}})",
     "$.task.index", "is out of range: cluster has 1 worker task"},
    {"TaskTypeTwice",
     R"({"cluster": {"worker": ["a:1", "a:2"], "chief": ["c:1"], "worker": ["a:3"]}})",
     "$.cluster.worker", "appears twice in its object"},
    {"ClusterTwice",
     R"({"cluster": {"worker": ["a:1"]}, "cluster": {"chief": ["c:1"]}})",
     "$.cluster", "appears twice in its object"},
    {"WildcardAddress", R"({"cluster": {"worker": ["a:1", "0.0.0.0:2"]}})",
     "$.cluster.worker[1]",
     "\"0.0.0.0:2\" is a listen address (every interface), not one other "
     "tasks can dial"},
    {"WildcardIPv6Address", R"({"cluster": {"ps": ["[::]:2"]}})",
     "$.cluster.ps[0]", "is a listen address"},
    {"TaskKeyTwice",
     R"({"cluster": {"worker": ["a:1", "a:2"]}, "task": {"type": "worker", "index": 0, "index": 1}})",
     "$.task.index", "appears twice in its object"},
};

INSTANTIATE_TEST_SUITE_P(
    ClusterSpec, MalformedSpecTest, ::testing::ValuesIn(kMalformed),
    [](const ::testing::TestParamInfo<MalformedCase>& info) {
      return info.param.name;
    });

TEST(ClusterSpecTest, MinimalSpec) {
  absl::StatusOr<ClusterSpec> spec =
      ClusterSpec::FromJson(R"({"cluster": {"worker": ["localhost:2222"]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->task_types(), ElementsAre("worker"));
  EXPECT_EQ(spec->num_tasks(kWorker), 1);
  EXPECT_EQ(spec->num_tasks(kPs), 0);
  EXPECT_FALSE(spec->task().has_value());
  EXPECT_EQ(*spec->address({"worker", 0}), "localhost:2222");
}

TEST(ClusterSpecTest, FullSpecWithTask) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJson(R"({
    "cluster": {
      "evaluator": ["eval-0.svc:2222"],
      "ps": ["ps-0:2222", "ps-1:2222"],
      "worker": ["worker-0:2222", "worker-1:2222", "worker-2:2222"],
      "chief": ["chief-0:2222"]
    },
    "task": {"type": "worker", "index": 2},
    "rpc_layer": "grpc"
  })");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->task_types(),
              ElementsAre("chief", "worker", "ps", "evaluator"));
  EXPECT_EQ(spec->num_tasks(kChief), 1);
  EXPECT_EQ(spec->num_tasks(kWorker), 3);
  EXPECT_EQ(spec->num_tasks(kPs), 2);
  EXPECT_EQ(spec->num_tasks(kEvaluator), 1);
  ASSERT_TRUE(spec->task().has_value());
  EXPECT_EQ(*spec->task(), (TaskId{"worker", 2}));
  EXPECT_EQ(*spec->address({"ps", 1}), "ps-1:2222");
}

TEST(ClusterSpecTest, TasksAreOrderedByTypeThenIndex) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJson(
      R"({"cluster": {"ps": ["p:1"], "worker": ["w:1", "w:2"], "chief": ["c:1"]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<std::string> ids;
  for (const TaskId& task : spec->tasks()) ids.push_back(task.ToString());
  EXPECT_THAT(ids, ElementsAre("chief:0", "worker:0", "worker:1", "ps:0"));
}

TEST(ClusterSpecTest, KubeflowSpecWithEnvironment) {
  // As the Kubeflow training operator writes it for a TFJob.
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJson(
      R"({"cluster":{"chief":["mnist-chief-0.kubeflow.svc:2222"],)"
      R"("worker":["mnist-worker-0.kubeflow.svc:2222",)"
      R"("mnist-worker-1.kubeflow.svc:2222"]},)"
      R"("task":{"type":"worker","index":1},"environment":"cloud"})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec->task(), (TaskId{"worker", 1}));
  EXPECT_EQ(spec->num_tasks(kWorker), 2);
}

TEST(ClusterSpecTest, BracketedIPv6) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJson(
      R"({"cluster": {"worker": ["[::1]:2222", "[fe80::1%eth0]:2222"]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec->address({"worker", 0}), "[::1]:2222");
  EXPECT_EQ(spec->FindByAddress("[0::1]:2222"), (TaskId{"worker", 0}));
}

TEST(ClusterSpecTest, ToJsonRoundTrips) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJson(
      R"({"cluster": {"chief": ["c:1"], "worker": ["w:1", "[::1]:2"]},
          "task": {"type": "chief", "index": 0}, "environment": "cloud"})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string json = spec->ToJson();
  absl::StatusOr<ClusterSpec> again = ClusterSpec::FromJson(json);
  ASSERT_TRUE(again.ok()) << again.status() << " for " << json;
  EXPECT_EQ(again->ToJson(), json);
  EXPECT_EQ(again->task(), spec->task());
  EXPECT_EQ(*again->address({"worker", 1}), "[::1]:2");
  EXPECT_THAT(json, Not(HasSubstr("environment")));
}

TEST(ClusterSpecTest, AddressOfMissingTaskIsNotFound) {
  absl::StatusOr<ClusterSpec> spec =
      ClusterSpec::FromJson(R"({"cluster": {"worker": ["w:1", "w:2"]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::string> address = spec->address({"worker", 2});
  EXPECT_EQ(address.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(address.status().message()), HasSubstr("worker:2"));
  EXPECT_EQ(spec->address({"ps", 0}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ClusterSpecTest, FindByAddress) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJson(
      R"({"cluster": {"chief": ["Host-A:1"], "worker": ["b:1", "b:2"]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->FindByAddress("b:2"), (TaskId{"worker", 1}));
  EXPECT_EQ(spec->FindByAddress("host-a:1"), (TaskId{"chief", 0}));
  EXPECT_EQ(spec->FindByAddress("b:3"), std::nullopt);
  EXPECT_EQ(spec->FindByAddress("garbage"), std::nullopt);
}

TEST(ClusterSpecTest, FromEnvironment) {
  unsetenv("TF_CONFIG");
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromEnvironment();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(spec.status().message(), "TF_CONFIG is not set");

  setenv(
      "TF_CONFIG",
      R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 0}})",
      1);
  spec = ClusterSpec::FromEnvironment();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec->task(), (TaskId{"worker", 0}));

  setenv("TF_CONFIG", R"({"cluster": {"worker": ["w"]}})", 1);
  spec = ClusterSpec::FromEnvironment();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()),
              StartsWith("TF_CONFIG: $.cluster.worker[0]: no port"));
  unsetenv("TF_CONFIG");
}

TEST(ClusterSpecTest, FromFile) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/cluster_spec_test_good.json";
  const std::string bad = dir + "/cluster_spec_test_bad.json";
  for (const auto& [path, text] :
       {std::pair{good, R"({"cluster": {"ps": ["p:1"]}})"},
        std::pair{bad, R"({"cluster": {"ps": ["p:0"]}})"}}) {
    std::FILE* file = std::fopen(path.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs(text, file);
    std::fclose(file);
  }
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromFile(good);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->num_tasks(kPs), 1);

  spec = ClusterSpec::FromFile(bad);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()),
              StartsWith(bad + ": $.cluster.ps[0]: port 0 is out of range"));

  const std::string missing = dir + "/cluster_spec_test_missing.json";
  spec = ClusterSpec::FromFile(missing);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(spec.status().message()),
              StartsWith(missing + ": cannot read: No such file"));

  spec = ClusterSpec::FromFile(dir);
  EXPECT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()),
              StartsWith(dir + ": cannot read: "));
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST(TaskIdTest, ToStringAndParse) {
  EXPECT_EQ((TaskId{"worker", 1}).ToString(), "worker:1");
  absl::StatusOr<TaskId> id = ParseTaskId("worker:1");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, (TaskId{"worker", 1}));
  EXPECT_EQ(*ParseTaskId("chief:0"), (TaskId{"chief", 0}));
  EXPECT_LT((TaskId{"chief", 5}), (TaskId{"worker", 0}));
}

TEST(TaskIdTest, ParseErrorsNameTheInput) {
  for (const char* text : {"worker", "worker:", "worker:-1", "worker:x",
                           "master:0", ":0", "worker:1234567890"}) {
    absl::StatusOr<TaskId> id = ParseTaskId(text);
    ASSERT_FALSE(id.ok()) << text;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(id.status().message()),
                StartsWith(absl::StrCat("invalid task id \"", text, "\": ")));
  }
}

TEST(HostPortTest, ParseAndToString) {
  absl::StatusOr<HostPort> address = ParseHostPort("example.com:2222");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->host, "example.com");
  EXPECT_EQ(address->port, 2222);
  EXPECT_EQ(address->ToString(), "example.com:2222");

  address = ParseHostPort("[::1]:65535");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->host, "::1");
  EXPECT_EQ(address->ToString(), "[::1]:65535");
}

TEST(HostPortTest, PortZeroOnlyWhenAllowed) {
  absl::StatusOr<HostPort> address = ParseHostPort("127.0.0.1:0");
  EXPECT_EQ(address.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(address.status().message(),
            "invalid address \"127.0.0.1:0\": port 0 is out of range 1..65535");

  address = ParseHostPort("127.0.0.1:0", /*allow_port_zero=*/true);
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->port, 0);
  EXPECT_FALSE(ParseHostPort("127.0.0.1:65536", true).ok());
}

TEST(HostPortTest, ErrorsNameTheInput) {
  for (const char* text : {"", "host", "::1:80", "[::1]80", "[::1]", "h:p",
                           " h:1", "h_:", "[1.2.3.4]:5"}) {
    absl::StatusOr<HostPort> address = ParseHostPort(text);
    ASSERT_FALSE(address.ok()) << text;
    EXPECT_THAT(std::string(address.status().message()),
                StartsWith(absl::StrCat("invalid address \"", text, "\": ")));
  }
}

TEST(PortRangeTest, ParsesRangesAndSinglePorts) {
  absl::StatusOr<PortRange> range = ParsePortRange("20000-20099");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->first, 20000);
  EXPECT_EQ(range->last, 20099);
  EXPECT_EQ(range->size(), 100);
  EXPECT_EQ(range->ToString(), "20000-20099");

  range = ParsePortRange("7000");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->size(), 1);
  EXPECT_EQ(range->ToString(), "7000");

  range = ParsePortRange("");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_TRUE(range->empty());
  EXPECT_EQ(range->size(), 0);
}

TEST(PortRangeTest, ErrorsNameTheInputAndTheFault) {
  const std::pair<const char*, const char*> cases[] = {
      {"20099-20000", "20099 is above 20000"},
      {"0-10", "port 0 is out of range 1..65535"},
      {"20000-70000", "port 70000 is out of range 1..65535"},
      {"a-b", "port \"a\" is not a number"},
      {"20000-", "empty port"},
      {"-20000", "empty port"},
      {"1-2-3", "port \"2-3\" is not a number"},
  };
  for (const auto& [text, fault] : cases) {
    absl::StatusOr<PortRange> range = ParsePortRange(text);
    ASSERT_FALSE(range.ok()) << text;
    EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(range.status().message());
    EXPECT_THAT(message,
                StartsWith(absl::StrCat("port range \"", text, "\": ")));
    EXPECT_THAT(message, HasSubstr(fault)) << text;
  }
}

TEST(TaskTypeTest, KnownTypes) {
  EXPECT_TRUE(IsKnownTaskType("chief"));
  EXPECT_TRUE(IsKnownTaskType("worker"));
  EXPECT_TRUE(IsKnownTaskType("ps"));
  EXPECT_TRUE(IsKnownTaskType("evaluator"));
  EXPECT_FALSE(IsKnownTaskType("master"));
  EXPECT_FALSE(IsKnownTaskType(""));
}

}  // namespace
}  // namespace cohort
