#pragma once

// cohortctl trace: a job's TraceData as a Chrome trace-event file, which
// Perfetto (ui.perfetto.dev) and chrome://tracing open. One process per
// agent, one thread (track) per replica; every span a complete ("X")
// event, in microseconds from the trace's first span.
//
// Waits on stragglers are derived here: every rank runs the same
// collectives in the same order (the span's `seq`), so a collective cannot
// finish before its last rank has started it. Each rank that started a
// collective earlier than the latest one gets a "wait for stragglers" span,
// nested in its collective, from its start to the latest start, naming the
// ranks it waited for. The coordinator has put every span on its clock, so
// starts compare across hosts.

#include "cohort/v1/trace.pb.h"
#include "nlohmann/json.hpp"

namespace cohort::ctl {

nlohmann::json ChromeTrace(const v1::TraceData& trace);

}  // namespace cohort::ctl
