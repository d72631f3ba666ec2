// `einstage einsum --mpi`: a sliced einsum spread over the ranks of an MPI job (OpenMPI; mpirun -np N einstage ...).
//
// Part of tools/ (the libraries know nothing of MPI). Built with MPI when CMake finds it (EINSTAGE_HAVE_MPI);
// otherwise --mpi is an error that says distribution needs an einstage built with MPI. The distribution: every rank
// reads the inputs itself (from a shared file system; the alternative, rank 0 broadcasting them, would save reads at
// the cost of holding them twice on rank 0 and is not done) and prepares the same SlicedEinsumPlan (planning is
// deterministic); rank r contracts chunks [r*C/R, (r+1)*C/R) (rank_chunks) on its threads and sends their partials
// to rank 0 in chunk order; rank 0 adds all C partials in chunk order, so the result has the same bits as the
// single-process sliced run, at any number of ranks and threads. Only rank 0 prints or writes -o. A rank that fails
// prints "einstage: rank R: <message>" and aborts the whole job with its exit status (MPI_Abort), so no rank waits
// for it forever.
#pragma once

#include "extensions/einsum/exec/SlicedEinsum.h"

#include <functional>
#include <optional>

namespace einstage::cli {

/// Whether this einstage was built with MPI.
bool have_mpi();

/// This process's place in a job an MPI launcher started (mpirun / mpiexec of OpenMPI, MPICH or PMIx set
/// OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE or PMIX_RANK with OMPI's size), read from the environment; nullopt when
/// no launcher started this process. Known with or without MPI built in: `einsum` refuses to run N whole copies
/// under mpirun without --mpi, and says so when --mpi is given outside a launcher.
struct LauncherJob {
  int rank = 0, size = 1;
};
std::optional<LauncherJob> launcher_job();

/// Runs `job` inside an MPI job: initialises MPI, calls job(rank, ranks), finalises, returns 0. An exception escaping
/// the job on any rank prints "einstage: rank R: <message>" and aborts every rank with the exit status print_error()
/// gives (Command.h). Without MPI: a usage error saying that distribution needs an einstage built with MPI.
int run_in_mpi_job(const std::function<void(int rank, int ranks)>& job);

/// Waits until every rank of the job gets here (MPI_Barrier); what `--time` starts the contraction's clock after.
void mpi_barrier();

/// The sliced contraction over the job's ranks; rank 0 gets the sum, the others an undefined tensor.
Tensor execute_distributed(const einsum::SlicedEinsumPlan& plan, std::span<const Tensor> operands,
                           ExecutionContext& context, int rank, int ranks);

}  // namespace einstage::cli
