"""GIMP getters and image metrics (our implementations of upstream OSWorld's
desktop_env/evaluators/getters/gimp.py and metrics/gimp.py). Images are read with Pillow; the
structural similarity upstream takes from scikit-image is computed here with numpy and scipy
(`ssim`, the same definition and defaults: 7x7 uniform window, K1 0.01, K2 0.03, sample
covariance, mean over channels)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

GIMP_DIR = "/home/user/.config/GIMP/2.10"


async def gimp_config_file(ctx, config: dict) -> str | None:
    """Follows getters/gimp.py:get_gimp_config_file: ~/.config/GIMP/2.10/<file_name> copied to
    the cache as `dest`; None when GIMP has not written it."""
    data = await ctx.client.read_file(f"{GIMP_DIR}/{config['file_name']}")
    if not data:
        return None
    local = Path(ctx.cache_dir) / config.get("dest", config["file_name"])
    local.write_bytes(data)
    return str(local)


GETTERS = {"gimp_config_file": gimp_config_file}


def ssim(a: np.ndarray, b: np.ndarray, win_size: int = 7, data_range: float | None = None) -> float:
    """Mean structural similarity of two images of one shape (H, W) or (H, W, C), as
    skimage.metrics.structural_similarity computes it by default (per channel, then the mean)."""
    from scipy.ndimage import uniform_filter

    if a.shape != b.shape:
        raise ValueError(f"images differ in shape: {a.shape} vs {b.shape}")
    if a.ndim == 3:
        return float(np.mean([ssim(a[..., c], b[..., c], win_size, data_range) for c in range(a.shape[2])]))
    if data_range is None:
        data_range = 255.0 if a.dtype == np.uint8 else float(max(a.max(), b.max()) - min(a.min(), b.min()) or 1.0)
    x, y = a.astype(np.float64), b.astype(np.float64)
    n = win_size ** 2
    cov_norm = n / (n - 1)
    ux, uy = uniform_filter(x, win_size), uniform_filter(y, win_size)
    vx = cov_norm * (uniform_filter(x * x, win_size) - ux * ux)
    vy = cov_norm * (uniform_filter(y * y, win_size) - uy * uy)
    vxy = cov_norm * (uniform_filter(x * y, win_size) - ux * uy)
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux ** 2 + uy ** 2 + c1) * (vx + vy + c2))
    pad = (win_size - 1) // 2
    return float(s[pad:-pad or None, pad:-pad or None].mean())


def _image(path):
    from PIL import Image

    return Image.open(path)


def structure_same(img1, img2, threshold: float = 0.9) -> bool:
    """Follows metrics/gimp.py:structure_check_by_ssim: False when either image is under 7
    pixels on a side or the sizes differ; both converted to RGB; SSIM >= threshold."""
    if min(img1.width, img1.height, img2.width, img2.height) < 7:
        return False
    a = np.array(img1 if img1.mode == "RGB" else img1.convert("RGB"))
    b = np.array(img2 if img2.mode == "RGB" else img2.convert("RGB"))
    if a.shape != b.shape:
        return False
    return ssim(a, b) >= threshold


def check_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """Follows metrics/gimp.py:check_structure_sim: SSIM of the two images >= 0.9."""
    if src_path is None or tgt_path is None:
        return 0.0
    return 1.0 if structure_same(_image(src_path), _image(tgt_path)) else 0.0


def check_image_mirror(src_path: str | None, tgt_path: str | None) -> float:
    """Follows metrics/gimp.py:check_image_mirror: the target is the source flipped left-right
    (SSIM >= 0.99)."""
    if src_path is None or tgt_path is None:
        return 0.0
    from PIL import Image

    flipped = _image(src_path).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return 1.0 if structure_same(flipped, _image(tgt_path), 0.99) else 0.0


def check_image_size(src_path: str | None, rule: dict) -> float:
    """Follows metrics/gimp.py:check_image_size: width and/or height equal the rule's."""
    if src_path is None:
        return 0.0
    w, h = _image(src_path).size
    ok = (rule.get("width") is None or w == rule["width"]) and (rule.get("height") is None or h == rule["height"])
    return 1.0 if ok else 0.0


def compare_image_list(pred_img_path_list, gold_img_path_list) -> float:
    """Follows metrics/gimp.py:compare_image_list: every predicted image equals its gold image
    pixel for pixel."""
    if not isinstance(pred_img_path_list, list):
        pred_img_path_list, gold_img_path_list = [pred_img_path_list], [gold_img_path_list]
    for pred, gold in zip(pred_img_path_list, gold_img_path_list):
        if not pred or not gold:
            return 0.0
        a, b = _image(pred), _image(gold)
        if a.size != b.size or not np.array_equal(np.asarray(a.convert("RGBA")), np.asarray(b.convert("RGBA"))):
            return 0.0
    return 1.0


def check_config_status(actual_config_path: str | None, rule: dict) -> float:
    """Follows metrics/gimp.py:check_config_status: a line `(key ... value)` of a GIMP config file
    (gimprc, sessionrc, ...) whose first word is `key` (or first two words the two-item `key`)
    and whose last word is `value`."""
    if actual_config_path is None:
        return 0.0
    key, value = rule["key"], rule["value"]
    with open(actual_config_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("#") or line == "\n":
                continue
            items = line.strip().lstrip("(").rstrip(")\n").split()
            if not items:
                continue
            if isinstance(key, str) and items[0] == key and items[-1] == value:
                return 1.0
            if isinstance(key, list) and len(key) == 2 and items[:2] == key and items[-1] == value:
                return 1.0
    return 0.0


METRICS = [check_structure_sim, check_image_mirror, check_image_size, compare_image_list, check_config_status]
