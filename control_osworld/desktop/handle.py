"""A running desktop as plain, serialisable data: where its server listens and what to kill.

Its own module, below both the client and the providers, so that neither imports the other
for it (desktop/provider.py re-exports it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DesktopHandle(BaseModel):
    """A running desktop: how to reach its server and how to end it."""

    model_config = ConfigDict(frozen=True)

    provider: str
    id: str
    base_url: str = "http://desktop"
    uds: str | None = None
    """Unix socket the server listens on (local provider); None means TCP at base_url."""
    screen_width: int = 1920
    screen_height: int = 1080
    info: dict = Field(default_factory=dict)
    """Provider-specific (pids, container ids, state dir, sink address)."""
