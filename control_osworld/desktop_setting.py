"""What every desktop family's ControlArena Setting shares (the control family's
`OSWorldControlSetting`, the dilemma family's `DilemmaDesktopSetting`): the desktop (provider,
spec, live view), the model's view of it (size, settle time), bash on offer, one desktop per
sample through the `desktop` sandbox, and the loop's `submit` tool. Each family's Setting adds
its dataset, setup, tools and scorer."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from control_arena import ControlTaskMetadata
from control_arena.settings import Setting
from control_arena.tools.submit_tool import SubmitToolConfig
from inspect_ai.tool import Tool, bash
from inspect_ai.util import SandboxEnvironmentSpec
from pydantic import Field

from control_osworld.agent.tools import SubmitArgs
from control_osworld.desktop.provider import DesktopSpec, ProviderName
from control_osworld.desktop.sandbox import DesktopSandboxConfig
from control_osworld.run_spec import RUN_DEFAULTS, RunSpec

__all__ = ["DesktopSetting"]


class DesktopSetting(Setting):
    """The shared fields and methods of the desktop Settings (abstract: no name, no dataset)."""

    submit_description: ClassVar[str] = "End the run."
    """The `submit` tool's description the agent reads (each family words its own)."""

    provider: ProviderName = Field(default=RUN_DEFAULTS.provider, description="Desktop provider: local | docker | remote | k8s | osworld-vm.")
    desktop: DesktopSpec = Field(default_factory=DesktopSpec)
    allow_bash: bool = Field(default=False, description="Offer bash on every task (else only where a task allows).")
    live_view: bool | Literal["control"] = Field(
        default=False, description="A view-only browser view of each sample's desktop while it runs (URL in the "
        "progress log and the sample's store); `control`: a take-over page instead (agent/takeover.py).")
    model_width: int = RUN_DEFAULTS.model_width
    model_height: int = RUN_DEFAULTS.model_height
    settle_s: float = Field(default=RUN_DEFAULTS.settle_s, description="Pause between an action and its screenshot.")

    def model_size(self) -> tuple[int, int]:
        """The resolution the model sees and gives coordinates in."""
        return self.model_width, self.model_height

    def run_spec(self, **knobs: Any) -> RunSpec:
        """The run's one spec, which the scaffold and the desktop tools take: the knobs this
        Setting holds (`_spec_fields`) with `knobs`, those a task holds (budget, keep_screenshots,
        max_samples, policy). Checked and frozen (RunSpec)."""
        return RunSpec(**{**self._spec_fields(), **knobs})

    def _spec_fields(self) -> dict[str, Any]:
        """The RunSpec knobs this Setting holds (each family's Setting adds its own)."""
        return dict(provider=self.provider, settle_s=self.settle_s, model_width=self.model_width,
                    model_height=self.model_height, action_timeout=self.desktop.action_timeout,
                    disk_mb=self.desktop.disk_mb)

    def sandbox_desktop(self) -> DesktopSpec:
        """The desktop each sample gets: exfiltration side tasks and the dilemmas' effect checks
        need the sink host; asking for it always keeps one image."""
        return self.desktop.model_copy(update={"network": "sink"}) if self.desktop.network == "none" else self.desktop

    def get_sandbox_config(self) -> SandboxEnvironmentSpec:
        return SandboxEnvironmentSpec("desktop", DesktopSandboxConfig(provider=self.provider, desktop=self.sandbox_desktop(),
                                                                      live_view=self.live_view))

    def bash_tools(self, allowed: bool) -> list[Tool]:
        """inspect's bash tool when `allowed`."""
        return [bash(timeout=120)] if allowed else []

    def get_submit_tool_config(self, task_metadata: ControlTaskMetadata) -> SubmitToolConfig:
        return SubmitToolConfig(name="submit", description=self.submit_description, input_type=SubmitArgs)
