"""Every yes/no switch in the environment reads its words one way; what an unknown word means
stays each switch's own."""

import pytest

from specviz.app.config import PageConfig
from specviz.engine import runtime_prepare
from specviz.errors import UserError
from specviz.models.catalogue import hub
from specviz.models.catalogue.sources import custom_allowed
from specviz.yes_no import yes_no


@pytest.mark.parametrize(
    "text, read",
    [("1", True), (" TRUE ", True), ("Yes", True), ("on", True), ("0", False), ("False", False), ("no", False)]
    + [(" OFF", False), (None, None), ("", None), ("  ", None), ("maybe", None), ("2", None), ("y", None)],
)
def test_the_words_read(text, read):
    assert yes_no(text) is read


def test_an_unknown_word_keeps_each_switchs_own_meaning(monkeypatch):
    with pytest.raises(UserError, match="SPECVIZ_PRELOAD is 'maybe'"):
        PageConfig.from_env({"SPECVIZ_PRELOAD": "maybe"})
    assert PageConfig.from_env({"SPECVIZ_PRELOAD": " "}).preload is True  # blank is unset
    assert custom_allowed({"SPACE_ID": "a/b", "SPECVIZ_ALLOW_CUSTOM_MODELS": "maybe"}) is True
    assert custom_allowed({"SPACE_ID": "a/b", "SPECVIZ_ALLOW_CUSTOM_MODELS": "Off"}) is False
    assert runtime_prepare.enabled({"SPECVIZ_PREPARE": "maybe"}) is True
    assert runtime_prepare.enabled({"SPECVIZ_PREPARE": ""}) is True
    assert runtime_prepare.enabled({"SPECVIZ_PREPARE": " No "}) is False
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "maybe")
    assert hub.offline_env() is False
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", " On")
    assert hub.offline_env() is True
