"""The measuring side: timers, environment capture, studies, and ``python -m bench``."""
