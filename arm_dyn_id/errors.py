"""Exceptions of the core. Each subclasses a builtin and names what was wrong."""


class URDFError(ValueError):
    """A URDF could not be read or loaded; the message names the file."""


class JointNameError(KeyError):
    """A joint name is not in the model or the data; the message names it."""

    def __str__(self):
        # KeyError quotes its argument; show the message as written.
        return str(self.args[0]) if self.args else ''


class ConfigError(ValueError):
    """A configuration value is invalid; the message names parameter and value."""


class RankDeficientError(ValueError):
    """The data cannot identify some parameters; the message names them."""


class DataError(ValueError):
    """Measured data is unusable (NaN, gaps, wrong shapes, missing topics)."""


class GapError(DataError):
    """A record that must be continuous (a full-dynamics fit's) has a gap; the message
    says where and how long."""


class RecordingError(OSError):
    """A bag could not be created or written; the message names the file and the OS error."""
