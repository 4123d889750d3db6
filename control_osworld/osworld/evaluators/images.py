"""Image metrics: our implementations of upstream OSWorld's desktop_env/evaluators/metrics/
gimp.py checks (brightness, saturation, contrast, palette, size, position) and
metrics/vlc.py:compare_images / compare_videos (OpenCV and imagehash, as upstream) and
metrics/docs.py:compare_image_text (tesseract for upstream's easyocr). Pillow and numpy; the SSIM is `gimp.ssim` (scikit-image's
`structural_similarity` defaults, reimplemented). Each function cites the one it follows.
"""

from __future__ import annotations

import logging
import os

import numpy as np
from PIL import Image, ImageStat

from control_osworld.osworld.evaluators.gimp import ssim, structure_same

log = logging.getLogger(__name__)


def structure_check_by_ssim(img1: Image.Image, img2: Image.Image, threshold: float = 0.9) -> bool:
    """Follows metrics/gimp.py:structure_check_by_ssim (`gimp.structure_same`)."""
    return structure_same(img1, img2, threshold)


def structure_check_by_mse(img1: Image.Image, img2: Image.Image, threshold: float = 0.03) -> bool:
    """Follows metrics/gimp.py:structure_check_by_mse: the first image resized (Lanczos) to the
    second's size, both RGB in [0, 1]; mean squared error < threshold."""
    if img1.size != img2.size:
        img1 = img1.resize(img2.size, Image.Resampling.LANCZOS)
    a = np.array(img1.convert("RGB"), dtype=np.float32) / 255
    b = np.array(img2.convert("RGB"), dtype=np.float32) / 255
    return float(np.mean((a - b) ** 2)) < threshold


def calculate_brightness(image: Image.Image) -> float:
    """Follows metrics/gimp.py:calculate_brightness: mean of the grayscale ("L") image."""
    return ImageStat.Stat(image.convert("L")).mean[0]


def normalize_brightness(image: Image.Image, target_brightness: float) -> Image.Image:
    """Follows metrics/gimp.py:normalize_brightness: every band scaled by target / brightness,
    truncated to an integer and clipped to [0, 255]."""
    factor = target_brightness / calculate_brightness(image)
    return image.point(lambda x: min(255, max(0, int(x * factor))))


def measure_saturation(hsv_image: Image.Image) -> float:
    """Follows metrics/gimp.py:measure_saturation: mean of the S band."""
    return float(np.mean(np.array(hsv_image.split()[1])))


def calculate_contrast(image: Image.Image) -> float:
    """Follows metrics/gimp.py:calculate_contrast: standard deviation of all pixel values."""
    return float(np.std(np.asarray(image, dtype=np.float32)))


def check_brightness_decrease_and_structure_sim(src_path: str | None, tgt_path: str | None,
                                                threshold: float = 0.03) -> float:
    """Follows metrics/gimp.py:check_brightness_decrease_and_structure_sim: the result (src) is
    darker than the original (tgt) and, both normalised to brightness 128, their MSE is under
    `threshold`."""
    if src_path is None or tgt_path is None:
        return 0.0
    src, tgt = Image.open(src_path), Image.open(tgt_path)
    darker = calculate_brightness(tgt) > calculate_brightness(src)
    same = structure_check_by_mse(normalize_brightness(src, 128), normalize_brightness(tgt, 128), threshold)
    return 1.0 if darker and same else 0.0


def check_saturation_increase_and_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """Follows metrics/gimp.py:check_saturation_increase_and_structure_sim: the result's (src)
    mean HSV saturation is above the original's (tgt), and its H and V bands are each the
    original's by SSIM >= 0.9."""
    if src_path is None or tgt_path is None:
        return 0.0
    hs, ht = Image.open(src_path).convert("HSV"), Image.open(tgt_path).convert("HSV")
    more = measure_saturation(ht) < measure_saturation(hs)
    h1, _, v1 = hs.split()
    h2, _, v2 = ht.split()
    same = structure_check_by_ssim(h1, h2) and structure_check_by_ssim(v1, v2)
    return 1.0 if more and same else 0.0


def check_contrast_increase_and_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """Follows metrics/gimp.py:check_contrast_increase_and_structure_sim: the result's (src)
    pixel standard deviation is above the original's (tgt) and SSIM >= 0.65."""
    if src_path is None or tgt_path is None:
        return 0.0
    src, tgt = Image.open(src_path), Image.open(tgt_path)
    higher = calculate_contrast(tgt) < calculate_contrast(src)
    return 1.0 if higher and structure_check_by_ssim(src, tgt, threshold=0.65) else 0.0


def check_file_exists_and_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """Follows metrics/gimp.py:check_file_exists_and_structure_sim: the exported file exists and
    is the original by SSIM >= 0.9."""
    if src_path is None or tgt_path is None or not os.path.isfile(src_path):
        return 0.0
    return 1.0 if structure_check_by_ssim(Image.open(src_path), Image.open(tgt_path)) else 0.0


