"""The sandbox every untrusted input runs in: bubblewrap, a seccomp filter and resource limits
(:mod:`simsync.sandbox.bubblewrap`, :mod:`simsync.sandbox.seccomp`).

A leaf package: it imports nothing of simsync but its errors, so both the grader (a student's
submission) and the TensorFlow backend's program import (a user's program) use the one
sandbox.
"""
