// paypipe-bench: the throughput benchmark driver (issue 6). Work in progress.
print("paypipe-bench: not built yet")
