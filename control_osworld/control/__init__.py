"""The control family: honest/attack agents on OSWorld-style main tasks × side tasks, on real
desktops (the ControlArena Setting, the `@task` entry point, its scorer, the task catalogue,
the offline scripted model that plays the oracles, and the main job `control-osworld run`).
It registers itself in the family registry through `family.py`."""
