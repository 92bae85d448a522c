# The heap allocator of mambamt's programs (core/allocator.h says why):
# jemalloc, with the settings of core/jemalloc_conf.c, where it is installed
# (Debian: libjemalloc-dev; scripts/setup.sh installs it), glibc's malloc
# otherwise. Libraries do not link it; executables do, through
# mambamt_use_allocator(<target>), so that jemalloc serves malloc for the whole
# process (LibTorch's tensors included) from its first allocation.

option(MAMBAMT_JEMALLOC "Link jemalloc into mambamt's programs when it is installed" ON)
set(MAMBAMT_JEMALLOC_LINKED OFF)
if(MAMBAMT_JEMALLOC)
  find_library(MAMBAMT_JEMALLOC_LIBRARY NAMES jemalloc)
  if(MAMBAMT_JEMALLOC_LIBRARY)
    set(MAMBAMT_JEMALLOC_LINKED ON)
    add_library(mambamt_jemalloc_conf OBJECT ${PROJECT_SOURCE_DIR}/core/jemalloc_conf.c)
  else()
    message(WARNING "mambamt: jemalloc not found (Debian: libjemalloc-dev); programs use glibc's malloc, "
                    "whose fresh mappings make CPU training steps several times slower")
  endif()
endif()

# Links the allocator into executable <target> and defines MAMBAMT_JEMALLOC_LINKED=1
# in its sources when it is jemalloc.
function(mambamt_use_allocator target)
  if(NOT MAMBAMT_JEMALLOC_LINKED)
    return()
  endif()
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:mambamt_jemalloc_conf>)
  # --no-as-needed: nothing in the program calls jemalloc by name, and the
  # library must stay a dependency to replace malloc.
  target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed" ${MAMBAMT_JEMALLOC_LIBRARY}
                        "-Wl,--pop-state")
  target_compile_definitions(${target} PRIVATE MAMBAMT_JEMALLOC_LINKED=1)
endfunction()

# Puts the allocator first in the lookup scope of shared library <target>,
# which is loaded with RTLD_DEEPBIND (data/'s sentencepiece shim): such a
# library and what it loads look symbols up in their own dependencies before
# the program's, where libc's malloc and free and libstdc++'s operator new and
# delete come before the program's jemalloc. A block allocated on one side of
# the library's interface and freed on the other would meet two allocators
# (seen on the GPU machine: glibc's free() aborted on a block of jemalloc's
# inside sentencepiece's trainer). With jemalloc as the library's first
# dependency, its malloc, free, new and delete are found first there too.
function(mambamt_allocator_first_in_scope target)
  if(MAMBAMT_JEMALLOC_LINKED)
    target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed" ${MAMBAMT_JEMALLOC_LIBRARY}
                          "-Wl,--pop-state")
  endif()
endfunction()
