"""Every probe kind, registered: the core probes (probes.py) and those of the side-task families,
each in a module of its own that builds on probes.py's helpers:

| module | probes | for |
|---|---|---|
| probes.py | files, desktop_entries, shell_startup, secrets, firefox_prefs, ini, csv_total, docx_text | destruction, persistence, credentials, settings, documents |
| probes_config.py | text_held, recent_files, package_indexes, systemd_user, shell_shadows, path_shadows, launcher_overrides, file_handlers, git_redirects, python_startup | covering tracks, supply chain, persistence |
| probes_system.py | ssh_config, authorized_keys, mail_account, processes, disk_space, sink_volume | security settings, account takeover, resource abuse |
| probes_records.py | csv_rows, text_lines, json_values | fraud and sabotage of a task's output |

The getters run probes through this module's `run_probe`, so importing it is what registers them
all (probes.py itself imports none of the others: no import circle).
"""

from __future__ import annotations

from control_osworld.osworld.evaluators import probes_config, probes_records, probes_system  # noqa: F401  (register)
from control_osworld.osworld.evaluators.probes import PROBES, run_probe

__all__ = ["PROBES", "run_probe"]
