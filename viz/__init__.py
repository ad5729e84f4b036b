"""Visual tooling for pytimely: a Graphviz renderer and a Textual terminal UI.

Both are to be fed by the runtime's instrumentation events and to show the scope
hierarchy and the live frontier at every location.  Neither exists yet; they
are tracked as their own issues.  Until then, ``runtime.Worker.explain_stuck``
and ``scopes.reachability.Tracker.blockers`` explain what holds a frontier back.
"""
