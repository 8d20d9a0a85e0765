# COHORT_WITH_CUDA / COHORT_WITH_NCCL: ON, OFF or AUTO (the default). AUTO
# builds the support in when the toolkit is found under /usr/local/cuda (or
# CUDAToolkit_ROOT) and leaves it out cleanly otherwise; ON makes a missing
# toolkit a configure error.

set(COHORT_WITH_CUDA AUTO CACHE STRING "Build CUDA support: ON, OFF or AUTO")
set(COHORT_WITH_NCCL AUTO CACHE STRING "Build NCCL support: ON, OFF or AUTO")
set_property(CACHE COHORT_WITH_CUDA PROPERTY STRINGS ON OFF AUTO)
set_property(CACHE COHORT_WITH_NCCL PROPERTY STRINGS ON OFF AUTO)

set(COHORT_HAVE_CUDA OFF)
set(COHORT_HAVE_NCCL OFF)

if(NOT COHORT_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND NOT DEFINED CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  if(CUDAToolkit_FOUND AND EXISTS "${CMAKE_CUDA_COMPILER}")
    # Kernels (optimizers, the CUDA example) are built for the data-centre
    # GPUs the project targets: Ampere and Hopper.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    set(CMAKE_CUDA_STANDARD 17)  # nvcc here knows C++17 kernels best
    enable_language(CUDA)
    set(COHORT_HAVE_CUDA ON)
  elseif(COHORT_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "COHORT_WITH_CUDA=ON but no CUDA toolkit was found "
                        "(set CUDAToolkit_ROOT)")
  endif()
endif()

if(COHORT_HAVE_CUDA AND NOT COHORT_WITH_NCCL STREQUAL "OFF")
  find_path(NCCL_INCLUDE_DIR nccl.h
            HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_ROOT}/include)
  find_library(NCCL_LIBRARY nccl
               HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_ROOT}/lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(COHORT_HAVE_NCCL ON)
    add_library(cohort_nccl_external UNKNOWN IMPORTED)
    set_target_properties(cohort_nccl_external PROPERTIES
      IMPORTED_LOCATION ${NCCL_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
  endif()
endif()
if(COHORT_WITH_NCCL STREQUAL "ON" AND NOT COHORT_HAVE_NCCL)
  message(FATAL_ERROR "COHORT_WITH_NCCL=ON but NCCL (and CUDA) was not found")
endif()

message(STATUS "Cohort: CUDA support ${COHORT_HAVE_CUDA}, NCCL support ${COHORT_HAVE_NCCL}")

# COHORT_FUZZ: build the libFuzzer targets under tests/fuzz/ (tools/fuzz.sh).
# Needs clang (Debian's clang-14); everything is then built with coverage
# instrumentation, AddressSanitizer and UndefinedBehaviorSanitizer.
option(COHORT_FUZZ "Build the libFuzzer targets (clang only)" OFF)
if(COHORT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "COHORT_FUZZ needs clang: configure with "
                        "CC=clang-14 CXX=clang++-14 (tools/fuzz.sh does)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined
                      -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# COHORT_SANITIZE: build everything, tests and daemons alike, under
# sanitizers: "address,undefined" (ASan and UBSan) or "thread" (TSan).
# tools/sanitize.sh builds and runs the whole suite this way.
set(COHORT_SANITIZE "" CACHE STRING
    "Sanitizers for every target: address,undefined or thread")
if(COHORT_SANITIZE)
  if(NOT COHORT_SANITIZE MATCHES "^(address,undefined|address|undefined|thread)$")
    message(FATAL_ERROR "COHORT_SANITIZE=${COHORT_SANITIZE}: use "
                        "address,undefined or thread")
  endif()
  if(COHORT_HAVE_CUDA)
    message(FATAL_ERROR "COHORT_SANITIZE needs -DCOHORT_WITH_CUDA=OFF: nvcc "
                        "does not build with host sanitizers")
  endif()
  add_compile_options(-fsanitize=${COHORT_SANITIZE} -fno-omit-frame-pointer)
  if(COHORT_SANITIZE MATCHES "undefined")
    # A UBSan finding fails the process, so that a test cannot pass over it.
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
  add_link_options(-fsanitize=${COHORT_SANITIZE})
endif()
