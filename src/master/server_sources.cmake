# server_sources.cmake — the master's network front ends (library mc_master_server, defined in
# CMakeLists.txt): the RPC server on libuv (transport in rpc_server.c, what each RPC does in
# rpc_handlers.c), its failure detector (liveness.c) and the admin/metrics HTTP server on
# libmicrohttpd, the operation log and election on etcd, and server.c, which runs them all as one
# master (what mooncake_master starts).
set(MC_MASTER_SERVER_SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/rpc_server.c
    ${CMAKE_CURRENT_SOURCE_DIR}/rpc_handlers.c
    ${CMAKE_CURRENT_SOURCE_DIR}/admin_http.c
    ${CMAKE_CURRENT_SOURCE_DIR}/liveness.c
    ${CMAKE_CURRENT_SOURCE_DIR}/ha.c
    ${CMAKE_CURRENT_SOURCE_DIR}/oplog.c
    ${CMAKE_CURRENT_SOURCE_DIR}/server.c)
