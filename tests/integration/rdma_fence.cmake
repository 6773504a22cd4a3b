# The rdma transport's cancellation and receiver-side fence (mc_rdma_fence): the test program is
# also the owner process it starts ("test_rdma_fence owner"). Needs the rdma transport (UCX).
if(USE_RDMA)
  mc_add_test(test_rdma_fence SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_rdma_fence.c
              ${CMAKE_CURRENT_SOURCE_DIR}/../support/proc.c LIBS mc_transfer TIMEOUT 240)
  target_include_directories(test_rdma_fence PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/../support)
endif()
