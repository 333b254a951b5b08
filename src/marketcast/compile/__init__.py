"""Compile toolkit: settings, guarded runtime, stress harness, recompile analyzer, persistent cache."""

from marketcast.compile.runtime import GuardedCompile, graph_break_count, recompile_count
from marketcast.compile.settings import MODES, CompileSettings, load_settings

__all__ = ["MODES", "CompileSettings", "GuardedCompile", "graph_break_count", "load_settings", "recompile_count"]
