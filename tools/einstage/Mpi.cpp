#include "tools/einstage/Mpi.h"

#include "runtime/Context.h"
#include "tools/einstage/Command.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#if EINSTAGE_HAVE_MPI
#include <mpi.h>
#endif

namespace einstage::cli {

std::optional<LauncherJob> launcher_job() {
  auto number = [](const char* name) -> std::optional<int> {
    const char* text = std::getenv(name);
    if (!text || !*text) return std::nullopt;
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*end != '\0' || value < 0 || value > (1 << 30)) return std::nullopt;
    return static_cast<int>(value);
  };
  for (auto [rank, size] : {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, std::pair{"PMI_RANK", "PMI_SIZE"},
                            std::pair{"PMIX_RANK", "OMPI_COMM_WORLD_SIZE"}})
    if (std::optional<int> r = number(rank), n = number(size); r && n && *n >= 1) return LauncherJob{*r, *n};
  return std::nullopt;
}

#if EINSTAGE_HAVE_MPI

bool have_mpi() { return true; }

int run_in_mpi_job(const std::function<void(int rank, int ranks)>& job) {
  MPI_Init(nullptr, nullptr);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  try {
    job(rank, ranks);
  } catch (const std::exception& e) {
    const int status = print_error(e, fmt::format("rank {}: ", rank));
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, status);
    return status;  // not reached: MPI_Abort ends the job
  }
  MPI_Finalize();
  return 0;
}

void mpi_barrier() { MPI_Barrier(MPI_COMM_WORLD); }

namespace {

// MPI counts are ints: large partials travel in pieces of at most 1 GiB.
constexpr int64_t kPiece = int64_t{1} << 30;

void send_bytes(const void* data, int64_t bytes, int tag) {
  const auto* p = static_cast<const char*>(data);
  for (int64_t at = 0; at < bytes; at += kPiece)
    MPI_Send(p + at, static_cast<int>(std::min(kPiece, bytes - at)), MPI_BYTE, 0, tag, MPI_COMM_WORLD);
}

void receive_bytes(void* data, int64_t bytes, int source, int tag) {
  auto* p = static_cast<char*>(data);
  for (int64_t at = 0; at < bytes; at += kPiece)
    MPI_Recv(p + at, static_cast<int>(std::min(kPiece, bytes - at)), MPI_BYTE, source, tag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
}

}  // namespace

Tensor execute_distributed(const einsum::SlicedEinsumPlan& plan, std::span<const Tensor> operands,
                           ExecutionContext& context, int rank, int ranks) {
  const auto [first, last] = einsum::rank_chunks(plan.num_chunks(), rank, ranks);
  std::vector<Tensor> mine = plan.execute_chunks(operands, context, &context.pool(), first, last);
  if (rank != 0) {
    for (size_t k = 0; k < mine.size(); ++k)
      send_bytes(mine[k].raw_data(), static_cast<int64_t>(mine[k].nbytes()), static_cast<int>(first) + static_cast<int>(k));
    return Tensor();
  }
  // Rank 0: every chunk's partial in chunk order (its own first, then rank 1's, ...), summed in that order.
  std::vector<Tensor> all = std::move(mine);
  for (int r = 1; r < ranks; ++r) {
    const auto [a, b] = einsum::rank_chunks(plan.num_chunks(), r, ranks);
    for (int64_t c = a; c < b; ++c) {
      Tensor t = Tensor::empty(plan.dtype(), plan.output_shape());
      receive_bytes(t.raw_data(), static_cast<int64_t>(t.nbytes()), r, static_cast<int>(c));
      all.push_back(std::move(t));
    }
  }
  return einsum::SlicedEinsumPlan::sum_in_order(all);
}

#else

bool have_mpi() { return false; }

int run_in_mpi_job(const std::function<void(int, int)>&) {
  usage_error("einsum: --mpi distributes the slices over MPI ranks, and this einstage was built without MPI; install "
              "OpenMPI (libopenmpi-dev) and rebuild to use it");
}

void mpi_barrier() {}

Tensor execute_distributed(const einsum::SlicedEinsumPlan&, std::span<const Tensor>, ExecutionContext&, int, int) {
  usage_error("einsum: distribution needs an einstage built with MPI");
}

#endif

}  // namespace einstage::cli
