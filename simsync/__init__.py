"""simsync: simulate TensorFlow's data-parallel execution model, then check it on TensorFlow.

The package is layered in the order data flows through it (see docs/architecture.md):
``scenario`` -> ``patterns`` -> ``ir`` -> ``engine`` -> ``trace`` -> ``viz`` -> ``cli``.
TensorFlow is never imported by the simulator.
"""

__version__ = "0.1.0"
