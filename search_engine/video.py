"""Videos in the corpus: fixed-length segments, frames decoded with PyAV, one "page" per segment.

A video becomes a document whose pages are its segments (`{doc_id}_{n}`, 1-based, like pages),
so ingestion, checkpointing, the index format, search and the page-image endpoint all work on
videos unchanged. Each segment is stored as a *frame sheet*: its sampled frames tiled in a grid
(one image file). The record's `extra` says where each frame lies in the sheet and when it was
taken, so a client cuts the frames back out (the agents show them to the model one by one, each
with its timestamp):

    {"kind": "video_segment", "start_s": 10.0, "end_s": 20.0, "frame_times": [10.0, 12.0, ...],
     "frame_boxes": [[x1, y1, x2, y2], ...], "fps": 0.5}

Text channel: OCR of the frames (repeated lines said once, each line tagged with the second it
first appears). Visual channel: the visual embedder sees the sheet, when one is configured.

Decoding: PyAV (FFmpeg's libraries, wheels on PyPI) — seek to the first wanted segment, decode
forward, keep the first frame at or after each sampling instant, labelled with its own time. Why by
hand: sampling at a fixed rate with a cap per segment over a stream of frames is a loop, not a
library call.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from search_engine.documents import DocumentError, RenderedPage
from search_engine.text_extraction import ocr_lines

VIDEO_SUFFIXES = {".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v", ".mpg", ".mpeg"}


class VideoError(Exception):
    """A video that cannot be read; `documents.DocumentError` wraps it with the file name."""


@dataclass(frozen=True)
class VideoOptions:
    segment_s: float = 10.0  # length of a segment (the unit retrieved)
    fps: float = 1.0  # frames sampled per second
    max_frames: int = 8  # cap per segment: frames are then spread evenly over it
    frame_max_side: int = 448  # each frame's longer side in the sheet
    ocr: bool = True  # read the frames' text (the text channel); off when only a visual model is used
    lang: str | None = None  # tesseract languages (None: the project's default)

    def __post_init__(self) -> None:
        if self.segment_s <= 0 or self.fps <= 0 or self.max_frames < 1 or self.frame_max_side < 16:
            raise ValueError("need segment_s > 0, fps > 0, max_frames >= 1, frame_max_side >= 16")


@dataclass
class Segment:
    number: int  # 1-based
    start_s: float
    end_s: float
    frames: list[tuple[float, Image.Image]]  # (second, RGB frame)


def is_video(path: str | Path) -> bool:
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


def duration_s(path: str | Path) -> float:
    """The video's duration in seconds (container, else stream, else counted from the last frame)."""
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoError("no video stream")
            stream = container.streams.video[0]
            if container.duration:
                return container.duration / av.time_base
            if stream.duration and stream.time_base:
                return float(stream.duration * stream.time_base)
            last = 0.0
            for frame in container.decode(stream):
                last = float(frame.time or 0.0)
            return last + (1.0 / float(stream.average_rate) if stream.average_rate else 0.0)
    except VideoError:
        raise
    except Exception as exc:
        raise VideoError(f"not a readable video ({type(exc).__name__}: {exc})") from exc


def count_segments(path: str | Path, options: VideoOptions) -> int:
    seconds = duration_s(path)
    if seconds <= 0:
        raise VideoError("the video has no duration")
    return max(1, math.ceil(seconds / options.segment_s - 1e-9))


def sample_times(start: float, end: float, options: VideoOptions) -> list[float]:
    """Sampling instants in [start, end): every 1/fps seconds, spread evenly when over the cap."""
    step = 1.0 / options.fps
    count = max(1, math.ceil((end - start) / step - 1e-9))
    if count > options.max_frames:
        step, count = (end - start) / options.max_frames, options.max_frames
    return [round(start + i * step, 3) for i in range(count)]


