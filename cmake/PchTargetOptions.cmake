# GCC uses a precompiled header only in files compiled with the target (-m)
# options it was built with, and some of those follow the optimisation level:
# GCC 13 on x86-64 turns -munroll-only-small-loops and -mvzeroupper on at -O2
# and off at -O1. There the tests' -O1 files (MAMBAMT_TEST_CXX_FLAGS) rejected the -O2 LibTorch
# header (-Winvalid-pch) and parsed <torch/torch.h> again, file by file.
# mambamt_match_pch_target_options() asks the compiler which -m options differ
# between the two sets of flags (-Q --help=target) and appends to
# MAMBAMT_TEST_CXX_FLAGS, in the caller's scope, the -m/-mno- options that give
# the tests the header's settings. GCC 12 has no such difference: nothing added.
function(mambamt_match_pch_target_options)
  if(NOT MAMBAMT_USE_PCH OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU" OR NOT MAMBAMT_TEST_CXX_FLAGS)
    return()
  endif()
  string(TOUPPER "${CMAKE_BUILD_TYPE}" _cfg)
  if(NOT _cfg MATCHES "^(RELEASE|RELWITHDEBINFO)$")
    return()  # the tests' flags apply to these configurations only
  endif()
  separate_arguments(_pch_flags UNIX_COMMAND "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_cfg}}")
  set(_test_flags ${_pch_flags} ${MAMBAMT_TEST_CXX_FLAGS})
  foreach(_which pch test)
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} ${_${_which}_flags} -Q --help=target
                    OUTPUT_VARIABLE _out ERROR_QUIET RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      return()
    endif()
    # Lines "  -mfoo    [enabled]": the on/off options, one "name=state" each.
    string(REGEX MATCHALL "\n[ \t]+-m[^ \t\n=]+[ \t]+\\[(enabled|disabled)\\]" _lines "${_out}")
    set(_${_which}_states "")
    foreach(_line IN LISTS _lines)
      string(REGEX REPLACE "^[ \t\n]+(-m[^ \t\n=]+)[ \t]+\\[([a-z]+)\\]$" "\\1=\\2" _state "${_line}")
      list(APPEND _${_which}_states "${_state}")
    endforeach()
  endforeach()
  set(_added "")
  foreach(_state IN LISTS _pch_states)
    if(_state IN_LIST _test_states)
      continue()
    endif()
    string(REGEX REPLACE "=.*" "" _opt "${_state}")
    if(NOT "${_opt}=enabled" IN_LIST _test_states AND NOT "${_opt}=disabled" IN_LIST _test_states)
      continue()  # not listed for the tests' flags at all
    endif()
    if(_state MATCHES "=enabled$")
      list(APPEND _added "${_opt}")
    elseif(_opt MATCHES "^-mno-")
      string(REGEX REPLACE "^-mno-" "-m" _neg "${_opt}")
      list(APPEND _added "${_neg}")
    else()
      string(REGEX REPLACE "^-m" "-mno-" _neg "${_opt}")
      list(APPEND _added "${_neg}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _added)  # -mred-zone and -mno-red-zone are listed both
  if(_added)
    message(STATUS "mambamt: the tests' flags take ${_added} from the precompiled header's")
    set(MAMBAMT_TEST_CXX_FLAGS ${MAMBAMT_TEST_CXX_FLAGS} ${_added} PARENT_SCOPE)
  endif()
endfunction()
