# Start-up tests (issue 12): a client started before its master, and published addresses other
# hosts cannot reach (a master in a network namespace created by the test).
mc_add_test(test_startup SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_startup.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 300)
target_include_directories(test_startup PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_startup mooncake_client mooncake_master)
