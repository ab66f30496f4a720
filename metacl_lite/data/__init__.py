"""The data of the three benchmarks: their specifications, the task streams built from the official files, the
embedded MNIST subset and the checksum-verified downloads."""
