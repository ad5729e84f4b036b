"""The old import path of :mod:`scopes.progress.operate`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.operate import ConnectivityLike, Operate, Updates

__all__ = ["ConnectivityLike", "Operate", "Updates"]
