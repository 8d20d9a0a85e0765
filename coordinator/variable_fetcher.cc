#include "coordinator/variable_fetcher.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cohort/v1/ps.grpc.pb.h"
#include "ps_client/dtype.h"
#include "rpc/channel.h"

namespace cohort::coordinator {
namespace {

constexpr std::string_view kPartMarker = "/part_";

// "w/part_2" -> ("w", 2); an unsplit name -> (name, -1).
std::pair<std::string, int> SplitPartName(const std::string& stored) {
  const size_t at = stored.rfind(kPartMarker);
  int index = -1;
  if (at != std::string::npos &&
      absl::SimpleAtoi(
          absl::string_view(stored).substr(at + kPartMarker.size()), &index) &&
      index >= 0) {
    return {stored.substr(0, at), index};
  }
  return {stored, -1};
}

absl::StatusOr<v1::VariableValue> Join(const std::string& name,
                                       std::vector<StoredPart*> parts) {
  auto broken = [&name](auto&&... why) {
    return absl::DataLossError(
        absl::StrCat("variable '", name,
                     "': its parts on the ps tasks do not "
                     "fit together: ",
                     why...));
  };
  std::sort(parts.begin(), parts.end(), [](StoredPart* a, StoredPart* b) {
    return SplitPartName(a->spec.name()).second <
           SplitPartName(b->spec.name()).second;
  });
  const v1::PsVariableSpec& first = parts.front()->spec;
  v1::VariableValue out;
  out.set_name(name);
  out.set_dtype(ps::DTypeName(first.dtype()));
  int64_t rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const v1::PsVariableSpec& spec = parts[i]->spec;
    const int index = SplitPartName(spec.name()).second;
    if (parts.size() > 1 && index != static_cast<int>(i)) {
      return broken("part ", i, " is missing");
    }
    if (spec.dtype() != first.dtype()) {
      return broken(spec.name(), " is ", ps::DTypeName(spec.dtype()), ", ",
                    first.name(), " is ", ps::DTypeName(first.dtype()));
    }
    if (spec.shape_size() != first.shape_size() ||
        (spec.shape_size() > 0 &&
         !std::equal(spec.shape().begin() + 1, spec.shape().end(),
                     first.shape().begin() + 1))) {
      return broken(spec.name(), " has shape ", ps::ShapeString(spec.shape()),
                    ", ", first.name(), " has ",
                    ps::ShapeString(first.shape()));
    }
    const int64_t elements =
        ps::NumElements(spec.shape(), std::numeric_limits<int64_t>::max());
    if (elements < 0 || static_cast<int64_t>(parts[i]->value.size()) !=
                            elements * ps::DTypeSize(spec.dtype())) {
      return broken(spec.name(), " holds ", parts[i]->value.size(),
                    " bytes, not those of ", ps::ShapeString(spec.shape()));
    }
    rows += spec.shape_size() > 0 ? spec.shape(0) : 1;
    out.mutable_value()->append(parts[i]->value);
    out.set_updates(out.updates() + parts[i]->updates);
  }
  out.mutable_shape()->CopyFrom(first.shape());
  if (out.shape_size() > 0) out.set_shape(0, rows);
  return out;
}

// One shard's listed parts, with their values.
absl::Status ReadShard(int shard, const std::string& address,
                       const rpc::Security& security, const std::string& job_id,
                       absl::Duration timeout, std::vector<StoredPart>& parts) {
  const rpc::Connection connection(address, security);
  auto stub = v1::ParameterServer::NewStub(connection.channel());
  auto failed = [&](absl::string_view method, const grpc::Status& status) {
    const absl::Status annotated = connection.Annotate(method, status);
    return absl::Status(annotated.code(),
                        absl::StrCat("ps:", shard, ": ", annotated.message()));
  };
  v1::ListVariablesRequest list;
  list.set_job_id(job_id);
  v1::ListVariablesResponse listed;
  grpc::Status status =
      stub->ListVariables(connection.NewContext(timeout).get(), list, &listed);
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
    return absl::FailedPreconditionError(
        absl::StrCat("ps:", shard, ": ", status.error_message(),
                     " (a later ParameterServer job replaced them)"));
  }
  if (!status.ok()) return failed("ParameterServer.ListVariables", status);
  if (listed.variables().empty()) return absl::OkStatus();

