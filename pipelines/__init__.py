"""Inference Almanac pipelines: from stored artifacts to tables, sweeps and projections.

Pipelines read artifacts only (through core.artifacts); they never import a backend.
"""
