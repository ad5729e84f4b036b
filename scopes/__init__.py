"""The progress model of timely dataflow, and dataflow graph building.

Pure: no sockets, files or threads.  See the README for a tour.
"""