  v1::PullRequest pull;
  pull.set_job_id(job_id);
  pull.set_worker("coordinator");
  std::map<std::string, size_t> index;  // stored name -> parts[i]
  for (const v1::PsVariableSpec& spec : listed.variables()) {
    pull.add_names(spec.name());
    index[spec.name()] = parts.size();
    parts.push_back({spec, std::string(), 0});
  }
  std::unique_ptr<grpc::ClientContext> context = connection.NewContext(timeout);
  auto reader = stub->Pull(context.get(), pull);
  v1::PullResponse message;
  while (reader->Read(&message)) {
    for (const v1::TensorChunk& chunk : message.chunks()) {
      auto it = index.find(chunk.name());
      if (it == index.end()) continue;
      StoredPart& part = parts[it->second];
      if (part.value.size() != static_cast<size_t>(chunk.total_bytes())) {
        part.value.assign(static_cast<size_t>(chunk.total_bytes()), '\0');
      }
      if (chunk.offset() < 0 ||
          chunk.offset() + static_cast<int64_t>(chunk.data().size()) >
              chunk.total_bytes()) {
        return absl::DataLossError(
            absl::StrCat("ps:", shard, ": a chunk of '", chunk.name(),
                         "' lies outside its ", chunk.total_bytes(), " bytes"));
      }
      std::copy(chunk.data().begin(), chunk.data().end(),
                part.value.begin() + chunk.offset());
      part.updates = chunk.version();
    }
  }
  status = reader->Finish();
  if (!status.ok()) return failed("ParameterServer.Pull", status);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<v1::VariableValue>> JoinParts(
    std::vector<StoredPart> parts, const std::vector<std::string>& names) {
  std::map<std::string, std::vector<StoredPart*>> by_name;
  for (StoredPart& part : parts) {
    by_name[SplitPartName(part.spec.name()).first].push_back(&part);
  }
  std::vector<std::string> missing;
  for (const std::string& name : names) {
    if (by_name.count(name) == 0) missing.push_back(name);
  }
  if (!missing.empty()) {
    std::vector<std::string> held;
    for (const auto& [name, unused] : by_name) held.push_back(name);
    return absl::InvalidArgumentError(absl::StrCat(
        "no ps task holds ", missing.size() == 1 ? "variable " : "variables ",
        absl::StrJoin(missing, ", "), "; the job's variables are: ",
        held.empty() ? "(none)" : absl::StrJoin(held, ", ")));
  }
  const std::set<std::string> wanted(names.begin(), names.end());
  std::vector<v1::VariableValue> out;
  for (auto& [name, its_parts] : by_name) {
    if (!wanted.empty() && wanted.count(name) == 0) continue;
    absl::StatusOr<v1::VariableValue> joined = Join(name, its_parts);
    if (!joined.ok()) return joined.status();
    out.push_back(*std::move(joined));
  }
  return out;
}

absl::StatusOr<std::vector<v1::VariableValue>> FetchPsVariables(
    const std::vector<std::string>& ps_addresses, const rpc::Security& security,
    const std::string& job_id, const std::vector<std::string>& names,
    absl::Duration timeout) {
  std::vector<StoredPart> parts;
  for (size_t shard = 0; shard < ps_addresses.size(); ++shard) {
    absl::Status read = ReadShard(static_cast<int>(shard), ps_addresses[shard],
                                  security, job_id, timeout, parts);
    if (!read.ok()) return read;
  }
  return JoinParts(std::move(parts), names);
}

}  // namespace cohort::coordinator
