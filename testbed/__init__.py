"""Local stand-ins for a cluster: loop devices, HDFS daemons, Slurm, readers; for tests, demos and benchmarks."""
