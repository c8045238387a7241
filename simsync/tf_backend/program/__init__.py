"""A user's own TensorFlow program, imported into simsync's IR.

``simsync simulate train.py`` runs ``train.py`` in the sandbox (:mod:`simsync.sandbox`) with
TensorFlow's ``Session`` observed (:mod:`~simsync.tf_backend.program.capture`): the graph and
the fetches of its training loop (the ``sess.run`` each thread calls again and again) are
captured, a few steps are traced for their costs, and the program is stopped. The graph
becomes an IR :class:`~simsync.ir.Graph` (:mod:`~simsync.tf_backend.program.convert`), one
IR op per TensorFlow op that a step runs; towers and sync points are found from it
(:mod:`~simsync.tf_backend.program.towers`). :func:`capture_program` runs it
(:mod:`~simsync.tf_backend.program.load`, which imports no TensorFlow: only the child does),
and :func:`simsync.simulation.importing.import_program`, the entry point, fits its costs;
:mod:`~simsync.tf_backend.program.whatif` changes the imported graph (more towers, other
speeds, another link). See docs/importing.md.
"""

from simsync.tf_backend.program.load import Imported, ProgramError, capture_program

__all__ = ["Imported", "ProgramError", "capture_program"]
