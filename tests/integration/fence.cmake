# Receiver-side fences: a transfer reported failed never lands afterwards when the receiver (a
# te_peer target, a mooncake_client holder) or a same-host writer was stopped with the bytes
# queued or mid-copy. Real processes; memory read with process_vm_readv.
mc_add_test(test_fence SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_fence.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/cluster.c LIBS mc_store TIMEOUT 300)
target_include_directories(test_fence PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_fence te_peer store_rw mooncake_client mooncake_master)
