"""Video in the corpus: a generated clip (frames with numbers drawn on them) is ingested beside a PDF,
the right segment is retrieved over HTTP, and its frames reach the model's context."""
from __future__ import annotations

import json

import pytest
from PIL import Image, ImageDraw, ImageFont

from search_engine.video import VideoOptions, count_segments, decode_segments, sample_times
from testkit.loopback import LoopbackServer

OPTIONS = VideoOptions(segment_s=10.0, fps=0.5, max_frames=3, frame_max_side=320)


def frame_text(second: int) -> list[str]:
    """Segment 1: a lighthouse, segment 2: the Kestrel code (shown from second 14), segment 3: an orchard."""
    if second < 10:
        return ["Lighthouse beacon", f"second {second}"]
    if second < 20:
        return ["Kestrel code 4711" if second >= 14 else "Kestrel code pending", f"second {second}"]
    return ["Orchard harvest", f"second {second}"]


def make_video(path, seconds: int = 30, fps: int = 1, size=(320, 240)) -> None:
    import av

    font = ImageFont.load_default(size=26)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for second in range(seconds):
            image = Image.new("RGB", size, "white")
            draw = ImageDraw.Draw(image)
            for row, line in enumerate(frame_text(second)):
                draw.text((12, 40 + row * 60), line, fill="black", font=font)
            for packet in stream.encode(av.VideoFrame.from_image(image)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("video") / "harbour_clip.mp4"
    make_video(path)
    return path


def test_segments_and_sampling(clip):
    assert sample_times(10.0, 20.0, OPTIONS) == [10.0, 13.333, 16.667]  # 5 instants at 0.5 fps, capped to 3
    assert sample_times(0.0, 4.0, VideoOptions(fps=1.0)) == [0.0, 1.0, 2.0, 3.0]
    assert count_segments(clip, OPTIONS) == 3
    segments = list(decode_segments(clip, OPTIONS, first=2, last=3))  # seeks to the second segment
    assert [(s.number, s.start_s, s.end_s) for s in segments] == [(2, 10.0, 20.0), (3, 20.0, 30.0)]
    assert [t for t, _ in segments[0].frames] == [10.0, 14.0, 17.0]  # the decoded frames' own times
    from search_engine.text_extraction import ocr_lines

    seen = [" ".join(line.text for line in ocr_lines(frame)) for _, frame in segments[0].frames]
    assert "second 10" in seen[0] and "pending" in seen[0]  # the frames are the right ones
    assert "second 14" in seen[1] and "4711" in seen[1] and "second 17" in seen[2]


@pytest.fixture(scope="module")
def mixed_index(tmp_path_factory, clip, sample_corpus):
    from search_engine.ingest import Ingestor

    pdf = next(f for f in sample_corpus.files if "solar" in str(f))
    index = tmp_path_factory.mktemp("index") / "mixed"
    report = Ingestor(index, visual_model=None, text_model="minilm", progress=False, video=OPTIONS).add([clip, pdf])
    assert not report.failed, report.failed
    return index


def test_video_ingested_beside_pages_and_retrieved_over_http(mixed_index):
    from search_engine.api import create_app
    from search_engine.engine import SearchEngine

    engine = SearchEngine.load(mixed_index)
    docs = {d["doc_id"]: d for d in engine.documents()}
    assert docs["harbour_clip"]["kind"] == "video" and docs["harbour_clip"]["num_pages"] == 3
    record = engine.page("harbour_clip_2")
    assert "Kestrel code 4711" in record.text and record.text_source == "ocr"
    assert record.extra["frame_times"] == [10.0, 14.0, 17.0] and len(record.extra["frame_boxes"]) == 3
    server = LoopbackServer(create_app(engine=engine)).start()
    try:
        import httpx

        body = httpx.post(server.url + "/search", json={"queries": ["What is the Kestrel code?",
                                                                     "Kestrel Ridge solar plant power"],
                                                        "top_k": 2}).json()
        video_hit, page_hit = body["results"][0][0], body["results"][1][0]
        assert video_hit["page_id"] == "harbour_clip_2" and video_hit["kind"] == "video_segment"
        assert (video_hit["start_s"], video_hit["end_s"]) == (10.0, 20.0)
        assert page_hit["page_id"] == "solar_energy_brief_3" and page_hit["kind"] == "page"
        assert page_hit["start_s"] is None
        sheet = httpx.get(server.url + video_hit["image_url"])
        assert sheet.status_code == 200 and sheet.headers["content-type"].startswith("image/")
    finally:
        server.stop()


def test_segment_frames_reach_the_model_and_answer(mixed_index):
    from search_engine.api import create_app
    from search_engine.engine import SearchEngine
    from vimrag import VimRAG
    from vimrag.stand_in import VimRAGRuleBasedBackend
    from vrag_rl.serving.policy_server.app import create_app as policy_app

    search = LoopbackServer(create_app(engine=SearchEngine.load(mixed_index))).start()
    policy = LoopbackServer(policy_app(VimRAGRuleBasedBackend(), "vimrag-rule-based")).start()
    try:
        result = VimRAG(base_url=policy.url + "/v1", search_url=search.url, search_top_k=2).run(
            "What is the Kestrel code?")
    finally:
        search.stop()
        policy.stop()
    assert result.status == "answered" and result.answer == "4711", (result.error, result.answer)
    done = next(e for e in result.events if e.type == "search_done")
    video = next(i for i in done.items if i["kind"] == "video_segment")
    assert video["ref_id"] == "harbour_clip_2" and video["label"] == "Video 1"
    assert video["time_range"] == [10.0, 20.0] and video["frame_times"] == [10.0, 14.0, 17.0]
    frames = [r for r in done.shown if r.page_id == "harbour_clip_2"]
    assert len(frames) == 3 and all(r.is_crop for r in frames)  # each frame cut out of the sheet
    item = result.graph.nodes["search_1"].items[0]
    # the stand-in read the code in the frame at 14 s (OCR of what it was sent) and kept that frame only
    assert item.kind == "video_segment" and item.key_timestamps == [14.0] and item.time_range == [10.0, 20.0]
    last_context = [e for e in result.events if e.type == "context"][-1]
    assert [m["label"] for m in last_context.memory] == ["Video 1"] and last_context.stats["images"] == 1
    assert result.evidence[0]["time_range"] == [10.0, 20.0]
    json.dumps(result.to_dict())


def test_cli_ingests_video_with_its_options(clip, tmp_path):
    from typer.testing import CliRunner

    from search_engine.cli import app
    from search_engine.engine import SearchEngine

    index = tmp_path / "cli_index"
    result = CliRunner().invoke(app, ["ingest", str(clip), "--index", str(index), "--text-model", "minilm",
                                      "--visual-model", "none", "--segment-seconds", "15", "--video-fps", "0.2",
                                      "--video-max-frames", "2", "--quiet"])
    assert result.exit_code == 0, result.output
    engine = SearchEngine.load(index)
    assert [d["num_pages"] for d in engine.documents()] == [2]  # 30 s in 15 s segments
    second = engine.page("harbour_clip_2")
    # every 5 s would be 3 frames; capped at 2 they are spread: instants 15 and 22.5, decoded frames 15 and 23
    assert second.extra["start_s"] == 15.0 and second.extra["frame_times"] == [15.0, 23.0]