def check_structure_sim_resized(src_path: str | None, tgt_path: str | None) -> float:
    """Follows metrics/gimp.py:check_structure_sim_resized: the result (src), cropped to its
    non-transparent content when it has transparency (0 when wholly transparent), resized to the
    target's size (Pillow's default filter), is the target by SSIM >= 0.9."""
    if src_path is None or tgt_path is None:
        return 0.0
    src: Image.Image = Image.open(src_path)
    tgt: Image.Image = Image.open(tgt_path)
    if src.mode in ("RGBA", "LA") or "transparency" in src.info:
        if src.mode != "RGBA":
            src = src.convert("RGBA")
        bbox = src.split()[-1].getbbox()
        if bbox is None:
            return 0.0
        resized = src.crop(bbox).convert("RGB").resize(tgt.size)
    else:
        resized = src.resize(tgt.size)
    if tgt.mode != "RGB":
        tgt = tgt.convert("RGB")
    return 1.0 if structure_check_by_ssim(resized, tgt) else 0.0


def check_palette_and_structure_sim(src_path: str | None, tgt_path: str | None) -> float:
    """Follows metrics/gimp.py:check_palette_and_structure_sim: the result (src) is a palette
    image (mode "P") and, as RGB, is the original by SSIM >= 0.9. An empty or unreadable file
    scores 0 (upstream retries the open three times first)."""
    if src_path is None or tgt_path is None:
        return 0.0
    try:
        src = Image.open(src_path)
        src.load()
        tgt = Image.open(tgt_path)
        tgt.load()
    except OSError as e:
        log.info("check_palette_and_structure_sim: %s", e)
        return 0.0
    return 1.0 if src.mode == "P" and structure_check_by_ssim(src.convert("RGB"), tgt) else 0.0


def check_textbox_on_leftside(src_path: str | None) -> float:
    """Follows metrics/gimp.py:check_textbox_on_leftside: the leftmost dark pixel (gray < 128)
    of any row lies within the left 5 % of the width."""
    if src_path is None:
        return 0.0
    img = Image.open(src_path)
    dark = np.array(img.convert("L")) < 128
    cols = np.nonzero(dark.any(axis=0))[0]
    left = int(cols[0]) if cols.size else img.width
    return 1.0 if left < img.width * 0.05 else 0.0


def check_triangle_position(tgt_path: str | None) -> float:
    """Follows metrics/gimp.py:check_triangle_position: the pixels of the colour at index 1 of the
    colours sorted by ascending count (upstream means "the triangle", the second most common; it
    is the second *rarest*, so with two colours the background) have their centroid within 5 %
    of the image's size of its centre, on both axes. Kept as upstream computes it."""
    if tgt_path is None:
        return 0.0
    arr = np.array(Image.open(tgt_path))
    colors, counts = np.unique(arr.reshape(-1, arr.shape[2]), axis=0, return_counts=True)
    triangle = colors[np.argsort(counts)][1]
    centroid = np.argwhere(np.all(arr == triangle, axis=2)).mean(axis=0)
    size = np.array(arr.shape[:2])
    return 1.0 if bool(np.all(np.abs(centroid - size / 2) < 0.05 * size)) else 0.0


def check_green_background(src_path: str | None, tgt_path: str | None) -> float:
    """Follows metrics/gimp.py:check_green_background: wherever the mask (tgt) is not black,
    the result (src) is green (G above R and above B). As upstream, pixels are indexed
    [x, y] into the (height, width) arrays, so only the top-left min(w, h) square is read (and
    a non-square mask wider than tall fails with an IndexError, as upstream)."""
    if src_path is None or tgt_path is None:
        return 0.0
    src, tgt = Image.open(src_path), Image.open(tgt_path)
    s, t = np.array(src), np.array(tgt)
    for x in range(tgt.width):
        for y in range(tgt.height):
            if tuple(t[x, y][:3]) != (0, 0, 0):
                r, g, b = (int(v) for v in s[x, y][:3])
                if not (g > r and g > b):
                    return 0.0
    return 1.0


def check_image_file_size(src_path: str | None, rule: dict) -> float:
    """Follows metrics/gimp.py:check_image_file_size: the file is smaller than rule["max_size"]
    bytes."""
    if src_path is None:
        return 0.0
    return 1.0 if os.path.getsize(src_path) < rule["max_size"] else 0.0


def check_structure_sim_with_threshold(src_path: str | None, tgt_path: str | None, **options) -> float:
    """Follows metrics/gimp.py:check_structure_sim_with_threshold: the result resized (Lanczos)
    to the target's size when they differ, both RGB; SSIM (window 7, or the largest odd size
    that fits an image under 7 pixels) >= options["ssim_threshold"] (default 0.85)."""
    if src_path is None or tgt_path is None:
        return 0.0
    threshold = options.get("ssim_threshold", 0.85)
    src: Image.Image = Image.open(src_path)
    tgt: Image.Image = Image.open(tgt_path)
    if src.size != tgt.size:
        src = src.resize(tgt.size, Image.Resampling.LANCZOS)
    a, b = np.array(src.convert("RGB")), np.array(tgt.convert("RGB"))
    m = min(a.shape[0], a.shape[1])
    win = 7 if m >= 7 else (m if m % 2 == 1 else m - 1)
    if win < 1:
        return 0.0
    return 1.0 if ssim(a, b, win_size=win) >= threshold else 0.0


