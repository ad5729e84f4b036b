"""The old import path of :mod:`scopes.progress.antichain`, kept so that existing imports keep working.

The progress model lives in :mod:`scopes.progress`; import from there in new code.
"""

from scopes.progress.antichain import Antichain, MutableAntichain

__all__ = ["Antichain", "MutableAntichain"]
