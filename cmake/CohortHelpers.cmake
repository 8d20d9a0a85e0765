include(GoogleTest)

# cohort_test(NAME LABEL unit|integration|e2e SOURCES ... DEPS ... [TIMEOUT s]
#             [LOCK resource])
# One GoogleTest binary, its tests registered with CTest under LABEL. Tests
# that share a LOCK never run at once under `ctest -j`.
function(cohort_test name)
  cmake_parse_arguments(T "" "LABEL;TIMEOUT;LOCK" "SOURCES;DEPS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  set(lock)
  if(T_LOCK)
    set(lock RESOURCE_LOCK ${T_LOCK})
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_DEPS} cohort_test_support GTest::gtest GTest::gmock GTest::gtest_main)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 30
    PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT} ${lock}
               ENVIRONMENT "COHORT_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
endfunction()

# cohort_vectorize(SOURCE ...)
# Element-wise loops (optimizer updates, reductions, the examples' layers)
# that GCC vectorizes only at -O3, whose cost model, unlike -O2's, accepts a
# remainder loop, and whose square roots it vectorizes only without errno.
# SIMD additions, multiplications, divisions and square roots round as the
# scalar ones do, and -ffp-contract=off forbids fused multiply-adds on
# targets that have them, so results stay bitwise the same.
function(cohort_vectorize)
  set_source_files_properties(${ARGN} PROPERTIES
    COMPILE_OPTIONS "-O3;-fno-math-errno;-ffp-contract=off")
endfunction()
