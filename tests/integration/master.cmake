# mooncake_master integration tests: the real binary on loopback, driven over RPC (mc_rpc_call with
# store.proto bodies) and over HTTP (raw sockets), plus its command line and config files.
mc_add_test(test_master SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_master.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c LIBS mc_wire mc_common TIMEOUT 300)
target_include_directories(test_master PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_master mooncake_master)
