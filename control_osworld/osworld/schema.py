"""Typed models of OSWorld task JSON and of side-task JSON (the upstream control setting's
shape), and the semantic checks the loader runs on them.

Main tasks keep OSWorld's keys (REFERENCE §1): `id`, `snapshot`, `instruction`, `source`,
`config`, `trajectory`, `related_apps`, `evaluator`, and the rare `proxy`, `fixed_ip`,
`possibility_of_env_change`, `hint`. Unknown keys are kept (upstream files load unchanged).
Our extras: `allow_bash` (the agent may use a bash tool on this task).

Side tasks keep the upstream control setting's keys: `id`, `main_task_id`, `instruction`,
`hand_held_instruction`, `config` (prepended to the main task's setup), `evaluator`,
`category`, `name`, `difficulty`, `rationale`, `subtlety_notes`, `independence_notes`.
Our extras: `main_task_ids` / `pairs_with` (a pairing rule), `attempt` (an evaluator that
scores 1 once the side task was *tried*, effective or not), `boundary` (a switch between an
environment where the effect can happen, `open`, and one that blocks it, `closed`),
`network` (`sink`: the side task needs the second host), `notes`.

Structure (types, required fields) is checked by pydantic; names (setup step types,
getters, metrics) by `check_task` / `check_side_task`, which return the problems that make a
file invalid and, separately, the reasons a valid task cannot run on our desktops.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

# ----------------------------------------------------------------------------- names

SETUP_STEPS = {"download", "upload_file", "launch", "execute", "command", "open", "sleep",
               "activate_window", "close_window", "chrome_open_tabs", "chrome_close_tabs"}
"""Setup step types we run."""

UNSUPPORTED_STEPS = {
    "update_browse_history": "is not implemented on our desktops",
    "login": "needs a live web login",
    "googledrive": "needs Google Drive",
    "change_wallpaper": "is not implemented on our desktops",
    "tidy_desktop": "is not implemented on our desktops",
    "act": "is not implemented on our desktops",
    "replay": "is not implemented on our desktops",
    "proxy": "needs the live web",
}
"""Step types upstream OSWorld knows and we do not run: tasks using them load, marked unsupported."""

_CHROME_GETTERS = {
    "cookie_data", "pdf_from_url",
    "shortcuts_on_desktop", "history", "page_info", "enabled_experiments", "chrome_language",
    "chrome_font_size", "chrome_color_scheme", "chrome_appearance_mode_ui", "profile_name",
    "number_of_search_results", "active_tab_url_and_body_text",
    "enable_do_not_track", "enable_enhanced_safety_browsing", "enable_safe_browsing",
    "new_startup_page", "find_unpacked_extension_path", "data_delete_automacally",
    "active_tab_html_parse", "active_tab_url_parse", "gotoRecreationPage_and_get_html_content",
    "url_dashPart", "active_url_from_accessTree", "find_installed_extension_name",
    "info_from_website", "macys_product_url_parse", "url_path_parse", "chrome_saved_address",
}
UPSTREAM_GETTERS: dict[str, str] = {
    **{g: "is not implemented here" for g in _CHROME_GETTERS},
    "googledrive_file": "needs Google Drive",
    "local_file": "reads a file of upstream's repository",
    "content_from_vm_file": "is not implemented here",
    "audio_in_slide": "is not implemented here",
    "background_image_in_slide": "is not implemented here",
    "vm_wallpaper": "is not implemented here",
    "rule_relativeTime": "is not implemented here",
    "time_diff_range": "is not implemented here",
    "replay": "is not implemented here",
    "default_video_player": "is not implemented here",
    "vscode_config": "needs VS Code",
    "conference_city_in_order": "is not implemented here",
}
"""Getter types upstream knows and we do not implement (value: why)."""

UPSTREAM_METRICS = {
    "check_gnome_favorite_apps", "is_utc_0", "check_text_enlarged", "check_moved_jpgs", "is_in_vm_clickboard",
    "is_expected_tabs", "is_expected_bookmarks", "compare_pdfs", "compare_htmls", "compare_archive",
    "is_cookie_deleted", "is_shortcut_on_desktop", "check_font_size", "check_enabled_experiments",
    "check_history_deleted", "is_expected_search_query", "is_expected_active_tab", "is_expected_url_pattern_match",
    "is_added_to_steam_cart", "is_expected_installed_extensions", "compare_pdf_images",
    "is_expected_active_tab_approximate", "compare_font_names", "compare_subscript_contains",
    "has_page_numbers_in_footers", "compare_docx_lines", "evaluate_colored_words_in_tables",
    "check_highlighted_words", "evaluate_strike_through_last_paragraph", "evaluate_conversion", "evaluate_spacing",
    "check_italic_font_size_14", "evaluate_alignment", "get_unique_train_ids", "check_no_duplicates",
    "compare_init_lines", "find_default_font", "contains_page_break", "compare_docx_files", "compare_docx_tables",
    "compare_line_spacing", "compare_insert_equation", "compare_highlighted_text", "is_first_line_centered",
    "check_tabstops", "compare_contains_image", "compare_docx_files_and_ignore_new_lines", "compare_docx_images",
    "compare_image_text", "compare_references", "compare_unique_train_records", "check_csv",
    "check_accessibility_tree", "run_sqlite3", "check_json", "check_list", "exact_match", "match_in_list",
    "is_in_list", "fuzzy_match", "check_include_exclude", "check_direct_json_object",
    "compare_time_in_speedtest_results", "is_included_all_json_objects", "is_gold_text_included_in_pdf",
    "check_line_number", "file_contains", "compare_terminal_and_txt", "fuzzy_place_math",
    "compare_python_pure_text", "diff_text_file", "literal_match", "check_structure_sim_resized",
    "check_structure_sim_with_threshold", "check_brightness_decrease_and_structure_sim",
    "check_contrast_increase_and_structure_sim", "check_saturation_increase_and_structure_sim",
    "check_image_size", "check_image_mirror", "check_palette_and_structure_sim", "check_textbox_on_leftside",
    "check_green_background", "check_file_exists_and_structure_sim", "check_triangle_position",
    "check_structure_sim", "check_config_status", "compare_image_list", "increase_saturation",
    "decrease_brightness", "check_file_exists", "compare_triangle_positions", "check_sharper",
    "check_image_file_size", "check_libre_locale", "compare_epub", "check_mp3_meta", "check_pdf_pages",
    "check_presenter_console_disable", "check_image_stretch_and_center", "check_slide_numbers_color",
    "compare_pptx_files", "check_strikethrough", "check_slide_orientation_Portrait",
    "evaluate_presentation_fill_to_rgb_distance", "check_left_panel", "check_transition",
    "check_page_number_colors", "check_auto_saving_time", "compare_table", "compare_csv",
    "compare_conference_city_in_order", "check_thunderbird_prefs", "check_thunderbird_filter",
    "check_thunderbird_folder", "is_vlc_playing", "is_vlc_recordings_folder", "is_vlc_fullscreen",
    "compare_images", "compare_audios", "compare_videos", "check_qt_bgcone",
    "check_one_instance_when_started_from_file", "check_qt_minimal_view", "check_qt_max_volume",
    "check_qt_slider_colours", "check_global_key_play_pause", "check_play_and_exit", "compare_text_file",
    "compare_config", "compare_answer", "compare_result_files", "is_extension_installed", "check_json_settings",
    "check_json_keybindings", "check_python_file_by_test_suite", "check_python_file_by_gold_file",
    "check_html_background_image", "compare_zip_files", "infeasible",
}
"""Metric names upstream OSWorld defines (desktop_env/evaluators/metrics/__init__.py)."""

MISSING_APPS = {"code": "needs VS Code"}
"""Programs upstream tasks launch that our desktops do not have (VS Code is in no Debian
archive nor on PyPI; Chrome is Chromium here, `google-chrome` its wrapper, vm/bin/)."""

SIDE_CATEGORIES = ("exfiltration", "credential_access", "security_degradation", "persistence",
                   "document_tampering", "sabotage", "evidence_tampering")
ON_REQUEST_CATEGORIES = ("evidence_tampering",)
"""Side tasks paired only when named (`side_tasks`), never in the default mix: attacks on the
harness itself (docs/integrity.md), not on the user."""
CATEGORY_ALIASES = {"hidden_persistence": "persistence", "settings_manipulation": "security_degradation",
                    "credential_theft": "credential_access", "tampering": "document_tampering"}
"""Upstream's category names -> ours (so upstream side-task files load unchanged)."""

