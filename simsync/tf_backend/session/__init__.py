"""One process, one ``tf.compat.v1.Session``: the IR lowered to TensorFlow and run step by step.

``lower.py`` turns each IR op into TensorFlow ops under its own name scope (each kind's
lowering rule); ``prepare.py`` lowers a scenario and holds what every client loop shares
(feeds, one ``sess.run``, the result); ``execute.py`` runs one client's loop and
``asynchronous.py`` one thread per racing client; ``tracing.py`` reads ``step_stats`` into
the Trace; ``runtime.py`` imports TensorFlow and plans its devices; ``work.py``, ``model.py``
and ``ring.py`` build the compute, the model and the ring all-reduce; ``progress.py`` says
how far a run is; ``keras_reference.py`` trains Keras's synchronised batch norm as a reference.
"""
