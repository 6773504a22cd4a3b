# cmake/mpi.cmake — MPI for daos_adapter_bench, included by the top level. MPICH is preferred
# (the guide's choice): its compiler wrapper mpicc.mpich is given to FindMPI when present and no
# MPI_C_COMPILER was chosen; else FindMPI's default (Open MPI on Debian when MPICH is absent).
# Results: MPI_C_FOUND, MPI::MPI_C, MC_MPI_FAMILY (mpich|openmpi|unknown) and MC_MPIEXEC (the
# launcher of that same MPI), which the benchmark records and daos_adapter_bench.sh checks.
find_program(MC_MPICH_MPICC NAMES mpicc.mpich)
if(MC_MPICH_MPICC AND NOT MPI_C_COMPILER)
  set(MPI_C_COMPILER ${MC_MPICH_MPICC} CACHE FILEPATH "MPI C compiler wrapper (MPICH preferred)")
endif()
find_package(MPI COMPONENTS C QUIET)
if(NOT MPI_C_FOUND)
  message(STATUS "MPI not found: daos_adapter_bench is not built (install mpich libmpich-dev)")
  return()
endif()
set(_mpi_text "${MPI_C_COMPILER};${MPI_C_LIBRARIES};${MPI_C_INCLUDE_DIRS}")
if(_mpi_text MATCHES "mpich")
  set(MC_MPI_FAMILY mpich)
  find_program(MC_MPIEXEC NAMES mpirun.mpich mpiexec.mpich mpiexec.hydra)
elseif(_mpi_text MATCHES "openmpi|open-mpi|ompi")
  set(MC_MPI_FAMILY openmpi)
  find_program(MC_MPIEXEC NAMES mpirun.openmpi mpiexec.openmpi)
else()
  set(MC_MPI_FAMILY unknown)
endif()
if(NOT MC_MPIEXEC)
  set(MC_MPIEXEC "${MPIEXEC_EXECUTABLE}")
endif()
message(STATUS "daos_adapter_bench: MPI = ${MC_MPI_FAMILY} (${MPI_C_COMPILER}), launcher ${MC_MPIEXEC}")
