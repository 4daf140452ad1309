"""Lifting: what a GPU was really given (an image, a raw dump, a capture of tinygrad's submissions) back to a program."""
