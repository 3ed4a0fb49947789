"""Importers: results measured by other tools, turned into canonical run artifacts."""
