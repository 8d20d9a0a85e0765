#include "client_lib/cohortctl/trace_format.h"

#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::ctl {
namespace {

constexpr char kStragglerWait[] = "wait for stragglers";

// Microseconds, exact to the nanosecond (three decimals).
double Micros(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

std::string Category(const std::string& name) {
  if (name == "step") return "step";
  if (name == "input" || name == "compute" || name == "optimizer" ||
      name == "end_step" || name == "checkpoint") {
    return "phase";
  }
  return "collective";
}

struct Located {
  const v1::ReplicaTrace* replica;
  const v1::TraceSpan* span;
};

}  // namespace

nlohmann::json ChromeTrace(const v1::TraceData& trace) {
  int64_t base = std::numeric_limits<int64_t>::max();
  for (const v1::ReplicaTrace& replica : trace.replicas()) {
    for (const v1::TraceSpan& span : replica.spans()) {
      base = std::min(base, span.start_unix_ns());
    }
  }
  if (base == std::numeric_limits<int64_t>::max()) base = 0;

  nlohmann::json events = nlohmann::json::array();
  std::map<std::string, int> pids;  // task -> pid, in order of appearance
  auto pid_of = [&](const std::string& task) {
    auto [it, inserted] = pids.try_emplace(task, pids.size() + 1);
    if (inserted) {
      events.push_back({{"ph", "M"},
                        {"name", "process_name"},
                        {"pid", it->second},
                        {"args", {{"name", task}}}});
    }
    return it->second;
  };
  auto complete = [&](const std::string& name, int pid, int tid,
                      int64_t start_ns, int64_t duration_ns,
                      nlohmann::json args) {
    events.push_back({{"ph", "X"},
                      {"name", name},
                      {"cat", name == kStragglerWait ? "wait" : Category(name)},
                      {"pid", pid},
                      {"tid", tid},
                      {"ts", Micros(start_ns - base)},
                      {"dur", Micros(duration_ns)},
                      {"args", std::move(args)}});
  };

  // Collectives by (attempt, seq, name), for the straggler waits.
  std::map<std::tuple<int, int64_t, std::string>, std::vector<Located>>
      collectives;
  std::map<std::pair<int, int>, bool> named_threads;
  for (const v1::ReplicaTrace& replica : trace.replicas()) {
    const int pid = pid_of(replica.task());
    const int tid = replica.replica();
    if (!named_threads[{pid, tid}]) {
      named_threads[{pid, tid}] = true;
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", pid},
                        {"tid", tid},
                        {"args", {{"name", absl::StrCat("replica ", tid)}}}});
      events.push_back({{"ph", "M"},
                        {"name", "thread_sort_index"},
                        {"pid", pid},
                        {"tid", tid},
                        {"args", {{"sort_index", tid}}}});
    }
    for (const v1::TraceSpan& span : replica.spans()) {
      nlohmann::json args = nlohmann::json::object();
      for (const auto& [key, value] : span.args()) args[key] = value;
      args["attempt"] = replica.attempt();
      complete(span.name(), pid, tid, span.start_unix_ns(), span.duration_ns(),
               std::move(args));
      // A sequence number that does not parse (an agent of another
      // version, say) only leaves that span out of the matching.
      auto seq = span.args().find("seq");
      int64_t number = 0;
      if (seq != span.args().end() && absl::SimpleAtoi(seq->second, &number)) {
        collectives[{replica.attempt(), number, span.name()}].push_back(
            {&replica, &span});
      }
    }
  }

  for (const auto& [key, ranks] : collectives) {
    if (ranks.size() < 2) continue;
    int64_t latest = std::numeric_limits<int64_t>::min();
    for (const Located& r : ranks) {
      latest = std::max(latest, r.span->start_unix_ns());
    }
    std::vector<std::string> last;
    for (const Located& r : ranks) {
      if (r.span->start_unix_ns() == latest) {
        last.push_back(absl::StrCat(r.replica->replica()));
      }
    }
    for (const Located& r : ranks) {
      const int64_t waited =
          std::min(latest - r.span->start_unix_ns(), r.span->duration_ns());
      if (waited <= 0) continue;
      complete(
          kStragglerWait, pids.at(r.replica->task()), r.replica->replica(),
          r.span->start_unix_ns(), waited,
          {{"waited_for", absl::StrCat("replica ", absl::StrJoin(last, ", "))},
           {"collective", std::get<2>(key)},
           {"seq", std::get<1>(key)}});
    }
  }

  nlohmann::json clocks = nlohmann::json::array();
  for (const v1::ClockOffset& clock : trace.clocks()) {
    clocks.push_back({{"task", clock.task()},
                      {"offset_ns", clock.offset_ns()},
                      {"uncertainty_ns", clock.uncertainty_ns()}});
  }
  int64_t dropped = 0;
  for (const v1::ReplicaTrace& replica : trace.replicas()) {
    dropped += replica.dropped();
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"job_id", trace.job_id()},
            {"start_unix_ns", base},
            {"clock_offsets", std::move(clocks)},
            {"spans_dropped", dropped},
            // Agents whose spans are not in it, and why.
            {"missing_tasks",
             nlohmann::json(std::vector<std::string>(
                 trace.missing().begin(), trace.missing().end()))}}}};
}

}  // namespace cohort::ctl