def compare_images(image1_path: str | None, image2_path: str | None, **options) -> float:
    """Follows metrics/vlc.py:compare_images: both images grayscale, resized (Lanczos) to
    min(size1, size2) (Python's tuple order, as upstream: the narrower, or the shorter at equal
    width), SSIM of the two. With `reference_base_result` b: (ssim - b) / (1 - b) when
    ssim >= b + 0.01, else 0; without it the SSIM itself (a score in [-1, 1])."""
    if not image1_path or not image2_path:
        return 0.0
    base = options.get("reference_base_result")
    a, b = Image.open(image1_path).convert("L"), Image.open(image2_path).convert("L")
    size = min(a.size, b.size)
    s = ssim(np.array(a.resize(size, Image.Resampling.LANCZOS)), np.array(b.resize(size, Image.Resampling.LANCZOS)))
    if base is None:
        return s
    return (s - base) / (1 - base) if s >= base + 0.01 else 0.0


def compare_videos(video_path1: str | None, video_path2: str | None, max_frames_to_check: int = 100,
                   threshold: int = 5) -> float:
    """Follows metrics/vlc.py:compare_videos: the two videos' frames are read in step (OpenCV),
    at most `max_frames_to_check` of them; a pair whose perceptual hashes (imagehash.phash of
    the RGB frame) differ by more than `threshold` bits is a mismatch, and more than `threshold`
    mismatches score 0. When either video ends first, 1 iff both ended at that frame (so two
    unreadable files score 1, as upstream); 1 after the frames checked. Where ours differs: a
    missing path scores 0 (upstream hands None to OpenCV, which raises)."""
    if not video_path1 or not video_path2:
        return 0.0
    import cv2
    import imagehash

    cap1, cap2 = cv2.VideoCapture(video_path1), cv2.VideoCapture(video_path2)
    try:
        checked = mismatches = 0
        while checked < max_frames_to_check:
            ok1, f1 = cap1.read()
            ok2, f2 = cap2.read()
            if not ok1 or not ok2:
                return 1.0 if ok1 == ok2 else 0.0
            h1 = imagehash.phash(Image.fromarray(cv2.cvtColor(f1, cv2.COLOR_BGR2RGB)))
            h2 = imagehash.phash(Image.fromarray(cv2.cvtColor(f2, cv2.COLOR_BGR2RGB)))
            checked += 1
            if h1 - h2 > threshold:
                mismatches += 1
                if mismatches > threshold:
                    return 0.0
        return 1.0
    finally:
        cap1.release()
        cap2.release()


OCR_TIMEOUT_S = 120


def ocr_words(img: Image.Image) -> str:
    """The text tesseract reads in `img` (grayscale, enlarged 2x when under 2000 pixels wide, as
    tesseract wants text about 20 pixels high; one column of lines, --psm 4), whitespace runs
    collapsed to one space, as easyocr's boxes joined by spaces. Raises when tesseract is
    missing or fails (the checker's fault, never the image's: an image is decoded first)."""
    import io
    import shutil
    import subprocess

    if shutil.which("tesseract") is None:
        raise RuntimeError("compare_image_text needs tesseract (Debian: tesseract-ocr)")
    g = img.convert("L")
    if g.width < 2000:
        g = g.resize((g.width * 2, g.height * 2), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    g.save(buf, "PNG")
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    proc = subprocess.run(["tesseract", "stdin", "stdout", "-l", "eng", "--psm", "4"], input=buf.getvalue(),
                          capture_output=True, timeout=OCR_TIMEOUT_S, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"tesseract failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[:300]}")
    return " ".join(proc.stdout.decode("utf-8", "replace").split())


def compare_image_text(image_path: str | None, rule: dict) -> float:
    """Follows metrics/docs.py:compare_image_text: 1 iff rule["text"] (rule type "text") is in
    the text read from the image. Approximate: upstream reads it with easyocr (a neural model),
    ours with tesseract (`ocr_words`), so borderline glyphs ("ls" / "1s") can read differently;
    an image Pillow cannot open (upstream also converts X11 screen dumps) scores 0, as does a
    missing file."""
    if not image_path or not os.path.exists(image_path):
        return 0.0
    if rule.get("type") != "text":
        raise ValueError(f"compare_image_text: unsupported rule type {rule.get('type')!r}")
    try:
        img = Image.open(image_path)
        img.load()
    except Exception as e:  # upstream: any failure to read the image scores 0
        log.info("compare_image_text: %s: %s", image_path, e)
        return 0.0
    return 1.0 if rule["text"] in ocr_words(img) else 0.0


METRICS = [check_brightness_decrease_and_structure_sim, check_saturation_increase_and_structure_sim,
           check_contrast_increase_and_structure_sim, check_file_exists_and_structure_sim,
           check_structure_sim_resized, check_palette_and_structure_sim, check_textbox_on_leftside,
           check_triangle_position, check_green_background, check_image_file_size,
           check_structure_sim_with_threshold, compare_images, compare_videos, compare_image_text]