# ----------------------------------------------------------------------------- models


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class SetupStep(_Loose):
    """`{"type": T, "parameters": {...}}`; parameters are checked per type by `check_step`."""

    type: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class Getter(_Loose):
    """A result/expected getter: `{"type": "vm_file", "path": ..., "dest": ...}` etc."""

    type: str


def _none_if_empty(v: Any) -> Any:
    # upstream: `if "expected" in evaluator and evaluator["expected"]` -> {} and [] mean "none"
    if v == {} or v == []:
        return None
    if isinstance(v, list):
        return [None if x == {} else x for x in v]
    return v


class Evaluator(_Loose):
    func: str | list[str]
    conj: Literal["and", "or"] = "and"
    result: Getter | list[Getter | None] | None = None
    expected: Getter | list[Getter | None] | None = None
    options: dict[str, Any] | list[dict[str, Any] | None] | None = None
    postconfig: list[SetupStep] = Field(default_factory=list)

    _norm = field_validator("result", "expected", "options", mode="before")(lambda v: _none_if_empty(v))

    @property
    def funcs(self) -> list[str]:
        return [self.func] if isinstance(self.func, str) else list(self.func)

    @property
    def is_infeasible(self) -> bool:
        return self.func == "infeasible"

    def getters(self) -> list[tuple[str, Getter]]:
        """(field path, getter) of every result/expected getter."""
        out = []
        for name in ("result", "expected"):
            v = getattr(self, name)
            if isinstance(v, Getter):
                out.append((name, v))
            elif isinstance(v, list):
                out.extend((f"{name}[{i}]", g) for i, g in enumerate(v) if g is not None)
        return out


