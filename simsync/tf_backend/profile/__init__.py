"""This machine's profile: measured (``calibrate.py``) and cached per machine (``machine.py``)."""
