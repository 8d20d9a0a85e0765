#pragma once

// The --auth_token_file and --tls_* flags, shared by every binary (daemons
// and cohortctl), so that they are spelled and documented once.

#include "rpc/security.h"

namespace cohort::rpc {

SecurityFiles SecurityFilesFromFlags();

}  // namespace cohort::rpc
