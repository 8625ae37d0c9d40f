"""Agents that run on storage and compute nodes."""
