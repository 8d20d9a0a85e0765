#pragma once

// Plain-text tables for cohortctl's listings.

#include <string>
#include <vector>

namespace cohort::ctl {

// The rows with each column padded to its widest cell plus two spaces, one
// line per row. Rows may be shorter than others.
std::string AlignColumns(const std::vector<std::vector<std::string>>& rows);

}  // namespace cohort::ctl
