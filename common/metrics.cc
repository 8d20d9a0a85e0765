#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/check.h"

namespace cohort {
namespace {

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  // The shortest of the usual precisions that reads back as the same value.
  std::string text = absl::StrFormat("%.15g", value);
  if (std::strtod(text.c_str(), nullptr) != value) {
    text = absl::StrFormat("%.17g", value);
  }
  return text;
}

// Label values escape backslash, double quote and newline; HELP text
// escapes backslash and newline.
std::string Escape(const std::string& text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="1",b="2"}` with `extra` (le="...") last; "" without labels.
std::string LabelText(
    const MetricLabels& labels,
    const std::pair<std::string, std::string>* extra = nullptr) {
  if (labels.empty() && extra == nullptr) return "";
  std::string out = "{";
  bool first = true;
  auto add = [&](const std::pair<std::string, std::string>& label) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, label.first, "=\"", Escape(label.second, true), "\"");
  };
  for (const auto& label : labels) add(label);
  if (extra != nullptr) add(*extra);
  out += "}";
  return out;
}

void AppendHeader(std::string& out, const std::string& name,
                  const std::string& help, MetricType type) {
  absl::StrAppend(&out, "# HELP ", name, " ", Escape(help, false), "\n",
                  "# TYPE ", name, " ", TypeName(type), "\n");
}

std::vector<double> Geometric(double first, double factor, double last) {
  std::vector<double> bounds;
  for (double b = first; b <= last * 1.0001; b *= factor) bounds.push_back(b);
  return bounds;
}

}  // namespace

std::vector<double> LatencyBuckets() {
  // 1, 2.5, 5, 10, ... µs up to 100 s: three bounds a decade.
  std::vector<double> bounds;
  for (double decade = 1e-6; decade < 100.5; decade *= 10) {
    for (double m : {1.0, 2.5, 5.0}) {
      if (decade * m <= 100.5) bounds.push_back(decade * m);
    }
  }
  return bounds;
}

std::vector<double> SizeBuckets() { return Geometric(64, 4, 1 << 30); }

void MetricWriter::Gauge(const std::string& name, const std::string& help,
                         const MetricLabels& labels, double value) {
  Write(name, MetricType::kGauge, help, labels, value);
}

void MetricWriter::Counter(const std::string& name, const std::string& help,
                           const MetricLabels& labels, double value) {
  Write(name, MetricType::kCounter, help, labels, value);
}

void MetricWriter::Write(const std::string& name, MetricType type,
                         const std::string& help, const MetricLabels& labels,
                         double value) {
  Family& family = families_[name];
  family.type = type;
  family.help = help;
  family.samples.emplace_back(labels, value);
}

MetricRegistry& MetricRegistry::Default() {
  static MetricRegistry* registry = new MetricRegistry();
  return *registry;
}

void MetricRegistry::DeclareCounter(const std::string& name,
                                    const std::string& help) {
  Declare(name, MetricType::kCounter, help, {});
}

void MetricRegistry::DeclareGauge(const std::string& name,
                                  const std::string& help) {
  Declare(name, MetricType::kGauge, help, {});
}

void MetricRegistry::DeclareHistogram(const std::string& name,
                                      const std::string& help,
                                      std::vector<double> buckets) {
  std::sort(buckets.begin(), buckets.end());
  Declare(name, MetricType::kHistogram, help, std::move(buckets));
}

void MetricRegistry::Declare(const std::string& name, MetricType type,
                             const std::string& help,
                             std::vector<double> bounds) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = families_.try_emplace(name);
  if (!inserted) {
    COHORT_CHECK(it->second.type == type);
    return;
  }
  it->second.type = type;
  it->second.help = help;
  it->second.bounds = std::move(bounds);
}

MetricRegistry::Series& MetricRegistry::SeriesLocked(
    const std::string& name, MetricType type, const MetricLabels& labels) {
  auto family = families_.find(name);
  COHORT_CHECK(family != families_.end());
  COHORT_CHECK(family->second.type == type);
  auto [it, inserted] = family->second.series.try_emplace(labels);
  if (inserted && type == MetricType::kHistogram) {
    it->second.buckets.assign(family->second.bounds.size(), 0);
  }
  return it->second;
}

void MetricRegistry::Increment(const std::string& name,
                               const MetricLabels& labels, double delta) {
  absl::MutexLock lock(&mu_);
  SeriesLocked(name, MetricType::kCounter, labels).value += delta;
}

void MetricRegistry::Set(const std::string& name, const MetricLabels& labels,
                         double value) {
  absl::MutexLock lock(&mu_);
  SeriesLocked(name, MetricType::kGauge, labels).value = value;
}

void MetricRegistry::Add(const std::string& name, const MetricLabels& labels,
                         double delta) {
  absl::MutexLock lock(&mu_);
  SeriesLocked(name, MetricType::kGauge, labels).value += delta;
}

void MetricRegistry::Observe(const std::string& name,
                             const MetricLabels& labels, double value) {
  absl::MutexLock lock(&mu_);
  Series& series = SeriesLocked(name, MetricType::kHistogram, labels);
  const std::vector<double>& bounds = families_.at(name).bounds;
  const size_t bucket =
      std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  if (bucket < series.buckets.size()) ++series.buckets[bucket];
  ++series.count;
  series.sum += value;
}

int MetricRegistry::AddCollector(std::function<void(MetricWriter&)> collector) {
  absl::MutexLock lock(&collectors_mu_);
  const int id = next_collector_++;
  collectors_.emplace(id, std::move(collector));
  return id;
}

void MetricRegistry::RemoveCollector(int id) {
  absl::MutexLock lock(&collectors_mu_);
  collectors_.erase(id);
}

std::string MetricRegistry::Render() const {
  MetricWriter collected;
  {
    absl::MutexLock lock(&collectors_mu_);
    for (const auto& [id, collector] : collectors_) collector(collected);
  }
  std::string out;
  absl::MutexLock lock(&mu_);
  // One sorted pass over both sources; a name is in one of them only.
  auto recorded = families_.begin();
  auto written = collected.families_.begin();
  while (recorded != families_.end() || written != collected.families_.end()) {
    const bool take_recorded =
        written == collected.families_.end() ||
        (recorded != families_.end() && recorded->first < written->first);
    if (!take_recorded) {
      const auto& [name, family] = *written++;
      AppendHeader(out, name, family.help, family.type);
      for (const auto& [labels, value] : family.samples) {
        absl::StrAppend(&out, name, LabelText(labels), " ", FormatValue(value),
                        "\n");
      }
      continue;
    }
    const auto& [name, family] = *recorded++;
    if (family.series.empty()) continue;
    AppendHeader(out, name, family.help, family.type);
    for (const auto& [labels, series] : family.series) {
      if (family.type != MetricType::kHistogram) {
        absl::StrAppend(&out, name, LabelText(labels), " ",
                        FormatValue(series.value), "\n");
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= family.bounds.size(); ++i) {
        const bool inf = i == family.bounds.size();
        cumulative = inf ? series.count : cumulative + series.buckets[i];
        const std::pair<std::string, std::string> le(
            "le", inf ? "+Inf" : FormatValue(family.bounds[i]));
        absl::StrAppend(&out, name, "_bucket", LabelText(labels, &le), " ",
                        cumulative, "\n");
      }
      absl::StrAppend(&out, name, "_sum", LabelText(labels), " ",
                      FormatValue(series.sum), "\n", name, "_count",
                      LabelText(labels), " ", series.count, "\n");
    }
  }
  return out;
}

ScopedCollector::ScopedCollector(MetricRegistry* registry,
                                 std::function<void(MetricWriter&)> collector)
    : registry_(registry), id_(registry->AddCollector(std::move(collector))) {}

ScopedCollector::~ScopedCollector() {
  if (registry_ != nullptr) registry_->RemoveCollector(id_);
}

ScopedCollector::ScopedCollector(ScopedCollector&& other) noexcept
    : registry_(other.registry_), id_(other.id_) {
  other.registry_ = nullptr;
}

ScopedCollector& ScopedCollector::operator=(ScopedCollector&& other) noexcept {
  if (this != &other) {
    if (registry_ != nullptr) registry_->RemoveCollector(id_);
    registry_ = other.registry_;
    id_ = other.id_;
    other.registry_ = nullptr;
  }
  return *this;
}

}  // namespace cohort
