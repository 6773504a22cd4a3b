# Master snapshots and restore: a real mooncake_master with --enable_snapshot and
# --enable_snapshot_restore, mooncake_client holders and in-process store clients on loopback.
mc_add_test(test_snapshot SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_snapshot.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 600)
target_include_directories(test_snapshot PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_snapshot mooncake_client mooncake_master)
