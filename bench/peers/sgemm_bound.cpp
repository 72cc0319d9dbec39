// The oneDNN SGEMM peak of this machine, the bound bench/fusion.sh quotes:
// dnnl_sgemm (the library dtf-run's matmul and convolutions use) on square
// float32 matrices, best of R runs after one warm-up, in GFLOP/s. Threads:
// OMP_NUM_THREADS.
//   usage: sgemm_bound [N [R]]   (default 1024, 10)
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1024;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  if (n <= 0 || n > 8192 || reps <= 0 || reps > 1000) {
    std::fprintf(stderr, "usage: sgemm_bound [N in 1..8192 [R in 1..1000]]\n");
    return 2;
  }
  std::vector<float> a(size_t(n * n), 1.0f), b(size_t(n * n), 0.5f),
      c(size_t(n * n), 0.0f);
  double best = 0;
  for (int r = 0; r <= reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                   c.data(), n) != dnnl_success) {
      std::fprintf(stderr, "sgemm_bound: dnnl_sgemm failed\n");
      return 1;
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (r > 0) // the first run is the warm-up
      best = std::max(best, 2.0 * double(n) * double(n) * double(n) / s / 1e9);
  }
  if (c[0] != 0.5f * float(n)) {
    std::fprintf(stderr, "sgemm_bound: wrong product\n");
    return 1;
  }
  std::printf("%.1f\n", best);
  return 0;
}
