"""Composition root: reads config, builds clients and engines, registers workflows and activities."""
