# Master high availability on a real 3-member etcd cluster (docs/ha.md): failover under a verified
# load, a stalled leader deposed, every master restarted from the operation log. Each case is an
# entry of its own (SPLIT: each starts its own etcd cluster), so the cases run side by side.
mc_add_test(test_ha SPLIT SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ha.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/etcd_cluster.c LIBS mc_store TIMEOUT 600 COST 40)
target_include_directories(test_ha PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support
                           ${PROJECT_SOURCE_DIR}/src/common)
add_dependencies(test_ha mooncake_client mooncake_master store_rw)
# No split brain: a leader partitioned from etcd (network namespace + veth, link cut) accepts no put
# once another master is elected.
mc_add_test(test_ha_partition SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_ha_partition.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/etcd_cluster.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/netns.c LIBS mc_store TIMEOUT 300)
target_include_directories(test_ha_partition PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support
                           ${PROJECT_SOURCE_DIR}/src/common)
add_dependencies(test_ha_partition mooncake_client mooncake_master store_rw)
