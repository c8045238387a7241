"""One process, one ``tf.compat.v1.Session``: the IR lowered to TensorFlow and run step by step.

``lower.py`` turns each IR op into TensorFlow ops under its own name scope (each kind's
lowering rule); ``execute.py`` runs the client loop (``asynchronous.py``: one thread per
client) and records the Trace; ``tracing.py`` reads ``step_stats``; ``runtime.py`` imports
TensorFlow and plans its devices; ``work.py``, ``model.py`` and ``ring.py`` build the
compute, the model and the ring all-reduce; ``keras_reference.py`` trains Keras's synchronised
batch norm as a reference.
"""
