# ccache where present. PCH and ccache only mix with these sloppiness settings;
# they are passed through the environment so a user's ccache.conf stays as it is.
# CCACHE_BASEDIR and CCACHE_NOHASHDIR make the cache independent of where the
# checkout lies: a fresh clone elsewhere (CI's, after a session on the same
# machine) hits what an earlier build of the same sources left in the cache.
if(MAMBAMT_USE_CCACHE)
  find_program(CCACHE_PROGRAM ccache)
  if(CCACHE_PROGRAM)
    set(_launcher ${CMAKE_COMMAND} -E env
        "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
        "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}"
        "CCACHE_NOHASHDIR=1"
        ${CCACHE_PROGRAM})
    set(CMAKE_C_COMPILER_LAUNCHER ${_launcher})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${_launcher})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${_launcher})
    message(STATUS "mambamt: using ccache (${CCACHE_PROGRAM})")
  endif()
endif()
