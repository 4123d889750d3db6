"""Audio metric: our implementation of upstream OSWorld's desktop_env/evaluators/metrics/
vlc.py:compare_audios (librosa MFCCs aligned by fastdtw), without librosa.

Approximate on purpose, in two places (the parity record says so):
- decoding and resampling: the file is read with soundfile (libsndfile: WAV, FLAC, OGG, MP3)
  and resampled to 22050 Hz with scipy's polyphase filter; librosa.load resamples with soxr
  (and falls back to audioread/ffmpeg for formats libsndfile lacks, e.g. AAC/M4A, which here
  read as unreadable). Sample values differ slightly, so MFCCs differ in low digits.
- the MFCCs are librosa's defaults reimplemented in numpy (`mfcc` below: 2048-point periodic
  Hann STFT, hop 512, centred with zero padding, power spectrum, 128 Slaney mel bands with
  Slaney normalisation, dB with top_db 80, orthonormal DCT-II, 20 coefficients); on the same
  samples they equal librosa 0.11's to 1e-4 (float32 rounding), and tests check the pieces
  against their definitions and against librosa's values.
Measured against upstream's function (librosa 0.11.0, fastdtw 0.3.4) on generated WAV/MP3
pairs (tones, chirps, noise; 22.05-48 kHz), scores differ by at most 0.004.
The alignment is upstream's own: the fastdtw package with scipy's cosine distance.
"""

from __future__ import annotations

import logging
from math import gcd

import numpy as np

log = logging.getLogger(__name__)

SR = 22050
N_FFT = 2048
HOP = 512
N_MELS = 128
N_MFCC = 20


def load(path: str, sr: int = SR) -> np.ndarray:
    """librosa.load(path)'s output, approximately: mono (channel mean) float32 at `sr` Hz.
    Raises when the file cannot be decoded."""
    import soundfile as sf
    from scipy.signal import resample_poly

    y, native = sf.read(path, dtype="float32", always_2d=True)
    y = y.mean(axis=1)
    if native != sr and y.size:
        g = gcd(int(native), sr)
        y = resample_poly(y, sr // g, int(native) // g).astype(np.float32)
    return y


def hz_to_mel(f):
    """librosa.hz_to_mel (Slaney's scale, htk=False): linear below 1 kHz, logarithmic above."""
    f = np.asanyarray(f, dtype=float)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    mels = f / f_sp
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, min_log_hz) / min_log_hz) / logstep, mels)


def mel_to_hz(m):
    """librosa.mel_to_hz (Slaney's scale): the inverse of `hz_to_mel`."""
    m = np.asanyarray(m, dtype=float)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_filters(sr: int = SR, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """librosa.filters.mel(sr, n_fft, n_mels) with its defaults (fmin 0, fmax sr/2, Slaney
    scale and area normalisation): (n_mels, 1 + n_fft // 2) triangular weights."""
    fftfreqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2.0), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    return weights * (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]


def power_spectrogram(y: np.ndarray, n_fft: int = N_FFT, hop: int = HOP) -> np.ndarray:
    """|librosa.stft(y)|**2: periodic Hann window, frames centred (zero padding of n_fft // 2
    at both ends, librosa's pad_mode "constant"); (1 + n_fft // 2, frames)."""
    y = np.pad(np.asarray(y, dtype=np.float64), n_fft // 2)
    if y.size < n_fft:
        y = np.pad(y, (0, n_fft - y.size))
    frames = 1 + (y.size - n_fft) // hop
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
    idx = np.arange(n_fft)[None, :] + hop * np.arange(frames)[:, None]
    return (np.abs(np.fft.rfft(y[idx] * window, axis=1)) ** 2).T


def mfcc(y: np.ndarray, sr: int = SR) -> np.ndarray:
    """librosa.feature.mfcc(y=y, sr=sr) with its defaults: (20, frames)."""
    from scipy.fft import dct

    mel = mel_filters(sr) @ power_spectrogram(y)
    db = 10.0 * np.log10(np.maximum(1e-10, mel))  # power_to_db, ref 1.0, amin 1e-10
    db = np.maximum(db, db.max() - 80.0)  # top_db 80
    return dct(db, axis=0, type=2, norm="ortho")[:N_MFCC]


def normalize_rows(s: np.ndarray) -> np.ndarray:
    """librosa.util.normalize(s, axis=1): each row divided by its largest magnitude; rows whose
    largest magnitude is below the smallest normal float are left as they are."""
    length = np.max(np.abs(s), axis=1, keepdims=True)
    length[length < np.finfo(s.dtype).tiny] = 1.0
    return s / length


def compare_audios(audio_path_1: str | None, audio_path_2: str | None) -> float:
    """Follows metrics/vlc.py:compare_audios: a similarity in [0, 1]. 0 when a path is missing;
    both files unreadable or empty: 1 (upstream: "perfectly similar"); one of them: 0. Else the
    MFCCs of each (rows normalised), aligned by fastdtw with cosine distance, give the DTW
    distance per step of the alignment path d, and the score is exp(-d) (0 where upstream's
    is NaN, ours). Approximate: see the module's docstring."""
    if not audio_path_1 or not audio_path_2:
        return 0.0
    ys = []
    for p in (audio_path_1, audio_path_2):
        try:
            y = load(p)
        except Exception as e:  # upstream: "It might be empty or corrupt"
            log.info("compare_audios: %s unreadable: %s", p, e)
            y = None
        ys.append(None if y is None or y.shape[0] == 0 else y)
    if ys[0] is None and ys[1] is None:
        return 1.0
    if ys[0] is None or ys[1] is None:
        return 0.0
    from fastdtw import fastdtw
    from scipy.spatial.distance import cosine

    m1, m2 = (normalize_rows(mfcc(y)) for y in ys)  # type: ignore[arg-type]
    distance, path = fastdtw(m1.T, m2.T, dist=cosine)
    score = float(np.exp(-distance / len(path))) if len(path) else 0.0
    return score if np.isfinite(score) else 0.0  # ours: upstream returns NaN (a zero MFCC frame)


METRICS = [compare_audios]
