#include "coordinator/store_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/steady_time.h"

namespace cohort::coordinator {
namespace {

// How often expired and abandoned waits are failed; their deadlines are met
// within this.
constexpr absl::Duration kExpiryPeriod = absl::Milliseconds(20);

// Ranks a timeout names one by one; the rest are counted.
constexpr size_t kMaxRanksNamed = 32;

bool IsAbandoned(const StoreManager::Abandoned& abandoned) {
  return abandoned != nullptr && abandoned();
}

// What a withdrawn wait ends with; its caller has gone and will not read it.
absl::Status GaveUp(const std::string& what) {
  return absl::CancelledError(
      absl::StrCat("the caller gave up waiting for ", what));
}

// "1, 2" or "0, 1, ... 31 and 968 more" of [0, participants) not in the
// sorted `present`.
std::string MissingRanks(int participants, const std::vector<int>& present) {
  std::vector<int> named;
  size_t missing = 0;
  for (int r = 0; r < participants; ++r) {
    if (std::binary_search(present.begin(), present.end(), r)) continue;
    if (++missing <= kMaxRanksNamed) named.push_back(r);
  }
  std::string text = absl::StrJoin(named, ", ");
  if (missing > named.size()) {
    absl::StrAppend(&text, " and ", missing - named.size(), " more");
  }
  return text;
}

}  // namespace

StoreManager::StoreManager(StoreLimits limits) : limits_(limits) {}

StoreManager::~StoreManager() { Shutdown(); }

void StoreManager::Start() {
  expiry_ = std::thread([this] { ExpireLoop(); });
}

void StoreManager::Shutdown() {
  std::vector<std::function<void()>> completions;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    const absl::Status gone =
        absl::UnavailableError("the store is shutting down");
    for (auto& [key, reader] : readers_) {
      completions.push_back(
          [done = std::move(reader.done), gone] { done(gone); });
    }
    readers_.clear();
    for (auto& [name, barrier] : barriers_) {
      for (Arrival& arrival : barrier.arrivals) {
        completions.push_back(
            [done = std::move(arrival.done), gone] { done(gone); });
      }
    }
    barriers_.clear();
  }
  for (auto& complete : completions) complete();
  if (expiry_.joinable()) expiry_.join();
}

absl::Status StoreManager::Set(const std::string& key, std::string value) {
  if (key.empty() || key.size() > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("store key must be 1..",
                                                   limits_.max_key_bytes,
                                                   " bytes, got ", key.size()));
  }
  if (value.size() > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store value for \"", key, "\" is ", value.size(),
                     " bytes; the limit is ", limits_.max_value_bytes));
  }
  std::vector<GetCallback> waiting;
  {
    absl::MutexLock lock(&mu_);
    const auto old = values_.find(key);
    if (old == values_.end() && values_.size() >= limits_.max_keys) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot set store key \"", key, "\": the store holds ",
                       values_.size(), " keys, its limit"));
    }
    const size_t replaced =
        old == values_.end() ? 0 : key.size() + old->second.size();
    const size_t total = total_bytes_ - replaced + key.size() + value.size();
    if (total > limits_.max_total_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot set store key \"", key, "\" (", value.size(),
                       " bytes): the store would hold ", total,
                       " bytes, over its limit of ", limits_.max_total_bytes));
    }
    total_bytes_ = total;
    values_[key] = value;
    auto [begin, end] = readers_.equal_range(key);
    for (auto it = begin; it != end; ++it)
      waiting.push_back(std::move(it->second.done));
    readers_.erase(begin, end);
  }
  for (GetCallback& done : waiting) done(value);
  return absl::OkStatus();
}

void StoreManager::Get(const std::string& key, absl::Time deadline,
                       GetCallback done, Abandoned abandoned) {
  absl::StatusOr<std::string> result;
  {
    absl::MutexLock lock(&mu_);
    const auto it = values_.find(key);
    if (it != values_.end()) {
      result = it->second;
    } else if (stopping_) {
      result = absl::UnavailableError("the store is shutting down");
    } else {
      readers_.emplace(key,
                       Reader{deadline, std::move(done), std::move(abandoned)});
      return;
    }
  }
  done(std::move(result));
}

