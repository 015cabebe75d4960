"""A neighbour module that a bring-your-own kernel imports by its plain name."""

SCALE = 2.0
