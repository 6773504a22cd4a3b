# Transfer Engine etcd:// metadata: te_peer processes and in-process engines against a
# real 3-member etcd cluster on loopback (tests/support/etcd_cluster.c).
mc_add_test(test_te_etcd SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_te_etcd.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/etcd_cluster.c LIBS mc_store TIMEOUT 300 COST 40)
target_include_directories(test_te_etcd PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support
                           ${PROJECT_SOURCE_DIR}/src/common)
add_dependencies(test_te_etcd te_peer mooncake_master mooncake_client)
