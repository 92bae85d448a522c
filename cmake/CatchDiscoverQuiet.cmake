# Discovers the test cases of one tag group of a Catch2 test executable
# (run with -P after each build, in place of Catch2's CatchAddTests.cmake,
# with the same -D variables). A group the executable has no test case of
# (most executables have no [cuda] or [slurm] ones) gets an empty test list
# without Catch2's "contains no tests!" warning, which said nothing wrong
# and buried real warnings of the build. Any other group is discovered by
# Catch2's script, MAMBAMT_CATCH_ADD_TESTS (set by the generated wrapper
# that includes this file).
# Empty means no name listed and exit status 0 (Catch2 v2 exits with the
# number of names it lists, modulo 256, so the status alone would take 256
# test cases for none; a crash lists none either, and goes on to Catch2's
# script, which reports it).
execute_process(
  COMMAND ${TEST_EXECUTOR} "${TEST_EXECUTABLE}" ${TEST_SPEC} --list-test-names-only
  RESULT_VARIABLE result
  OUTPUT_VARIABLE names
  WORKING_DIRECTORY "${TEST_WORKING_DIR}")
string(STRIP "${names}" names)
if(result EQUAL 0 AND names STREQUAL "")
  file(WRITE "${CTEST_FILE}" "set(${TEST_LIST} \"\")\n")
  return()
endif()
include("${MAMBAMT_CATCH_ADD_TESTS}")
