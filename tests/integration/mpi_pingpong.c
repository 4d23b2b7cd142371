/* A two-rank MPI ping-pong for tests/integration/test_mpi.py: rank 0 sends ITERATIONS
 * messages of SIZE bytes, rank 1 returns each; every byte is checked on both sides. Prints
 * the one-way latency in microseconds; exits non-zero on any mismatch. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kWarmup = 100, kIterations = 2000, kSize = 8 };

static int check(const unsigned char *buffer, int iteration) {
  for (int i = 0; i < kSize; ++i) {
    if (buffer[i] != (unsigned char)(iteration * 31 + i)) return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_pingpong: run with 2 ranks, not %d\n", size);
    MPI_Finalize();
    return 2;
  }
  unsigned char buffer[kSize];
  int bad = 0;
  double start = 0;
  for (int n = 0; n < kWarmup + kIterations; ++n) {
    if (n == kWarmup) start = MPI_Wtime();
    if (rank == 0) {
      for (int i = 0; i < kSize; ++i) buffer[i] = (unsigned char)(n * 31 + i);
      MPI_Send(buffer, kSize, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      memset(buffer, 0, sizeof(buffer));
      MPI_Recv(buffer, kSize, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buffer, kSize, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      bad += !check(buffer, n);
      MPI_Send(buffer, kSize, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
    if (rank == 0) bad += !check(buffer, n);
  }
  const double elapsed = MPI_Wtime() - start;
  int all_bad = 0;
  MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("mpi_pingpong: %d B one-way %.2f us over %d round trips, %d mismatches\n", kSize,
           elapsed * 1e6 / (2.0 * kIterations), kIterations, all_bad);
  }
  MPI_Finalize();
  return all_bad == 0 ? 0 : 1;
}
