"""Everything that can stop a model load and that a user can fix, one class per cause.

All are `specviz.errors.UserError`s: the CLI prints them as one line and the app shows them.
"""

from specviz.errors import UserError


class UnknownPresetError(UserError):
    """A pair name that is not a preset."""


class HubUnavailableError(UserError):
    """A model that must come from the Hugging Face Hub, which cannot be reached."""


class CustomModelsDisabledError(UserError):
    """A custom model asked for where SPECVIZ_ALLOW_CUSTOM_MODELS=0."""


class MissingModelError(UserError):
    """A path that does not exist or holds no model, or an id that is neither."""


class UnsafeWeightsError(UserError):
    """Weights only available as pickles, or a model that needs its own code."""


class MissingPartsError(UserError):
    """Part packages of a bundled model are not installed."""


class ChecksumError(UserError):
    """An assembled file whose sha256 is not the expected one."""


class VocabMismatchError(UserError):
    """A draft and a target that map strings to ids differently."""


class CorruptModelError(UserError):
    """Model files that cannot be read: truncated, corrupt, or not what their name says."""


class MemoryBudgetError(UserError):
    """A load that would not fit the memory budget."""


class DeviceError(UserError):
    """An unknown or unavailable device or dtype."""