void StoreManager::Barrier(const std::string& name, int participants, int rank,
                           absl::Time deadline, BarrierCallback done,
                           Abandoned abandoned) {
  if (participants < 1 || participants > kMaxBarrierParticipants || rank < 0 ||
      rank >= participants) {
    done(absl::InvalidArgumentError(
        absl::StrCat("barrier \"", name, "\": rank ", rank, " of ",
                     participants, " participants is out of range (at most ",
                     kMaxBarrierParticipants, " participants)")));
    return;
  }
  std::vector<BarrierCallback> released;
  std::vector<BarrierCallback> gave_up;
  BarrierCallback superseded;
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    // After Shutdown nothing would ever end a parked arrival.
    PendingBarrier* barrier = stopping_ ? nullptr : &barriers_[name];
    if (barrier != nullptr && barrier->arrivals.empty()) {
      barrier->participants = participants;
    }
    if (barrier == nullptr) {
      refused = absl::UnavailableError("the store is shutting down");
    } else if (barrier->participants != participants) {
      barrier->disagreed[rank] = participants;
      refused = absl::FailedPreconditionError(absl::StrCat(
          "barrier \"", name, "\": rank ", rank, " expects ", participants,
          " participants, but earlier ranks expect ", barrier->participants));
    } else {
      // A rank that arrives again (a retry) replaces its earlier arrival,
      // and one whose caller gave up no longer counts: the expiry loop would
      // withdraw it a moment later, too late if this arrival completes it.
      auto& arrivals = barrier->arrivals;
      for (auto a = arrivals.begin(); a != arrivals.end();) {
        if (a->rank == rank) {
          superseded = std::move(a->done);
        } else if (IsAbandoned(a->abandoned)) {
          gave_up.push_back(std::move(a->done));
        } else {
          ++a;
          continue;
        }
        a = arrivals.erase(a);
      }
      arrivals.push_back(
          Arrival{rank, deadline, std::move(done), std::move(abandoned)});
      if (static_cast<int>(arrivals.size()) == participants) {
        for (Arrival& arrival : arrivals)
          released.push_back(std::move(arrival.done));
        barriers_.erase(name);
      }
    }
  }
  if (!refused.ok()) {
    done(refused);
    return;
  }
  if (superseded) {
    superseded(absl::AbortedError(
        absl::StrCat("barrier \"", name, "\": rank ", rank, " arrived again")));
  }
  for (BarrierCallback& callback : gave_up) {
    callback(GaveUp(absl::StrCat("barrier \"", name, "\"")));
  }
  for (BarrierCallback& callback : released) callback(absl::OkStatus());
}

size_t StoreManager::ErasePrefix(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  auto begin = values_.lower_bound(prefix);
  auto end = begin;
  while (end != values_.end() &&
         end->first.compare(0, prefix.size(), prefix) == 0) {
    ++end;
  }
  const size_t erased = std::distance(begin, end);
  for (auto it = begin; it != end; ++it) {
    total_bytes_ -= it->first.size() + it->second.size();
  }
  values_.erase(begin, end);
  return erased;
}

size_t StoreManager::num_keys() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

size_t StoreManager::num_waiting_readers() const {
  absl::MutexLock lock(&mu_);
  return readers_.size();
}

size_t StoreManager::num_barrier_arrivals() const {
  absl::MutexLock lock(&mu_);
  size_t arrivals = 0;
  for (const auto& [name, barrier] : barriers_) {
    arrivals += barrier.arrivals.size();
  }
  return arrivals;
}

void StoreManager::ExpireLoop() {
  auto stopping = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (true) {
    std::vector<std::function<void()>> expired;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), kExpiryPeriod))
        return;
      const absl::Time now = SteadyNow();
      for (auto it = readers_.begin(); it != readers_.end();) {
        Reader& reader = it->second;
        if (IsAbandoned(reader.abandoned)) {
          expired.push_back([done = std::move(reader.done), key = it->first] {
            done(GaveUp(absl::StrCat("store key \"", key, "\"")));
          });
        } else if (reader.deadline <= now) {
          expired.push_back([done = std::move(reader.done), key = it->first] {
            done(absl::DeadlineExceededError(absl::StrCat(
                "store key \"", key, "\" was not set before the deadline")));
          });
        } else {
          ++it;
          continue;
        }
        it = readers_.erase(it);
      }
      for (auto it = barriers_.begin(); it != barriers_.end();) {
        auto& arrivals = it->second.arrivals;
        // Withdrawn first, so that a rank that gave up is named as missing.
        for (auto a = arrivals.begin(); a != arrivals.end();) {
          if (!IsAbandoned(a->abandoned)) {
            ++a;
            continue;
          }
          expired.push_back([done = std::move(a->done), name = it->first] {
            done(GaveUp(absl::StrCat("barrier \"", name, "\"")));
          });
          a = arrivals.erase(a);
        }
        std::vector<int> present;
        for (const Arrival& a : arrivals) present.push_back(a.rank);
        std::sort(present.begin(), present.end());
        for (auto a = arrivals.begin(); a != arrivals.end();) {
          if (a->deadline > now) {
            ++a;
            continue;
          }
          std::string why = absl::StrCat(
              "barrier \"", it->first, "\" timed out waiting for rank(s) ",
              MissingRanks(it->second.participants, present));
          if (!it->second.disagreed.empty()) {
            absl::StrAppend(
                &why, "; refused for expecting another participant count: ",
                absl::StrJoin(it->second.disagreed, ", ",
                              [](std::string* out, const auto& entry) {
                                absl::StrAppend(out, "rank ", entry.first, " (",
                                                entry.second, ")");
                              }));
          }
          expired.push_back([done = std::move(a->done), why] {
            done(absl::DeadlineExceededError(why));
          });
          a = arrivals.erase(a);
        }
        it = arrivals.empty() ? barriers_.erase(it) : std::next(it);
      }
    }
    for (auto& complete : expired) complete();
  }
}

}  // namespace cohort::coordinator
