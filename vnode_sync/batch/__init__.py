"""Batch-system hooks (Slurm prolog/epilog, PBS/TORQUE prologue/epilogue) that report jobs to the coordinator."""
