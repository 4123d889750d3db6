"""How far a desktop's evidence can be trusted (docs/integrity.md): its provider's integrity
record, read once a sample's run is over (both families' scorers put it in their records)."""

from __future__ import annotations

import asyncio

from control_osworld.desktop.provider import get_provider

__all__ = ["integrity_record"]


async def integrity_record(env) -> dict:
    """The desktop provider's integrity record (evidence_trust and limit counters)."""
    handle = getattr(env, "handle", None)
    if handle is None:
        return {"evidence_trust": "unknown"}
    try:
        return await asyncio.to_thread(get_provider(handle.provider).integrity, handle)
    except Exception as e:  # never lose the score over it
        return {"evidence_trust": handle.info.get("evidence_trust", "unknown"), "error": str(e)}
