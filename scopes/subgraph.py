"""The old import path of :mod:`scopes.progress.subgraph`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.subgraph import Subgraph

__all__ = ["Subgraph"]
