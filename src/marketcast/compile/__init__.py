"""Compile toolkit: settings, guarded runtime, stress harness, recompile analyzer, persistent cache.

Entry points: :func:`load_settings` / ``CompileSettings.mode_for`` (models), :class:`GuardedCompile` (models
wrap their fixed-shape step), :func:`marketcast.compile.check.run_check` (stress harness),
:func:`marketcast.compile.analyze.analyze_file`, :func:`marketcast.compile.compare.compare_files`.
"""

from marketcast.compile.runtime import GuardedCompile, find_guards, graph_break_count, recompile_count
from marketcast.compile.settings import MODES, CompileSettings, load_settings

__all__ = ["MODES", "CompileSettings", "GuardedCompile", "find_guards", "graph_break_count", "load_settings",
           "recompile_count"]
