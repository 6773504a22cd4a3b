# Dummy clients (mc_store_setup_dummy) served by a real mooncake_client: real master and
# mooncake_client processes on loopback, dummies in the test process and in forked children.
mc_add_test(test_dummy SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_dummy.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 300)
target_include_directories(test_dummy PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_dummy mooncake_client mooncake_master)
