# Fast failure detection (src/master/liveness.c): a SIGKILLed holder is dropped long before its
# --client_ttl; a stopped one whose connections were reset under it is kept. Real processes.
mc_add_test(test_liveness SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_liveness.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 300)
target_include_directories(test_liveness PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_liveness mooncake_client mooncake_master)
