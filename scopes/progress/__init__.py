"""The progress model: what a scope knows of its children is counts at locations, nothing more.

Timely's ``progress/`` in Python.  Bottom up:

* :mod:`~scopes.progress.order`, :mod:`~scopes.progress.timestamp`: partial orders, timestamps
  (integers and ``Product``), path summaries, refinements between nested scopes.
* :mod:`~scopes.progress.antichain`, :mod:`~scopes.progress.change_batch`: frontiers and count updates.
* :mod:`~scopes.progress.location`: the ports of a scope's children (``Source``, ``Target``).
* :mod:`~scopes.progress.reachability`, :mod:`~scopes.progress.visit_order`: compiled path
  summaries, the pointstamp tracker, and the orders it visits work in.
* :mod:`~scopes.progress.operate`: the ``Operate`` interface, how a parent sees a child (the
  seed's *Scope* interface; :data:`scopes.Scope` is the same class).
* :mod:`~scopes.progress.subgraph`, :mod:`~scopes.progress.subgraph_builder`,
  :mod:`~scopes.progress.location_index`, :mod:`~scopes.progress.progcaster`: a scope made of
  child scopes, its graph, its numbered locations and its progress exchange between workers.
* :mod:`~scopes.progress.hooks`: the observer interface progress reports to.

Pure: these modules import nothing from the rest of :mod:`scopes` but the exception
classes (:mod:`scopes.errors`) and the channel protocols (:mod:`scopes.channel_protocols`),
and touch no sockets, files or threads (``tests/test_progress_purity.py`` checks).
This ``__init__`` imports none of them: :mod:`scopes.native` may put compiled builds of
some in front of the sources first.
"""
