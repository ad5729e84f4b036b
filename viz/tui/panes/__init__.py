"""The viewer's five panes, one module each: what each shows and how it redraws itself from the model.

Each pane yields its widgets into the app's layout and redraws them from a
:class:`~viz.model.Model` and a :class:`~viz.model.View`; the app keeps what the
user chose (the worker, the location in the stuck view, the table's order) and
passes it in.
"""
