#pragma once

// Process-wide metrics in the Prometheus data model: counters, gauges and
// histograms, each a family of series told apart by labels, rendered in the
// Prometheus text exposition format (version 0.0.4).
//
// Two ways to feed it:
//  - code on a hot path records as it goes: Increment, Set, Observe;
//  - state that already lives elsewhere (task tables, job status) is read at
//    scrape time by a collector, so that it is never kept twice.
//
// Names follow Prometheus conventions: the `cohort_` prefix, base units
// (`_seconds`, `_bytes`), `_total` for counters.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort {

// Label name/value pairs, e.g. {{"op", "allreduce"}, {"algorithm", "ring"}}.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// Upper bounds for histograms of durations (1 µs to 100 s) and of sizes
// (64 B to 1 GiB).
std::vector<double> LatencyBuckets();
std::vector<double> SizeBuckets();

// What a collector writes at scrape time. Not thread-safe; lives for one
// scrape.
class MetricWriter {
 public:
  void Gauge(const std::string& name, const std::string& help,
             const MetricLabels& labels, double value);
  void Counter(const std::string& name, const std::string& help,
               const MetricLabels& labels, double value);

 private:
  friend class MetricRegistry;
  struct Family {
    MetricType type;
    std::string help;
    std::vector<std::pair<MetricLabels, double>> samples;
  };
  void Write(const std::string& name, MetricType type, const std::string& help,
             const MetricLabels& labels, double value);
  std::map<std::string, Family> families_;
};

// Thread-safe. Recording takes one mutex; a series is created on first use.
class MetricRegistry {
 public:
  MetricRegistry() = default;
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  // The registry each daemon serves on /metrics.
  static MetricRegistry& Default();

  // Declares a family; recording into an undeclared name is a bug (it
  // CHECK-fails). Declaring a name again with the same type is a no-op.
  void DeclareCounter(const std::string& name, const std::string& help);
  void DeclareGauge(const std::string& name, const std::string& help);
  void DeclareHistogram(const std::string& name, const std::string& help,
                        std::vector<double> buckets);

  void Increment(const std::string& name, const MetricLabels& labels,
                 double delta = 1);
  void Set(const std::string& name, const MetricLabels& labels, double value);
  // Moves a gauge up or down (things in flight).
  void Add(const std::string& name, const MetricLabels& labels, double delta);
  void Observe(const std::string& name, const MetricLabels& labels,
               double value);

  // Runs `collector` at every Render(). Returns an id for RemoveCollector,
  // which must run before anything the collector reads is destroyed; after it
  // returns, the collector is neither running nor run again.
  int AddCollector(std::function<void(MetricWriter&)> collector);
  void RemoveCollector(int id);

  // Every family, in the text exposition format.
  std::string Render() const;

 private:
  struct Series {
    double value = 0;               // counter, gauge
    std::vector<uint64_t> buckets;  // histogram: per bound, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  struct Family {
    MetricType type;
    std::string help;
    std::vector<double> bounds;  // histograms
    std::map<MetricLabels, Series> series;
  };
  void Declare(const std::string& name, MetricType type,
               const std::string& help, std::vector<double> bounds);
  Series& SeriesLocked(const std::string& name, MetricType type,
                       const MetricLabels& labels)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  // Held across collector runs, apart from mu_, so that a collector may
  // record into the registry.
  mutable absl::Mutex collectors_mu_;
  std::map<int, std::function<void(MetricWriter&)>> collectors_
      ABSL_GUARDED_BY(collectors_mu_);
  int next_collector_ ABSL_GUARDED_BY(collectors_mu_) = 0;
};

// Removes its collector when destroyed: members declared after what the
// collector reads are destroyed first.
class ScopedCollector {
 public:
  ScopedCollector() = default;
  ScopedCollector(MetricRegistry* registry,
                  std::function<void(MetricWriter&)> collector);
  ~ScopedCollector();
  ScopedCollector(ScopedCollector&& other) noexcept;
  ScopedCollector& operator=(ScopedCollector&& other) noexcept;

 private:
  MetricRegistry* registry_ = nullptr;
  int id_ = -1;
};

}  // namespace cohort
