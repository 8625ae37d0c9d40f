"""The harness of the MPI-IO test suite in benchmarks/mpi-io/ (the program, its README, `run`):
the experiments (figN_*.py), the launcher and the emulated disk, importable as a package
(a directory named mpi-io cannot be)."""
