"""Interactive lessons in the terminal: predict, simulate, verify on TensorFlow."""
