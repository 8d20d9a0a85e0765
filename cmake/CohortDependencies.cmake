# Third-party packages, all from Debian 12 (see tools/setup.sh).

find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(GTest CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(OpenSSL REQUIRED)  # SHA-256 of step libraries
find_package(ZLIB REQUIRED)     # CRC-32 of record files, gzipped IDX files
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)  # /metrics
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)  # examples' BLAS

find_program(COHORT_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
