"""Control evaluations of GUI computer-use agents on real desktops."""

__version__ = "0.1.0"