def decode_segments(path: str | Path, options: VideoOptions, first: int = 1,
                    last: int | None = None) -> Iterator[Segment]:
    """Segments `first..last` (1-based, inclusive) with their sampled frames."""
    import av

    total = count_segments(path, options)
    last = total if last is None else min(last, total)
    seconds = duration_s(path)
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            start_s = (first - 1) * options.segment_s
            if start_s > 0 and stream.time_base:
                container.seek(int(start_s / stream.time_base), stream=stream, backward=True, any_frame=False)
            frames = container.decode(stream)
            pending: Image.Image | None = None
            pending_t = -1.0
            for number in range(first, last + 1):
                seg_start = (number - 1) * options.segment_s
                seg_end = min(seconds, number * options.segment_s)
                picked: list[tuple[float, Image.Image]] = []
                for want in sample_times(seg_start, seg_end, options):
                    # the first decoded frame at or after `want` (frames before it are skipped)
                    while pending is None or pending_t + 1e-6 < want:
                        frame = next(frames, None)
                        if frame is None:
                            break
                        pending_t = float(frame.time if frame.time is not None else pending_t + 1e-3)
                        pending = frame.to_image() if pending_t + 1e-6 >= want else None
                    if pending is None or pending_t + 1e-6 < want or pending_t >= seg_end + 1e-6:
                        break  # the stream ended, or the next frame belongs to a later segment
                    if not picked or picked[-1][0] != round(pending_t, 3):  # a frame is kept once
                        picked.append((round(pending_t, 3), pending.convert("RGB")))
                if not picked and pending is not None:  # a segment shorter than one frame interval
                    picked.append((seg_start, pending.convert("RGB")))
                yield Segment(number, seg_start, seg_end, picked)
    except VideoError:
        raise
    except Exception as exc:
        raise VideoError(f"decoding failed ({type(exc).__name__}: {exc})") from exc


def frame_sheet(frames: list[tuple[float, Image.Image]], max_side: int) -> tuple[Image.Image, list[list[int]]]:
    """Tile frames in a near-square grid; returns the sheet and each frame's box in it."""
    if not frames:
        raise VideoError("a segment without frames")
    thumbs = []
    for _, frame in frames:
        thumb = frame.copy()
        thumb.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
        thumbs.append(thumb)
    cols = math.ceil(math.sqrt(len(thumbs)))
    rows = math.ceil(len(thumbs) / cols)
    cell_w, cell_h = max(t.width for t in thumbs), max(t.height for t in thumbs)
    sheet = Image.new("RGB", (cols * cell_w, rows * cell_h), "black")
    boxes = []
    for i, thumb in enumerate(thumbs):
        x, y = (i % cols) * cell_w, (i // cols) * cell_h
        sheet.paste(thumb, (x, y))
        boxes.append([x, y, x + thumb.width, y + thumb.height])
    return sheet, boxes


def frames_text(frames: list[tuple[float, Image.Image]], ocr: bool = True, lang: str | None = None) -> str:
    """OCR of the frames, each distinct line once, tagged with the second it first shows."""
    if not ocr:
        return ""
    seen: set[str] = set()
    out = []
    for second, frame in frames:
        for line in ocr_lines(frame, lang):
            text = line.text.strip()
            if text and text.lower() not in seen:
                seen.add(text.lower())
                out.append(f"[{second:g}s] {text}")
    return "\n".join(out)


# ---- the corpus interface: videos as documents whose pages are segments ------------------------------------


def corpus_segment_count(path: Path, options: VideoOptions) -> int:
    """`count_pages` for a video; `DocumentError` for one that cannot be read."""
    try:
        return count_segments(path, options)
    except VideoError as exc:
        raise DocumentError(f"{path.name}: {exc}") from exc


def render_segments(path: Path, options: VideoOptions, first: int = 1, last: int | None = None):
    """`render_pages` for a video: one `RenderedPage` per segment (frame sheet, frame text, time range)."""
    try:
        for segment in decode_segments(path, options, first, last):
            if not segment.frames:
                raise VideoError(f"segment {segment.number} has no decodable frame")
            sheet, boxes = frame_sheet(segment.frames, options.frame_max_side)
            extra = {"kind": "video_segment", "start_s": segment.start_s, "end_s": round(segment.end_s, 3),
                     "frame_times": [t for t, _ in segment.frames], "frame_boxes": boxes, "fps": options.fps}
            text = frames_text(segment.frames, options.ocr, options.lang) if options.ocr else ""
            yield RenderedPage(segment.number, sheet, sheet.width, sheet.height, text=text, extra=extra)
    except VideoError as exc:
        raise DocumentError(f"{path.name}: {exc}") from exc
