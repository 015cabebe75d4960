"""Profile first: where a program's time goes, what the roofline says can be gained, and which
tuning jobs would gain it (``tuner roofline``, ``tuner profile``, ``tuner plan``)."""
