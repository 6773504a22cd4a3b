# Eviction and leases ("acknowledged means kept"): real master and holder processes,
# in-process store clients as writer and reader (tests/integration/test_eviction.c).
mc_add_test(test_eviction SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_eviction.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store Threads::Threads
            TIMEOUT 600)
target_include_directories(test_eviction PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_eviction store_rw mooncake_client mooncake_master)
