# Security tests: the cluster secret on every connection, with a real master and
# holders, and raw sockets playing the peer that does not know the secret.
mc_add_test(test_security SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_security.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 300)
target_include_directories(test_security PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_security mooncake_client mooncake_master)
