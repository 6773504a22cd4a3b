# Transfer Engine integration tests: a real target process (te_peer) and an initiator test.
add_executable(te_peer ${CMAKE_CURRENT_SOURCE_DIR}/te_peer.c)
target_link_libraries(te_peer PRIVATE mc_transfer)
mc_add_test(test_transfer SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_transfer.c
            ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c LIBS mc_transfer TIMEOUT 300)
target_include_directories(test_transfer PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
add_dependencies(test_transfer te_peer)
# The same tests with the rdma transport's progress spin on (MC_RDMA_SPIN_US, both ends: te_peer
# inherits the environment): spinning must not lose a completion nor outlive a deadline.
if(USE_RDMA)
  add_test(NAME test_transfer_rdma_spin COMMAND test_transfer)
  set_tests_properties(test_transfer_rdma_spin PROPERTIES TIMEOUT 300
                       ENVIRONMENT "MC_RDMA_SPIN_US=200")
endif()
