# generated/mambamt_version.cpp defines core::version() and
# core::git_revision() (core/version.h); refreshed on every build and
# rewritten only when it changed. Only that one small file is compiled again
# when the revision moves, and no other object's contents depend on it, so a
# fresh clone at another commit still hits ccache for everything else.
set(MAMBAMT_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${MAMBAMT_GENERATED_DIR})
set(MAMBAMT_VERSION_SOURCE ${MAMBAMT_GENERATED_DIR}/mambamt_version.cpp)
add_custom_target(mambamt_git_revision ALL
  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR}
          -DOUT=${MAMBAMT_VERSION_SOURCE}
          -DVERSION=${PROJECT_VERSION}
          -P ${CMAKE_CURRENT_LIST_DIR}/WriteGitRevision.cmake
  BYPRODUCTS ${MAMBAMT_VERSION_SOURCE}
  COMMENT "" VERBATIM)