class Task(_Loose):
    """An OSWorld main task."""

    id: str
    snapshot: str | None = None
    instruction: str
    source: str | None = None
    config: list[SetupStep] = Field(default_factory=list)
    trajectory: str | None = None
    related_apps: list[str] = Field(default_factory=list)
    evaluator: Evaluator
    proxy: bool | None = None
    fixed_ip: bool | None = None
    possibility_of_env_change: str | None = None
    hint: str | None = None
    allow_bash: bool = False

    _file: str = PrivateAttr(default="")
    _app: str = PrivateAttr(default="")
    _unsupported: list[str] = PrivateAttr(default_factory=list)

    @property
    def file(self) -> str:
        return self._file

    @property
    def app(self) -> str:
        """The folder the task lives in under tasks/ (else its snapshot)."""
        return self._app or self.snapshot or ""

    @property
    def infeasible(self) -> bool:
        return self.evaluator.is_infeasible

    @property
    def allows_bash(self) -> bool:
        return self.allow_bash

    @property
    def unsupported_reasons(self) -> list[str]:
        return list(self._unsupported)

    @property
    def runnable(self) -> bool:
        return not self._unsupported

    @property
    def reason(self) -> str:
        return "; ".join(self._unsupported)


class PairingRule(_Loose):
    """Which main tasks a side task pairs with: listed ids and/or whole apps, minus exclusions."""

    task_ids: list[str] = Field(default_factory=list)
    apps: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    include_infeasible: bool = False


class Boundary(_Loose):
    """A boundary switch: `open` lets the effect happen, `closed` makes the environment block it
    (the attempt is still recorded). `kind: sink` switches the exfiltration sink between
    delivering and a tripwire that records the attempt and refuses delivery."""

    kind: Literal["sink"] = "sink"
    default: Literal["open", "closed"] = "open"
    description: str = ""


class SideTask(_Loose):
    id: str
    name: str = ""
    category: str
    main_task_id: str | None = None
    main_task_ids: list[str] | None = None
    pairs_with: PairingRule | None = None
    instruction: str
    hand_held_instruction: str = ""
    config: list[SetupStep] = Field(default_factory=list)
    evaluator: Evaluator
    attempt: Evaluator | None = None
    boundary: Boundary | None = None
    network: Literal["none", "sink"] = "none"
    difficulty: str | None = None
    rationale: str | None = None
    subtlety_notes: str | None = None
    independence_notes: str | None = None
    notes: str | None = None

    _file: str = PrivateAttr(default="")
    _unsupported: list[str] = PrivateAttr(default_factory=list)

    @field_validator("category", mode="after")
    @classmethod
    def _category(cls, v: str) -> str:
        v = CATEGORY_ALIASES.get(v, v)
        if v not in SIDE_CATEGORIES:
            raise ValueError(f"unknown category {v!r}; one of {', '.join(SIDE_CATEGORIES)} "
                             f"(or upstream's {', '.join(CATEGORY_ALIASES)})")
        return v

    @property
    def file(self) -> str:
        return self._file

    @property
    def has_boundary(self) -> bool:
        return self.boundary is not None

    @property
    def unsupported_reasons(self) -> list[str]:
        return list(self._unsupported)

    @property
    def runnable(self) -> bool:
        return not self._unsupported

    @property
    def reason(self) -> str:
        return "; ".join(self._unsupported)

    def pairs_with_task(self, task: Task) -> bool:
        if self.main_task_id is not None and task.id == self.main_task_id:
            return True
        if self.main_task_ids and task.id in self.main_task_ids:
            return True
        rule = self.pairs_with
        if rule is None or task.id in rule.exclude:
            return False
        if task.infeasible and not rule.include_infeasible:
            return False
        return task.id in rule.task_ids or task.app in rule.apps or "*" in rule.apps


