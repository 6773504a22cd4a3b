# Network-fault tests (a late TCP write after a failed put): a link cut in a network namespace
# (ip netns, veth, tc) in the middle of a put. Needs root (CAP_NET_ADMIN) and iproute2; skips
# otherwise.
mc_add_test(test_netfault SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_netfault.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/netns.c LIBS mc_store TIMEOUT 600)
target_include_directories(test_netfault PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_netfault store_rw mooncake_client mooncake_master)
