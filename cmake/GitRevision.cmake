# generated/mambamt_version.h holds the git revision; refreshed on every build
# and rewritten only when it changed, so it does not trigger rebuilds.
set(MAMBAMT_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${MAMBAMT_GENERATED_DIR})
add_custom_target(mambamt_git_revision ALL
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR}
          -DOUT=${MAMBAMT_GENERATED_DIR}/mambamt_version.h
          -DVERSION=${PROJECT_VERSION}
          -P ${CMAKE_CURRENT_LIST_DIR}/WriteGitRevision.cmake
  BYPRODUCTS ${MAMBAMT_GENERATED_DIR}/mambamt_version.h
  COMMENT "" VERBATIM)
