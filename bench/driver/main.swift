import BenchSupport

// paypipe-bench: the end-to-end throughput benchmark driver. See bench/README.md.
//
//   bench/run                      # build, then the standard suite: W1, W2, scale-out 1/2/4, W3
//   bench/run --scenarios w1 --orders 20000 --rate 3000
PaypipeBench.main()
