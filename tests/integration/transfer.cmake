# Transfer Engine integration tests: a real target process (te_peer) and an initiator test.
add_executable(te_peer ${CMAKE_CURRENT_SOURCE_DIR}/te_peer.c)
target_link_libraries(te_peer PRIVATE mc_transfer)
mc_add_test(test_transfer SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_transfer.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c LIBS mc_transfer TIMEOUT 300)
target_include_directories(test_transfer PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_transfer te_peer)
