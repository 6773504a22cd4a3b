# HTTP metadata service: the library server and client in-process, then the standalone
# mooncake_http_metadata_server binary (spawned from MC_BUILD_DIR/tools).
mc_add_test(test_http_metadata SOURCES test_http_metadata.c LIBS mc_transfer Threads::Threads)
add_dependencies(test_http_metadata mooncake_http_metadata_server)
