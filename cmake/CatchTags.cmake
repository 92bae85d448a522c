# Catch2 v2 from Debian (or unpacked from its .deb on the GPU machine).
find_package(Catch2 2 REQUIRED)
include(Catch)

# Registers every test case of <target> with CTest, one group per tag class.
# A test case with several of the tags lands in the first matching group.
# `--warn NoTests` fails a CTest test whose name matches no test case (a name
# CTest or Catch would split), instead of passing it with nothing run.
function(mambamt_register_catch_tests target env)
  catch_discover_tests(${target}
    TEST_SPEC "~[.]~[slow]~[mpi]~[slurm]~[cuda]" TEST_PREFIX "${target}:" EXTRA_ARGS --warn NoTests
    PROPERTIES LABELS "unit" ENVIRONMENT "${env}" TIMEOUT 600)
  catch_discover_tests(${target}
    TEST_SPEC "[slow]~[mpi]~[slurm]~[cuda]" EXTRA_ARGS --warn NoTests TEST_PREFIX "${target}:slow:"
    PROPERTIES LABELS "slow" ENVIRONMENT "${env}" TIMEOUT 1800)
  catch_discover_tests(${target}
    TEST_SPEC "[mpi]~[slurm]~[cuda]" EXTRA_ARGS --warn NoTests TEST_PREFIX "${target}:mpi:"
    PROPERTIES LABELS "mpi" ENVIRONMENT "${env}" TIMEOUT 1800 RUN_SERIAL TRUE)
  catch_discover_tests(${target}
    TEST_SPEC "[slurm]~[cuda]" EXTRA_ARGS --warn NoTests TEST_PREFIX "${target}:slurm:"
    PROPERTIES LABELS "slurm" ENVIRONMENT "${env}" TIMEOUT 2400 RUN_SERIAL TRUE
               FIXTURES_REQUIRED mambamt_slurm_cluster)
  catch_discover_tests(${target}
    TEST_SPEC "[cuda]" EXTRA_ARGS --warn NoTests TEST_PREFIX "${target}:cuda:"
    PROPERTIES LABELS "cuda" ENVIRONMENT "${env}" TIMEOUT 1800)
endfunction()
