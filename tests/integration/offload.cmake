# Offload integration tests: real mooncake_master --enable_offload and mooncake_client
# --enable_offload processes on loopback, with local and distributed (posix) backends in a
# temporary directory.
# A reader of local-disk replicas through their owner (the offload_server.h reader side itself).
add_executable(offload_fetcher ${CMAKE_CURRENT_SOURCE_DIR}/offload_fetcher.c)
target_link_libraries(offload_fetcher PRIVATE mc_store)
mc_add_test(test_offload SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_offload.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 900 COST 35)
target_include_directories(test_offload PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_offload mooncake_client mooncake_master offload_fetcher)
# The distributed-backend tests again with MOONCAKE_DISTRIBUTED_FS_TYPE=daos, on the libdfs test
# double (its containers are made with dfs_double_mkcont; a real DAOS needs a pool, so this entry
# exists only in builds against the double). DFS_DOUBLE_EQ_ASYNC=1: operations with events run
# later on the double's worker threads, so a buffer or event reused before completion shows.
if(USE_DAOS AND DAOS_TEST_DOUBLE)
  add_dependencies(test_offload dfs_double_mkcont)
  add_test(NAME test_offload_daos COMMAND test_offload)
  set_tests_properties(test_offload_daos PROPERTIES TIMEOUT 600 COST 35
    ENVIRONMENT "MC_TEST_OFFLOAD_FS_TYPE=daos;DFS_DOUBLE_EQ_ASYNC=1")
endif()
# Crashes: SIGKILLed masters and holders, restarts, what acknowledged writes survive.
mc_add_test(test_offload_crash SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_offload_crash.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 900 COST 100)
target_include_directories(test_offload_crash PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_offload_crash mooncake_client mooncake_master)
if(USE_DAOS AND DAOS_TEST_DOUBLE)
  add_dependencies(test_offload_crash dfs_double_mkcont)
  add_test(NAME test_offload_crash_daos COMMAND test_offload_crash)
  set_tests_properties(test_offload_crash_daos PROPERTIES TIMEOUT 600 COST 50
    ENVIRONMENT "MC_TEST_OFFLOAD_FS_TYPE=daos;DFS_DOUBLE_EQ_ASYNC=1")
endif()
# Promotion of disk-only objects back to memory on a hit (--promotion_on_hit, promotion.c).
mc_add_test(test_promotion SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_promotion.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 600 COST 40)
target_include_directories(test_promotion PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_promotion mooncake_client mooncake_master)
