"""Hugging Face Hub sources: use what is already downloaded, download only when the Hub answers.

Without internet, huggingface_hub retries for a long time before giving up. A model that is not
in the local Hub cache is therefore only fetched after a quick check that the Hub is reachable
(`HF_HUB_OFFLINE=1` skips even that); otherwise the user gets one clear sentence.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from specviz.models.errors import HubUnavailableError, MissingModelError, UnsafeWeightsError
from specviz.yes_no import yes_no

# What a causal LM needs; never pickled weights (*.bin, *.pt): only safetensors are fetched.
ALLOW = ["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "tokenizer*"]
CONNECT_TIMEOUT_S = 3.0


def offline_env() -> bool:
    return any(yes_no(os.environ.get(v)) is True for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def reachable() -> bool:
    """True if a TCP connection to the Hub endpoint opens within a few seconds."""
    if offline_env():
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def cached_snapshot(repo_id: str) -> Path | None:
    """The local snapshot folder of `repo_id` if its config and weights were downloaded before."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=ALLOW, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError):
        return None
    ok = (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))
    return folder if ok else None


def snapshot(repo_id: str, what: str) -> Path:
    """A local folder holding `repo_id`'s config, tokenizer and safetensors weights.

    `what` names the model for messages (e.g. "preset smollm2, target").
    """
    folder = cached_snapshot(repo_id)
    if folder is not None:
        return folder
    if not reachable():
        raise HubUnavailableError(
            f"{what}: {repo_id} needs the Hugging Face Hub, which is not reachable from here "
            f"({'HF_HUB_OFFLINE is set' if offline_env() else 'no connection'}), and it is not in the local "
            "Hub cache; this model is not available offline. Use the bundled pair (qwen-coder) or a local model."
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=ALLOW))
    except GatedRepoError:
        raise HubUnavailableError(
            f"{what}: {repo_id} is gated on the Hub: accept its licence there and set HF_TOKEN"
        ) from None
    except RepositoryNotFoundError:
        raise MissingModelError(f"{what}: there is no model {repo_id} on the Hub (or it is private)") from None
    except (HfHubHTTPError, OSError) as e:
        raise HubUnavailableError(f"{what}: downloading {repo_id} from the Hub failed ({type(e).__name__}: {e})") from e
    if not any(folder.glob("*.safetensors")):
        raise UnsafeWeightsError(
            f"{what}: {repo_id} has no safetensors weights; specviz does not load pickled checkpoints"
        )
    return folder
