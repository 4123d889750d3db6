"""What kind of failure ended a sample: one `error_kind` per errored run, read from the error
inspect recorded (its message and traceback), so that a run's record says *why* it is `error`.

| error_kind      | what failed                                                             |
|-----------------|-------------------------------------------------------------------------|
| disk_full       | a disk (the sandbox's or the host's) had no space left                  |
| desktop_hung    | the desktop's server did not answer within the action timeout           |
| desktop_died    | the desktop's server went away (killed, crashed) mid-request            |
| desktop_start   | the desktop could not be started for the sample                         |
| setup_failed    | a task's setup step failed in the desktop                               |
| desktop_error   | the desktop's server refused or failed a request                        |
| model_refusal   | the untrusted model refused (the provider's refusal / content filter)   |
| model_api       | the model's API failed (HTTP errors after retries, malformed replies)   |
| limit           | an inspect limit (time, tokens, messages) ended the sample              |
| other           | anything else                                                           |

The first matching row wins, so e.g. a desktop request that failed because the disk was full is
`disk_full`. Model API answers that inspect retried (429, 5xx) and that then succeeded are not
errors: the runs table counts them in `model_retries`.
"""

from __future__ import annotations

import re

__all__ = ["ERROR_KINDS", "ModelRefusal", "classify_error"]

ERROR_KINDS: tuple[str, ...] = ("disk_full", "desktop_hung", "desktop_died", "desktop_start", "setup_failed",
                                "desktop_error", "model_refusal", "model_api", "limit", "other")


class ModelRefusal(RuntimeError):
    """The untrusted model refused to act (its provider stopped on a refusal / content filter)."""


_MODEL_API = re.compile(
    r"\b(?:anthropic|openai|httpx|google\.\w+|mistralai)\.\w*(?:Error|Exception)\b"
    r"|\b(?:APIStatusError|APIConnectionError|APITimeoutError|APIResponseValidationError|RateLimitError"
    r"|InternalServerError|BadRequestError|OverloadedError|ServiceUnavailableError|APIError)\b")
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("disk_full", re.compile(r"No space left on device|ENOSPC|\[Errno 28\]|Disk quota exceeded", re.I)),
    ("desktop_start", re.compile(r"desktop failed to start")),
    ("desktop_hung", re.compile(r"\bDesktopHung\b")),
    ("desktop_died", re.compile(r"\bDesktopDied\b")),
    ("model_refusal", re.compile(r"\bModelRefusal\b")),
)


def _last_exception(traceback: str) -> str:
    """The traceback's final `module.Class: message` lines (what was raised last)."""
    lines = [ln for ln in traceback.strip().splitlines() if ln and not ln.startswith(" ")]
    return "\n".join(lines[-3:])


def classify_error(message: str | None, traceback: str | None = None) -> str:
    """The `error_kind` of a sample error (see the table above)."""
    message, traceback = message or "", traceback or ""
    text = f"{message}\n{traceback}"
    for kind, pattern in _RULES:
        if pattern.search(text):
            return kind
    if "sample_init" in traceback:
        return "desktop_start"
    if re.search(r"\bSetupError\b|UnsupportedStepError", text):
        return "setup_failed"
    last = _last_exception(traceback) or message
    if _MODEL_API.search(last) or ("/inspect_ai/model/" in traceback and re.search(r"JSONDecodeError|ValidationError", last)):
        return "model_api"
    if re.search(r"\bDesktopError\b", text):
        return "desktop_error"
    if re.search(r"\bLimitExceededError\b|limit exceeded", text, re.I):
        return "limit"
    return "other"
