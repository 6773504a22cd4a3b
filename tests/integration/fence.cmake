# Receiver-side fences: a transfer reported failed never lands afterwards when the receiver (a
# te_peer target, a mooncake_client holder) or a same-host writer was stopped with the bytes
# queued or mid-copy. Real processes; memory read with process_vm_readv. An entry per case (SPLIT):
# most of their time is waiting, so they run side by side.
mc_add_test(test_fence SPLIT SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_fence.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 600 COST 40)
target_include_directories(test_fence PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_fence te_peer store_rw mooncake_client mooncake_master)
# The same across a master failover (3-member etcd, two masters with HA and the operation log): a
# failed put to a stopped holder, and a same-host writer stalled between PutStart and its copy.
mc_add_test(test_fence_ha SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_fence_ha.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/etcd_cluster.c LIBS mc_store TIMEOUT 600 COST 85)
target_include_directories(test_fence_ha PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support
                           ${PROJECT_SOURCE_DIR}/src/common)
add_dependencies(test_fence_ha store_rw mooncake_client mooncake_master)
