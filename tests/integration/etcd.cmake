# The etcd v3 client (src/common/etcd.c) against a real 3-member etcd cluster on
# loopback (Debian's etcd 3.4 at /usr/bin/etcd, installed by dependencies.sh).
mc_add_test(test_etcd SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_etcd.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/etcd_cluster.c LIBS mc_store TIMEOUT 300)
target_include_directories(test_etcd PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support
                           ${PROJECT_SOURCE_DIR}/src/common)
