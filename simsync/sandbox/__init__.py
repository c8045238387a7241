"""The sandbox every untrusted input runs in: bubblewrap, a seccomp filter and resource limits
(:mod:`simsync.sandbox.bubblewrap`, :mod:`simsync.sandbox.seccomp`).

A low package: it imports nothing of simsync but its errors and its files, so both the grader
(a student's submission) and the TensorFlow backend's program import (a user's program) use
the one sandbox, and the one way back out of it (:mod:`~simsync.sandbox.channel`,
:mod:`~simsync.sandbox.wire`).
"""
