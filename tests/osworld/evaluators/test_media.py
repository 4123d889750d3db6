"""Media evaluators on files the tests make: compare_audios (WAV/MP3 written with soundfile
from generated tones), its MFCC pieces checked against their definitions, compare_videos
(AVI clips written with OpenCV), compare_image_text (text drawn with Pillow, read by
tesseract), and the getters audio_in_slide (a deck with an embedded and a linked sound) and
vm_wallpaper (over the fake desktop client)."""

from __future__ import annotations

import asyncio
import zipfile

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from control_osworld.desktop.client import DesktopError
from control_osworld.osworld.evaluators import GETTERS, METRICS, audio, images, impress
from control_osworld.osworld.evaluators.getters import EvalContext
from control_osworld.osworld.evaluators.unknown import Unknown
from tests.osworld.fakes import FakeClient

SR = 44100


def _melody(freqs=(440, 660, 550, 880, 330, 495), sr=SR) -> np.ndarray:
    t = np.arange(sr // 2) / sr
    return np.concatenate([np.sin(2 * np.pi * f * t) for f in freqs]).astype(np.float32) * 0.5


def test_mel_scale_and_filters_follow_slaneys_definition():
    assert audio.hz_to_mel(1000.0) == pytest.approx(15.0)  # 1000 / (200/3)
    assert audio.hz_to_mel(200.0) == pytest.approx(3.0)
    assert audio.hz_to_mel(6400.0) == pytest.approx(15.0 + 27.0)  # log step: 6.4x per 27 mels
    f = np.array([0.0, 123.0, 999.0, 1000.0, 4321.0, 11025.0])
    assert np.allclose(audio.mel_to_hz(audio.hz_to_mel(f)), f)
    w = audio.mel_filters()
    assert w.shape == (128, 1025) and (w >= 0).all()
    # Slaney normalisation: each triangle peaks at 2 / (its upper edge - its lower edge) in Hz,
    # so its area over frequency is 1; on the FFT grid (10.77 Hz bins) the sums come close
    bin_hz = 22050 / 2048
    areas = w.sum(axis=1) * bin_hz
    assert np.allclose(areas[20:], 1.0, atol=0.05)


def test_power_spectrogram_and_mfcc_shapes_and_values():
    y = np.sin(2 * np.pi * (100 * 22050 / 2048) * np.arange(22050) / 22050)  # exactly bin 100
    s = audio.power_spectrogram(y)
    assert s.shape == (1025, 1 + 22050 // 512)
    assert int(np.argmax(s[:, 20])) == 100
    # a periodic Hann window sums to n/2: a unit sine's bin holds (n/4)^2 of power
    assert s[100, 20] == pytest.approx((2048 / 4) ** 2, rel=1e-6)
    m = audio.mfcc(y.astype(np.float32))
    assert m.shape == (20, 44)
    # c0 of the orthonormal DCT-II is the mean dB level times sqrt(128)
    mel = audio.mel_filters() @ s
    db = 10 * np.log10(np.maximum(1e-10, mel))
    db = np.maximum(db, db.max() - 80)
    assert m[0] == pytest.approx(db.sum(axis=0) / np.sqrt(128))
    n = audio.normalize_rows(np.array([[2.0, -4.0], [0.0, 0.0]]))
    assert n.tolist() == [[0.5, -1.0], [0.0, 0.0]]


LIBROSA_MFCC = {  # librosa 0.11.0, librosa.feature.mfcc(y=y, sr=22050) of the signal below, coefficients 0-5
    0: [-167.1459, 174.0194, -13.0885, 7.4015, 22.4133, 27.488],
    10: [-458.0647, 52.2629, 6.6822, -18.4521, -8.2769, 9.1953],
    43: [-167.2344, 174.1942, -13.0695, 7.3351, 22.3835, 27.5206],
}


def test_mfcc_equals_librosas_reference_values():
    t = np.arange(22050) / 22050
    y = (0.5 * np.sin(2 * np.pi * 440 * t) + 0.25 * np.sin(2 * np.pi * 1234 * t)).astype(np.float32)
    m = audio.mfcc(y)
    assert m.shape == (20, 44)
    for frame, ref in LIBROSA_MFCC.items():
        assert m[:6, frame] == pytest.approx(ref, abs=2e-3), frame


@pytest.mark.slow
def test_compare_audios_scores(tmp_path):
    import soundfile as sf

    a = tmp_path / "a.wav"
    sf.write(a, _melody(), SR)
    sf.write(tmp_path / "a.mp3", _melody(), SR)
    sf.write(tmp_path / "half.wav", _melody()[::2], SR // 2)
    sf.write(tmp_path / "stereo.wav", np.stack([_melody(), _melody()], axis=1), SR)
    sf.write(tmp_path / "other.wav", _melody((880, 330, 495, 440, 660, 550)), SR)
    sf.write(tmp_path / "noise.wav", np.random.default_rng(0).normal(0, 0.3, 3 * SR), SR)
    score = lambda name: audio.compare_audios(str(a), str(tmp_path / name))  # noqa: E731
    assert score("a.wav") == pytest.approx(1.0)
    assert score("stereo.wav") == pytest.approx(1.0)  # channels are averaged
    assert score("half.wav") > 0.99  # resampled to 22050 Hz either way
    assert score("a.mp3") > 0.95  # lossy, same music
    assert score("other.wav") < 0.8 and score("noise.wav") < 0.5
    assert score("noise.wav") < score("other.wav") < score("a.mp3")
    # upstream's compare_audios (librosa 0.11.0 + fastdtw) on these files: 0.974233, 0.999939, 0.633315
    assert score("a.mp3") == pytest.approx(0.974233, abs=0.005)
    assert score("half.wav") == pytest.approx(0.999939, abs=0.005)
    assert score("other.wav") == pytest.approx(0.633315, abs=0.005)
    # upstream's edge cases: both empty or unreadable "perfectly similar", one of them 0, no path 0
    (tmp_path / "empty.wav").write_bytes(b"")
    (tmp_path / "junk.mp3").write_bytes(b"not audio at all" * 10)
    assert audio.compare_audios(str(tmp_path / "empty.wav"), str(tmp_path / "junk.mp3")) == 1.0
    assert score("empty.wav") == 0.0 and score("junk.mp3") == 0.0 and score("absent.wav") == 0.0
    assert audio.compare_audios(None, str(a)) == 0.0 and METRICS["compare_audios"] is audio.compare_audios


def _deck(tmp_path, rel: str | None, media: bytes | None = None):
    from pptx import Presentation

    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[6])
    plain = tmp_path / "plain.pptx"
    prs.save(plain)
    out = tmp_path / "deck.pptx"
    with zipfile.ZipFile(plain) as zin, zipfile.ZipFile(out, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "ppt/slides/_rels/slide1.xml.rels" and rel:
                data = data.replace(b"</Relationships>", rel.encode() + b"</Relationships>")
            zout.writestr(item, data)
        if media is not None:
            zout.writestr("ppt/media/audio1.wav", media)
    return out.read_bytes()


AUDIO_REL = ('<Relationship Id="rIdA" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/audio" '
             'Target="{}"{}/>')


def test_audio_in_slide_embedded_linked_and_absent(tmp_path):
    sound = b"RIFF....WAVEfmt fake"
    files = {
        "/d/embedded.pptx": _deck(tmp_path, AUDIO_REL.format("../media/audio1.wav", ""), sound),
        "/d/linked.pptx": _deck(tmp_path, AUDIO_REL.format("file:///home/user/song.mp3", ' TargetMode="External"')),
        "/d/dangling.pptx": _deck(tmp_path, AUDIO_REL.format("../media/gone.wav", "")),
        "/d/plain.pptx": _deck(tmp_path, None),
        "/d/notzip.pptx": b"PK but not really",
        "/home/user/song.mp3": b"ID3 song",
    }
    cache = tmp_path / "cache"
    cache.mkdir()
    ctx = EvalContext(client=FakeClient(files=files), cache_dir=cache)
    get = GETTERS["audio_in_slide"]
    run = lambda p: asyncio.run(get(ctx, {"ppt_file_path": p, "slide_index": 0, "dest": "out.wav"}))  # noqa: E731
    got = run("/d/embedded.pptx")
    assert got == str(cache / "out.wav") and (cache / "out.wav").read_bytes() == sound
    assert open(run("/d/linked.pptx"), "rb").read() == b"ID3 song"
    for p in ("/d/dangling.pptx", "/d/plain.pptx", "/d/notzip.pptx", "/d/absent.pptx"):
        assert run(p) is None, p
    assert asyncio.run(get(ctx, {"ppt_file_path": "/d/embedded.pptx", "slide_index": 3, "dest": "x"})) is None
    assert GETTERS["audio_in_slide"] is impress.audio_in_slide


def _clip(path, frames: int, flip: bool = False, seed: int = 0) -> str:
    import cv2

    rng = np.random.default_rng(seed)
    base = (rng.random((12, 16, 3)) * 255).astype(np.uint8)
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    assert w.isOpened()
    for i in range(frames):
        f = cv2.resize(np.roll(base, i, axis=1), (64, 48), interpolation=cv2.INTER_NEAREST)
        w.write(cv2.flip(f, 0) if flip else f)
    w.release()
    return str(path)


def test_compare_videos(tmp_path):
    gold = _clip(tmp_path / "gold.avi", 12)
    assert images.compare_videos(_clip(tmp_path / "same.avi", 12), gold) == 1.0
    assert images.compare_videos(_clip(tmp_path / "flip.avi", 12, flip=True), gold) == 0.0
    assert images.compare_videos(_clip(tmp_path / "short.avi", 8), gold) == 0.0  # ends first
    # only the first max_frames_to_check frames count, so the shorter one matches up to there
    assert images.compare_videos(str(tmp_path / "short.avi"), gold, max_frames_to_check=8) == 1.0
    # a few mismatching frames are tolerated: more than `threshold` of them fail
    assert images.compare_videos(str(tmp_path / "flip.avi"), gold, threshold=20) == 1.0
    (tmp_path / "junk.mp4").write_bytes(b"\0" * 100)
    assert images.compare_videos(str(tmp_path / "junk.mp4"), gold) == 0.0
    assert images.compare_videos(str(tmp_path / "junk.mp4"), str(tmp_path / "nope.mp4")) == 1.0  # as upstream
    assert images.compare_videos(None, gold) == 0.0
    assert METRICS["compare_videos"] is images.compare_videos


def _text_png(path, text: str) -> str:
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", 15)
    img = Image.new("RGB", (640, 200), (30, 30, 30))
    d = ImageDraw.Draw(img)
    for i, line in enumerate(text.split("\n")):
        d.text((10, 10 + 20 * i), line, font=font, fill=(230, 230, 230))
    img.save(path)
    return str(path)


def test_compare_image_text_reads_a_terminal_screenshot(tmp_path):
    shot = _text_png(tmp_path / "ls.png", "user@desktop:~$ ls\nDesktop  Documents  Downloads  Music\nuser@desktop:~$")
    rule = {"type": "text", "text": "ls"}
    assert images.compare_image_text(shot, rule) == 1.0
    assert images.compare_image_text(shot, {"type": "text", "text": "Documents"}) == 1.0
    blank = _text_png(tmp_path / "blank.png", "nothing here to see")
    assert images.compare_image_text(blank, {"type": "text", "text": "Documents"}) == 0.0
    (tmp_path / "notimage.png").write_bytes(b"garbage")
    assert images.compare_image_text(str(tmp_path / "notimage.png"), rule) == 0.0
    assert images.compare_image_text(str(tmp_path / "absent.png"), rule) == 0.0
    assert images.compare_image_text(None, rule) == 0.0
    with pytest.raises(ValueError):
        images.compare_image_text(shot, {"type": "regex", "text": "ls"})


def test_vm_wallpaper_getter_and_compare_images(tmp_path):
    import io

    gold = Image.radial_gradient("L").convert("RGB").resize((64, 48))
    gold.save(tmp_path / "gold.png")
    buf = io.BytesIO()
    gold.resize((128, 96)).save(buf, "PNG")
    cache = tmp_path / "cache"
    cache.mkdir()
    get = GETTERS["vm_wallpaper"]
    ctx = EvalContext(client=FakeClient(files={"/home/user/.config/wallpaper": buf.getvalue()}), cache_dir=cache)
    got = asyncio.run(get(ctx, {"dest": "background.png"}))
    assert got == str(cache / "background.png") and (cache / "background.png").read_bytes() == buf.getvalue()
    assert METRICS["compare_images"](got, str(tmp_path / "gold.png"), reference_base_result=0.54) > 0.9
    # none set: None, which compare_images scores 0
    ctx0 = EvalContext(client=FakeClient(), cache_dir=cache)
    assert asyncio.run(get(ctx0, {"dest": "none.png"})) is None
    assert METRICS["compare_images"](None, str(tmp_path / "gold.png"), reference_base_result=0.54) == 0

    class Failing(FakeClient):
        async def wallpaper(self):
            raise DesktopError("POST /wallpaper -> 500: boom", 500)

    with pytest.raises(Unknown):
        asyncio.run(get(EvalContext(client=Failing(), cache_dir=cache), {"dest": "x.png"}))
