"""fuzz.ratio (rapidfuzz's definition), the image metrics of upstream's gimp.py/vlc.py and the
PDF metrics, on files each test makes (tests/osworld/evaluators/makers.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from PIL import Image, ImageEnhance

from control_osworld.osworld.evaluators import METRICS, fuzz, images, pdf
from tests.osworld.evaluators.makers import gradient, make_pdf


def _lcs_dp(a: str, b: str) -> int:
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b):
            cur.append(prev[j] + 1 if ca == cb else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def test_fuzz_ratio_is_the_indel_similarity():
    # rapidfuzz's documented examples
    assert fuzz.ratio("this is a test", "this is a test!") == pytest.approx(0.9655172413793104)
    assert fuzz.ratio("", "") == 1.0 and fuzz.ratio("abc", "") == 0.0
    assert fuzz.ratio("abc", "abc") == 1.0
    rng = random.Random(7)
    for _ in range(300):
        a = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 90)))
        b = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 90)))
        assert fuzz.lcs_length(a, b) == _lcs_dp(a, b)
    # long strings (a PDF's text) are fast: 20k x 20k chars
    s = "".join(rng.choice("abcdefgh ") for _ in range(20000))
    assert fuzz.ratio(s, s[::-1]) < 1 and fuzz.ratio(s, s) == 1.0


def _save(img: Image.Image, path) -> str:
    img.save(path)
    return str(path)


def test_registered():
    for m in images.METRICS + pdf.METRICS:
        assert METRICS[m.__name__] is m


def test_brightness_contrast_saturation(tmp_path):
    orig = gradient(64, 48)
    o = _save(orig, tmp_path / "o.png")
    darker = _save(ImageEnhance.Brightness(orig).enhance(0.7), tmp_path / "d.png")
    brighter = _save(ImageEnhance.Brightness(orig).enhance(1.3), tmp_path / "b.png")
    other = _save(gradient(64, 48, seed=5), tmp_path / "x.png")
    assert images.check_brightness_decrease_and_structure_sim(darker, o) == 1
    assert images.check_brightness_decrease_and_structure_sim(brighter, o) == 0
    assert images.check_brightness_decrease_and_structure_sim(o, o) == 0  # not darker
    assert images.check_brightness_decrease_and_structure_sim(None, o) == 0
    dark_other = _save(ImageEnhance.Brightness(Image.open(other)).enhance(0.7), tmp_path / "dx.png")
    assert images.check_brightness_decrease_and_structure_sim(dark_other, o) == 0  # other structure
    more_contrast = _save(ImageEnhance.Contrast(orig).enhance(1.4), tmp_path / "c.png")
    less_contrast = _save(ImageEnhance.Contrast(orig).enhance(0.6), tmp_path / "lc.png")
    assert images.check_contrast_increase_and_structure_sim(more_contrast, o) == 1
    assert images.check_contrast_increase_and_structure_sim(less_contrast, o) == 0
    def saturate(f):
        h, s, v = orig.convert("HSV").split()
        s = s.point(lambda x: min(255, int(x * f)))
        return Image.merge("HSV", (h, s, v)).convert("RGB")
    more_sat = _save(saturate(1.3), tmp_path / "s.png")
    less_sat = _save(saturate(0.6), tmp_path / "ls.png")
    assert images.check_saturation_increase_and_structure_sim(more_sat, o) == 1
    assert images.check_saturation_increase_and_structure_sim(less_sat, o) == 0


def test_structure_checks(tmp_path):
    orig = gradient(64, 48)
    o = _save(orig, tmp_path / "o.png")
    assert images.structure_check_by_ssim(orig, orig.convert("RGBA"))  # modes are made RGB first
    assert not images.structure_check_by_ssim(orig, orig.resize((32, 24)))  # sizes differ
    assert not images.structure_check_by_ssim(orig.resize((6, 6)), orig.resize((6, 6)))  # too small
    assert images.check_file_exists_and_structure_sim(o, o) == 1
    assert images.check_file_exists_and_structure_sim(str(tmp_path / "absent.png"), o) == 0
    # resized: a transparent border is cropped away before the resize
    big = Image.new("RGBA", (160, 120), (0, 0, 0, 0))
    big.paste(orig.resize((128, 96)).convert("RGBA"), (16, 12))
    assert images.check_structure_sim_resized(_save(big, tmp_path / "big.png"), o) == 1
    assert images.check_structure_sim_resized(_save(Image.new("RGBA", (50, 50)), tmp_path / "clear.png"), o) == 0
    assert images.check_structure_sim_resized(_save(gradient(128, 96, 9), tmp_path / "o9.png"), o) == 0
    # palette
    blocks = orig.resize((8, 6), Image.Resampling.NEAREST).resize((64, 48), Image.Resampling.NEAREST)
    b = _save(blocks, tmp_path / "blocks.png")
    pal = _save(blocks.convert("P", palette=Image.Palette.ADAPTIVE, colors=64), tmp_path / "p.png")
    assert images.check_palette_and_structure_sim(pal, b) == 1
    assert images.check_palette_and_structure_sim(b, b) == 0  # RGB, not palette
    (tmp_path / "empty.png").write_bytes(b"")
    assert images.check_palette_and_structure_sim(str(tmp_path / "empty.png"), o) == 0
    # threshold, with a resize to the target's size
    assert images.check_structure_sim_with_threshold(_save(orig.resize((128, 96)), tmp_path / "r.png"), o) == 1
    assert images.check_structure_sim_with_threshold(_save(gradient(64, 48, 3), tmp_path / "g3.png"), o) == 0
    assert images.check_structure_sim_with_threshold(o, o, ssim_threshold=1.0) == 1


def test_position_and_colour_checks(tmp_path):
    img = Image.new("RGB", (200, 100), "white")
    img.paste(Image.new("RGB", (30, 10), "black"), (5, 40))
    assert images.check_textbox_on_leftside(_save(img, tmp_path / "left.png")) == 1
    img2 = Image.new("RGB", (200, 100), "white")
    img2.paste(Image.new("RGB", (30, 10), "black"), (20, 40))  # 20 >= 5 % of 200
    assert images.check_textbox_on_leftside(_save(img2, tmp_path / "mid.png")) == 0
    assert images.check_textbox_on_leftside(_save(Image.new("RGB", (20, 20), "white"), tmp_path / "w.png")) == 0

    def tri(cx, cy):
        im = Image.new("RGB", (100, 100), "white")
        px = im.load()
        for y in range(20):
            for x in range(-y // 2, y // 2 + 1):
                px[cx + x, cy - 10 + y] = (255, 220, 0)
        px[0, 0] = (0, 0, 255)  # a third, rarest colour: upstream takes the second rarest
        return im
    assert images.check_triangle_position(_save(tri(50, 50), tmp_path / "t1.png")) == 1
    assert images.check_triangle_position(_save(tri(25, 50), tmp_path / "t2.png")) == 0
    # upstream's quirk, kept: with only two colours, index 1 of the ascending sort is the background
    two = tri(25, 50)
    two.putpixel((0, 0), (255, 255, 255))
    assert images.check_triangle_position(_save(two, tmp_path / "t3.png")) == 1

    mask = Image.new("RGB", (40, 40), "black")
    mask.paste(Image.new("RGB", (20, 40), "white"), (0, 0))
    good = Image.new("RGB", (40, 40), (10, 200, 10))
    bad = good.copy()
    bad.paste(Image.new("RGB", (40, 5), (200, 10, 10)), (0, 0))  # red where the mask is white
    m = _save(mask, tmp_path / "m.png")
    assert images.check_green_background(_save(good, tmp_path / "g.png"), m) == 1
    assert images.check_green_background(_save(bad, tmp_path / "b.png"), m) == 0


def test_file_size_and_compare_images(tmp_path):
    o = _save(gradient(64, 48), tmp_path / "o.png")
    size = (tmp_path / "o.png").stat().st_size
    assert images.check_image_file_size(o, {"max_size": size + 1}) == 1
    assert images.check_image_file_size(o, {"max_size": size}) == 0  # strictly smaller
    assert images.compare_images(o, o) == pytest.approx(1.0)
    assert images.compare_images(o, o, reference_base_result=0.54) == pytest.approx(1.0)
    x = _save(gradient(64, 48, 5), tmp_path / "x.png")
    s = images.compare_images(o, x)
    assert s < 0.9
    # with a base: below base + 0.01 scores 0, above it rescales
    assert images.compare_images(o, x, reference_base_result=s - 0.005) == 0
    assert images.compare_images(o, x, reference_base_result=s - 0.2) == pytest.approx(0.2 / (1 - (s - 0.2)))
    # sizes: both resized to min(size1, size2) by tuple order
    assert images.compare_images(_save(gradient(64, 48).resize((128, 96)), tmp_path / "big.png"), o) > 0.95
    assert images.compare_images(None, o) == 0


def test_pdf_text_and_pages(tmp_path):
    a = make_pdf(tmp_path / "a.pdf", ["Invoice 243729\nTotal: 12.50 EUR", "page two"])
    b = make_pdf(tmp_path / "b.pdf", ["Invoice 243729\nTotal: 12.50 EUR", "page two"])
    c = make_pdf(tmp_path / "c.pdf", ["Invoice 999999\nTotal: 99.00 USD", "page two"])
    assert "Invoice 243729" in pdf.pdf_text(str(a))
    assert pdf.compare_pdfs(str(a), str(b)) == 1.0
    partial = pdf.compare_pdfs(str(a), str(c))
    assert 0.5 < partial < 1.0
    assert partial == pytest.approx(fuzz.ratio(pdf.pdf_text(str(a)), pdf.pdf_text(str(c))))
    # lists: the mean over pairs; a missing file adds 0
    assert pdf.compare_pdfs([str(a), str(tmp_path / "absent.pdf")], [str(b), str(b)]) == 0.5
    assert pdf.compare_pdfs(None, str(b)) == 0
    assert pdf.check_pdf_pages(str(a), {"relation": "eq", "ref_value": 2}) == 1
    assert pdf.check_pdf_pages(str(a), {"relation": "eq", "ref_value": 1}) == 0
    assert pdf.check_pdf_pages(str(a), {"relation": "le", "ref_value": 3}) == 1
    assert pdf.check_pdf_pages(None, {"relation": "eq", "ref_value": 1}) == 0


def test_phash_and_compare_pdf_images(tmp_path):
    g1, g2 = gradient(64, 64, 1), gradient(64, 64, 2)
    assert np.count_nonzero(pdf.phash(g1) != pdf.phash(g1.resize((128, 128)))) <= 5
    assert np.count_nonzero(pdf.phash(g1) != pdf.phash(g2)) > 5
    a = make_pdf(tmp_path / "a.pdf", ["receipt"], [[g1, g2]])
    b = make_pdf(tmp_path / "b.pdf", ["receipt"], [[g1, g2]])
    c = make_pdf(tmp_path / "c.pdf", ["receipt"], [[g1, gradient(64, 64, 9)]])
    d = make_pdf(tmp_path / "d.pdf", ["receipt"], [[g1]])
    none1, none2 = make_pdf(tmp_path / "n1.pdf", ["x"]), make_pdf(tmp_path / "n2.pdf", ["y"])
    assert len(pdf.pdf_images(str(a))) == 2
    assert pdf.compare_pdf_images(str(a), str(b)) == 1.0
    assert pdf.compare_pdf_images(str(a), str(c)) == 0.5
    assert pdf.compare_pdf_images(str(a), str(d)) == 0.0  # counts differ
    assert pdf.compare_pdf_images(str(none1), str(none2)) == 1.0  # no images on either side
    assert pdf.compare_pdf_images(str(a), str(tmp_path / "absent.pdf")) == 0.0
