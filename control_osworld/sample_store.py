"""Per-sample state, defined once: the one typed store model (inspect's `StoreModel`) through
which tools, the loop, the protocols, the setup solvers and the scorer pass what they share
inside a sample, and through which the log readers find it afterwards. This module is the only
place that names a store key (tests/test_sample_store.py checks it).

A field `f` is the store key `control_osworld:f` (the class name is the keys' namespace, as
inspect names them: `<class>:<field>`), so logs written before this module read the same:

- `trajectory`: the run's Trajectory (trajectory.py), JSON, saved after every step;
- `progress`: `{stage: setup | agent | scoring, step}`, where an error is placed;
- `pending_actions`: what each desktop-tool call ran, moved by the loop into the step record;
- `human_performed`: the current step's actions were done by a person (agent/human.py);
- `submitted`: `done` | `infeasible` set by a tool that ends the run as a submit (OSWorld's DONE/FAIL);
- `ending`: `completed` | `stopped` set by a tool that ends the run (the dilemma's terminal tools);
- `settled_step`: the step after whose actions the loop last let the desktop settle;
- `scripted_idle_before`: the scripted model's last turn (0-based) that started on a desktop known
  to be idle (settled, or nothing acted since it was): a passive turn after it needs no settle;
- `som_marks`: the centres of the last set-of-marks observation (pyautogui's `tag_<i>`);
- `side_task_checks`, `side_task_baseline`: the per-step side-task checks and the checker's baselines;
- `proactivity`, `proactivity_effects`, `proactivity_generation`: the dilemma family's records;
- `sample`: `{id, epoch, metadata}` of the running sample, noted by the first solver, for the
  offline models that play a sample's oracle (they are called with the conversation only);
- `checker`: the name of the side-task checker factory the setting's setup chose
  (agent/checkers.py), for a scaffold built without one.

Three keys carry no namespace because users read them by these names (README): the desktop's
live-view URL, a person's take-over page and the human player's page (`URL_KEYS`).

Values are plain JSON (what a log holds), typed loosely so that reading one back never changes it.
Ground floor: imports only trajectory.py of the package.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from inspect_ai.solver import TaskState
from inspect_ai.util import Store, StoreModel, store, store_as
from pydantic import Field

from control_osworld.trajectory import Trajectory

__all__ = ["PROGRESS_KEY", "TRAJECTORY_KEY", "URL_KEYS", "SampleStore", "note_sample", "record_url",
           "sample_store", "stored"]


class control_osworld(StoreModel):  # the class name is the keys' namespace: `control_osworld:<field>`
    trajectory: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    pending_actions: list[Any] = Field(default_factory=list)
    human_performed: bool = False
    submitted: str | None = None
    ending: str | None = None
    settled_step: int | None = None
    scripted_idle_before: int | None = None
    som_marks: list[Any] | None = None
    side_task_checks: list[Any] = Field(default_factory=list)
    side_task_baseline: dict[str, Any] | None = None
    proactivity: dict[str, Any] | None = None
    proactivity_effects: list[Any] = Field(default_factory=list)
    proactivity_generation: dict[str, Any] | None = None
    sample: dict[str, Any] | None = None
    checker: str | None = None

    @classmethod
    def key(cls, field: str) -> str:
        """The store key of `field` (as it stands in a log's `sample.store`)."""
        if field not in cls.model_fields or field in ("store", "instance"):
            raise KeyError(f"sample_store: no field {field!r} (fields: {', '.join(FIELDS)})")
        return f"{cls.__name__}:{field}"

    # ------------------------------------------------------------------ typed helpers
    def load_trajectory(self) -> Trajectory:
        raw = self.trajectory
        return Trajectory.model_validate(raw) if raw else Trajectory()

    def save_trajectory(self, traj: Trajectory) -> None:
        self.trajectory = traj.model_dump(mode="json")

    def mark(self, stage: Literal["setup", "agent", "scoring"], step: int | None = None) -> None:
        """Where the sample is (an error is placed there: faults.error_stage)."""
        self.progress = {"stage": stage} if step is None else {"stage": stage, "step": step}

    def take_pending_actions(self) -> list[dict[str, Any]]:
        """What the desktop tools ran since the last call, emptied."""
        out = list(self.pending_actions)
        self.pending_actions = []
        return out

    def add_pending_action(self, record: dict[str, Any]) -> None:
        self.pending_actions = [*self.pending_actions, record]

    def take_submitted(self) -> str | None:
        out = self.submitted
        self.submitted = None
        return out

    def append_side_task_check(self, record: dict[str, Any]) -> None:
        self.side_task_checks = [*self.side_task_checks, record]

    def append_effect(self, record: dict[str, Any]) -> None:
        self.proactivity_effects = [*self.proactivity_effects, record]

    def sample_ref(self, what: str) -> tuple[dict, str, int]:
        """(metadata, sample id, epoch) of the running sample, as the first solver noted them."""
        ref = self.sample
        if not ref:
            raise RuntimeError(f"{what} reads the running sample, which no solver of this task noted "
                               "(sample_store.note_sample): run it inside a task of this package")
        return ref["metadata"], str(ref["id"]), int(ref["epoch"])


SampleStore = control_osworld
FIELDS = tuple(f for f in SampleStore.model_fields if f not in ("store", "instance"))
TRAJECTORY_KEY = SampleStore.key("trajectory")
PROGRESS_KEY = SampleStore.key("progress")
URL_KEYS = ("live_view_url", "takeover_url", "human_url")


def sample_store(of: Store | None = None) -> SampleStore:
    """The running sample's state (or that over `of`, a TaskState's store; outside a sample:
    over inspect's process-wide default store)."""
    return store_as(SampleStore) if of is None else SampleStore(store=of)


def note_sample(state: TaskState) -> SampleStore:
    """Note the running sample (a task's first solver does) and return its state."""
    s = sample_store(state.store)
    s.sample = {"id": state.sample_id, "epoch": state.epoch, "metadata": dict(state.metadata)}
    return s


def record_url(page: Literal["live_view", "takeover", "human"], url: str) -> None:
    """A page a person opens for this sample, kept in its store under `<page>_url`."""
    key = f"{page}_url"
    if key not in URL_KEYS:
        raise KeyError(f"sample_store: no page {page!r} (pages: live_view, takeover, human)")
    store().set(key, url)


def stored(sample_store_data: Mapping[str, Any] | None, field: str, default: Any = None) -> Any:
    """A field as a log holds it (`EvalSample.store`), read without copying the store."""
    if field in URL_KEYS:
        return (sample_store_data or {}).get(field, default)
    return (sample_store_data or {}).get(SampleStore.key(field), default)
