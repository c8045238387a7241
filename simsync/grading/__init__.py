"""Course assignments and their grader: students write the graph, simsync grades it by
structure, simulation and TensorFlow (see docs/assignments.md).

Student code runs only in :mod:`simsync.sandbox.bubblewrap`, in a separate process; what comes
back is a graph as plain data (:func:`simsync.ir.graph_from_dict`), graded here.
"""

from simsync.grading.assignment import Assignment, AssignmentError, Check, load_assignments
from simsync.grading.grader import Grade, Result, grade

__all__ = [
    "Assignment",
    "AssignmentError",
    "Check",
    "Grade",
    "Result",
    "grade",
    "load_assignments",
]
