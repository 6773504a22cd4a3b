# Start-up tests: a client started before its master, and published addresses other
# hosts cannot reach (a master in a network namespace created by the test).
mc_add_test(test_startup SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_startup.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/netns.c LIBS mc_store TIMEOUT 300)
target_include_directories(test_startup PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_startup mooncake_client mooncake_master)
# Transfer timeouts: a get from a holder whose host vanished falls over to the next
# replica within MC_TRANSFER_TIMEOUT plus the stated margin (namespace + veth made by the test).
mc_add_test(test_timeouts SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_timeouts.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/netns.c LIBS mc_store TIMEOUT 400)
target_include_directories(test_timeouts PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_timeouts mooncake_client mooncake_master)
