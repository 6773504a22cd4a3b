# FS adapter benchmark: scripts/daos_adapter_bench.sh driving daos_adapter_bench under MPI on
# localhost (DRYRUN output, validation errors, posix and — with the test double — daos runs).
if(TARGET daos_adapter_bench)
  add_test(NAME daos_adapter_bench_script
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_daos_adapter_bench.py)
  set_tests_properties(daos_adapter_bench_script PROPERTIES TIMEOUT 600 COST 40
    ENVIRONMENT "MC_BUILD_DIR=${PROJECT_BINARY_DIR};MC_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  if(DAOS_TEST_DOUBLE)
    add_dependencies(daos_adapter_bench dfs_double_mkcont)
  endif()
endif()
