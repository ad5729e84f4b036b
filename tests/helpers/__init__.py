"""Modules the tests share: recordings and pilots for the viewer, columnar batches, example loading,
and the programs some tests run in processes of their own.

The tests import them as ``helpers.NAME``: pytest puts ``tests/`` on the path,
and a cluster's processes inherit it.  Nothing here is collected as a test.
"""