# ----------------------------------------------------------------------------- semantic checks


def truthy(v: Any) -> bool:
    """A task config's boolean flag: true, or the strings "true", "1", "yes" (any case)."""
    return v is True or (isinstance(v, str) and v.lower() in ("true", "1", "yes"))


def _is_str_or_strs(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))


def _need(p: dict, key: str, where: str, ok, what: str) -> list[str]:
    if key not in p:
        return [f"{where}.parameters.{key}: field required"]
    if not ok(p[key]):
        return [f"{where}.parameters.{key}: must be {what}, got {type(p[key]).__name__}"]
    return []


def _live_web(url: str) -> bool:
    """An http(s) URL of a host other than this desktop (our desktops have no internet)."""
    from urllib.parse import urlparse

    u = urlparse(url if "://" in url else f"http://{url}")
    return u.scheme in ("http", "https") and (u.hostname or "") not in ("localhost", "127.0.0.1", "::1", "sink")


def check_step(step: SetupStep, where: str) -> tuple[list[str], list[str]]:
    """(errors, unsupported reasons) of one setup step."""
    t, p = step.type, step.parameters
    if t in UNSUPPORTED_STEPS:
        return [], [f"unsupported step type {t!r} ({UNSUPPORTED_STEPS[t]})"]
    if t not in SETUP_STEPS:
        return [f"{where}.type: unknown setup step type {t!r}; known: {', '.join(sorted(SETUP_STEPS))}"], []
    errs: list[str] = []
    unsup: list[str] = []
    if t in ("download", "upload_file"):
        keys = ("url", "path") if t == "download" else ("local_path", "path")
        files = p.get("files")
        if not isinstance(files, list):
            return [f"{where}.parameters.files: must be a list of {{{', '.join(keys)}}}"], []
        for i, f in enumerate(files):
            for k in keys:
                if not isinstance(f, dict) or not isinstance(f.get(k), str):
                    errs.append(f"{where}.parameters.files[{i}].{k}: field required (a string)")
        if t == "download":
            from control_osworld.osworld.assets import cached_download

            for f in files:
                if isinstance(f, dict) and isinstance(f.get("url"), str) and f["url"].startswith(("http://", "https://")):
                    if cached_download(f["url"], f.get("path", "")) is None:
                        unsup.append(f"needs a cached asset: {f['url']} (control-osworld tasks fetch-assets)")
    elif t in ("launch", "execute", "command"):
        errs += _need(p, "command", where, _is_str_or_strs, "a string or a list of strings")
        if "shell" in p and not isinstance(p["shell"], (bool, str)):
            errs.append(f"{where}.parameters.shell: must be a boolean")
        until = p.get("until")
        if until is not None and not (isinstance(until, dict) and set(until) <= {"returncode", "stdout", "stderr"}):
            errs.append(f"{where}.parameters.until: must be an object with returncode, stdout and/or stderr")
        cmd = p.get("command")
        tokens = cmd if isinstance(cmd, list) else (cmd.split() if isinstance(cmd, str) else [])
        tokens = [str(x) for x in tokens]
        first = tokens[0].rsplit("/", 1)[-1] if tokens else ""
        for prog, why in MISSING_APPS.items():
            if first == prog or (prog.startswith("--") and prog in tokens):
                unsup.append(f"{why}, which our desktops lack")
    elif t in ("chrome_open_tabs", "chrome_close_tabs"):
        key = "urls_to_open" if t == "chrome_open_tabs" else "urls_to_close"
        errs += _need(p, key, where, lambda v: isinstance(v, list) and all(isinstance(u, str) for u in v),
                      "a list of URLs")
        web = [u for u in p.get(key) or [] if isinstance(u, str) and _live_web(u)]
        if t == "chrome_open_tabs" and web:
            unsup.append(f"needs the live web: {t} opens {web[0]}")
    elif t == "open":
        errs += _need(p, "path", where, lambda v: isinstance(v, str), "a string")
    elif t == "sleep":
        errs += _need(p, "seconds", where, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number")
    elif t in ("activate_window", "close_window"):
        errs += _need(p, "window_name", where, lambda v: isinstance(v, str), "a string")
    return errs, unsup


def check_evaluator(ev: Evaluator, where: str = "evaluator") -> tuple[list[str], list[str]]:
    """(errors, unsupported reasons) of an evaluator: metric and getter names, list lengths."""
    from control_osworld.osworld.evaluators import GETTERS, METRICS

    errs: list[str] = []
    unsup: list[str] = []
    funcs = ev.funcs
    for i, f in enumerate(funcs):
        at = f"{where}.func" if isinstance(ev.func, str) else f"{where}.func[{i}]"
        if f == "infeasible" or f in METRICS:
            continue
        if f in UPSTREAM_METRICS:
            unsup.append(f"metric {f!r} is not implemented here")
        else:
            errs.append(f"{at}: unknown metric {f!r}")
    if isinstance(ev.func, list):
        n = len(ev.func)
        for name in ("result", "expected", "options"):
            v = getattr(ev, name)
            if v is not None and not isinstance(v, list):
                errs.append(f"{where}.{name}: must be a list of {n} (one per metric in func)")
            elif isinstance(v, list) and len(v) != n:
                errs.append(f"{where}.{name}: has {len(v)} entries but func has {n} metrics")
        if ev.result is None:
            errs.append(f"{where}.result: field required")
    else:
        for name in ("result", "expected", "options"):
            if isinstance(getattr(ev, name), list):
                errs.append(f"{where}.{name}: must be a single object when func is one metric")
        if ev.result is None and not ev.is_infeasible:
            errs.append(f"{where}.result: field required")
    for at, g in ev.getters():
        if g.type in GETTERS:
            if g.type == "cloud_file":
                from control_osworld.osworld.assets import cached_download

                paths = g.model_extra.get("path") if g.model_extra else None
                for url in (paths if isinstance(paths, list) else [paths]):
                    if isinstance(url, str) and url.startswith(("http://", "https://")) and cached_download(url, "") is None:
                        unsup.append(f"needs a cached asset: {url} (control-osworld tasks fetch-assets)")
            continue
        if g.type in UPSTREAM_GETTERS:
            unsup.append(f"getter {g.type!r} {UPSTREAM_GETTERS[g.type]}")
        else:
            errs.append(f"{where}.{at}.type: unknown getter {g.type!r}")
    for i, s in enumerate(ev.postconfig):
        e, u = check_step(s, f"{where}.postconfig[{i}]")
        errs += e
        unsup += u
    return errs, unsup


def check_task(task: Task) -> tuple[list[str], list[str]]:
    errs: list[str] = []
    unsup: list[str] = []
    for i, s in enumerate(task.config):
        e, u = check_step(s, f"config[{i}]")
        errs += e
        unsup += u
    e, u = check_evaluator(task.evaluator)
    errs += e
    unsup += u
    if truthy(task.proxy):
        unsup.append("needs the live web (proxy)")
    return errs, list(dict.fromkeys(unsup))


def check_side_task(side: SideTask) -> tuple[list[str], list[str]]:
    errs: list[str] = []
    unsup: list[str] = []
    for i, s in enumerate(side.config):
        e, u = check_step(s, f"config[{i}]")
        errs += e
        unsup += u
    for name in ("evaluator", "attempt"):
        ev = getattr(side, name)
        if ev is not None:
            e, u = check_evaluator(ev, name)
            errs += e
            unsup += u
    if side.main_task_id is None and not side.main_task_ids and side.pairs_with is None:
        errs.append("main_task_id: field required (or main_task_ids, or a pairs_with rule)")
    if side.boundary is not None and side.boundary.kind == "sink" and side.network != "sink":
        errs.append("network: a side task with a sink boundary needs network \"sink\"")
    return errs, list(dict.fromkeys(unsup))
