// A two-rank MPI_Send/MPI_Recv ping-pong over message sizes from --min to --max bytes
// (each size 2x the last), for any MPI (built with mpicc.mpich or mpicc.openmpi by
// compare_mpi.py and tests/integration/test_mpi.py). First 10 x --warmup untimed round
// trips of the smallest size; then per size: --check round trips
// whose every byte is checked on both ranks (a fresh pattern each), then --warmup and
// --iters timed round trips of the same buffers, then --check checked ones again. Rank 0
// prints one JSON document: each size's one-way latency (half a round trip's mean) and
// the count of checked messages. Exit status 1 on a wrong byte or a bad argument.
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEMA_VERSION 1
#define TAG 7

struct Options {
  long min_bytes, max_bytes, iters, warmup, check;
};

static int ParseLong(const char* name, const char* text, long low, long high, long* out) {
  char* end = NULL;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < low || value > high) {
    fprintf(stderr, "mpi_pingpong: %s %s: want an integer from %ld to %ld\n", name, text, low, high);
    return 0;
  }
  *out = value;
  return 1;
}

static int ParseOptions(int argc, char** argv, struct Options* o) {
  *o = (struct Options){256, 1 << 20, 1000, 100, 3};
  for (int i = 1; i < argc; i += 2) {
    long* field = !strcmp(argv[i], "--min")      ? &o->min_bytes
                  : !strcmp(argv[i], "--max")    ? &o->max_bytes
                  : !strcmp(argv[i], "--iters")  ? &o->iters
                  : !strcmp(argv[i], "--warmup") ? &o->warmup
                  : !strcmp(argv[i], "--check")  ? &o->check
                                                 : NULL;
    if (field == NULL || i + 1 >= argc) {
      fprintf(stderr, "mpi_pingpong: unknown or incomplete option '%s'; options: --min, --max (bytes), --iters, "
                      "--warmup, --check (round trips)\n", argv[i]);
      return 0;
    }
    if (!ParseLong(argv[i], argv[i + 1], 0, 1L << 30, field)) return 0;
  }
  if (o->min_bytes < 1 || o->min_bytes > o->max_bytes || o->iters < 1) {
    fprintf(stderr, "mpi_pingpong: want 1 <= --min <= --max and --iters >= 1 (got %ld, %ld, %ld)\n", o->min_bytes,
            o->max_bytes, o->iters);
    return 0;
  }
  return 1;
}

static uint8_t PatternByte(long seed, long i) { return (uint8_t)(seed * 131 + i * 7 + (i >> 8)); }

static void Fill(uint8_t* buffer, long bytes, long seed) {
  for (long i = 0; i < bytes; ++i) buffer[i] = PatternByte(seed, i);
}

// The index of the first wrong byte, or -1.
static long FirstWrong(const uint8_t* buffer, long bytes, long seed) {
  for (long i = 0; i < bytes; ++i) {
    if (buffer[i] != PatternByte(seed, i)) return i;
  }
  return -1;
}

// Round trips with a fresh pattern each way, every byte checked where it arrives.
static long CheckedRoundTrips(int rank, uint8_t* buffer, long bytes, long count, long seed0) {
  long checked = 0;
  for (long r = 0; r < count; ++r) {
    long out = seed0 + 2 * r, back = out + 1;
    if (rank == 0) {
      Fill(buffer, bytes, out);
      MPI_Send(buffer, (int)bytes, MPI_BYTE, 1, TAG, MPI_COMM_WORLD);
      MPI_Recv(buffer, (int)bytes, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buffer, (int)bytes, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    long wrong = FirstWrong(buffer, bytes, rank == 0 ? back : out);
    if (wrong >= 0) {
      fprintf(stderr, "mpi_pingpong: rank %d, %ld-byte message %ld: byte %ld is %u, want %u\n", rank, bytes, r, wrong,
              buffer[wrong], PatternByte(rank == 0 ? back : out, wrong));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 1) {
      Fill(buffer, bytes, back);
      MPI_Send(buffer, (int)bytes, MPI_BYTE, 0, TAG, MPI_COMM_WORLD);
    }
    checked += 2;
  }
  return checked;
}

static double TimedRoundTrips(int rank, uint8_t* buffer, long bytes, long count) {
  double start = MPI_Wtime();
  for (long r = 0; r < count; ++r) {
    if (rank == 0) {
      MPI_Send(buffer, (int)bytes, MPI_BYTE, 1, TAG, MPI_COMM_WORLD);
      MPI_Recv(buffer, (int)bytes, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buffer, (int)bytes, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer, (int)bytes, MPI_BYTE, 0, TAG, MPI_COMM_WORLD);
    }
  }
  return MPI_Wtime() - start;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  struct Options o;
  if (!ParseOptions(argc, argv, &o) || size != 2) {
    if (size != 2 && rank == 0) fprintf(stderr, "mpi_pingpong: run with exactly 2 ranks (got %d)\n", size);
    MPI_Finalize();
    return 1;
  }
  // Heap memory, as an application's: the registration caches under test see what it is.
  uint8_t* buffer = malloc((size_t)o.max_bytes);
  if (buffer == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  int library_bytes = 0;
  MPI_Get_library_version(library, &library_bytes);
  for (char* c = library; *c; ++c) {
    if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = ' ';
  }
  if (rank == 0) printf("{\"schema_version\": %d, \"mpi\": \"%.80s\", \"results\": [", SCHEMA_VERSION, library);
  // The first messages of a job pay for connection setup (UCX moves from its wireup lane to
  // the connected one) and for the launcher's processes still settling: without this the
  // first size measured came out 1.5x its steady state.
  TimedRoundTrips(rank, buffer, o.min_bytes, 10 * o.warmup);
  long checked = 0, seed = 1;
  for (long bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    checked += CheckedRoundTrips(rank, buffer, bytes, o.check, seed);
    seed += 2 * o.check;
    TimedRoundTrips(rank, buffer, bytes, o.warmup);
    double seconds = TimedRoundTrips(rank, buffer, bytes, o.iters);
    checked += CheckedRoundTrips(rank, buffer, bytes, o.check, seed);
    seed += 2 * o.check;
    if (rank == 0) {
      printf("%s{\"bytes\": %ld, \"lat_us\": %.3f}", bytes == o.min_bytes ? "" : ", ", bytes,
             seconds * 1e6 / (2.0 * (double)o.iters));
      fflush(stdout);
    }
  }
  if (rank == 0) printf("], \"checked_messages\": %ld}\n", checked);
  free(buffer);
  MPI_Finalize();
  return 0;
}
