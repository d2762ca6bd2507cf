"""Read upstream VRAG's `colqwen_ingestion/*.node` files and import them into our index.

Upstream stored each page as a llama-index `ImageNode.to_dict()` in a JSON list, with the
ColQwen2 multi-vector flattened row by row (128-d rows; the dimension is not recorded). Users
who already paid for that GPU embedding pass keep it: the vectors move into a segment (float16,
~15x smaller than the JSON) and the images into the index, without re-embedding.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm.auto import tqdm

from search_engine.embedders.base import EmbedderSpec
from search_engine.index.atomic import atomic_save_npy, atomic_write_json
from search_engine.index.manifest import DocumentEntry, Manifest
from search_engine.ingest import IngestReport, index_lock
from search_engine.types import PageRecord, make_page_id

UPSTREAM_MODEL = "vidore/colqwen2-v1.0"


@dataclass
class VragNode:
    file_name: str
    image_path: str  # as recorded (relative to upstream's repo root)
    embedding: np.ndarray  # (tokens, dim) float32


def read_node_file(path: str | Path, dim: int = 128) -> VragNode:
    path = Path(path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable .node JSON file ({exc})") from exc
    node = payload[0] if isinstance(payload, list) and payload else payload
    if not isinstance(node, dict) or not node.get("embedding"):
        raise ValueError(f"{path}: no node with an embedding inside")
    flat = np.asarray(node["embedding"], dtype=np.float32)
    if flat.size % dim:
        raise ValueError(f"{path}: {flat.size} values do not form rows of {dim}")
    metadata = node.get("metadata") or {}
    image_path = node.get("image_path") or metadata.get("file_path") or ""
    file_name = metadata.get("file_name") or Path(image_path).name
    return VragNode(file_name=file_name, image_path=image_path, embedding=flat.reshape(-1, dim))


def write_node_file(path: str | Path, image_path: str | Path, embedding: np.ndarray) -> None:
    """Write a page in upstream's format (for exporting to upstream tools, and for tests)."""
    image_path = str(image_path)
    metadata = {"file_path": image_path, "file_name": Path(image_path).name, "file_type": "image/jpeg"}
    node = {"id_": str(uuid.uuid4()), "embedding": np.asarray(embedding, np.float32).reshape(-1).tolist(),
            "metadata": metadata, "relationships": {}, "text": "", "image": None, "image_path": image_path,
            "image_url": None, "class_name": "ImageNode"}
    atomic_write_json(Path(path), [node])


def _find_image(node: VragNode, node_file: Path, image_root: Path | None) -> Path:
    candidates = []
    if image_root is not None:
        candidates += [image_root / node.file_name, image_root / Path(node.image_path).name]
    candidates += [Path(node.image_path), node_file.parent / node.image_path,
                   node_file.parent.parent / "img" / node.file_name]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{node_file}: image {node.file_name!r} not found (pass image_root=)")


def import_vrag_nodes(index_dir: str | Path, node_files: Iterable[str | Path] | str | Path,
                      image_root: str | Path | None = None, model: str = UPSTREAM_MODEL, dim: int = 128,
                      progress: bool = True) -> IngestReport:
    """Each node becomes a one-page image document (doc id = image stem, page 1)."""
    from search_engine.corpus import doc_id_for

    index_dir = Path(index_dir)
    if isinstance(node_files, (str, Path)) and Path(node_files).is_dir():
        node_files = sorted(Path(node_files).glob("*.node"))
    elif isinstance(node_files, (str, Path)):
        node_files = [node_files]
    node_files = [Path(p) for p in node_files]
    image_root = Path(image_root) if image_root else None
    spec = EmbedderSpec(kind="colqwen2", model=model, modality="image", multi_vector=True, dim=dim)
    report = IngestReport()
    with index_lock(index_dir):
        manifest = Manifest.load(index_dir)
        recorded = manifest.spec("visual")
        if recorded is not None and (recorded.model, recorded.dim) != (model, dim):
            raise ValueError(f"the index's visual channel is {recorded.model!r}; cannot import {model!r} vectors")
        if manifest.spec("text") is not None:
            raise ValueError("the index has a text channel; upstream nodes carry no page text — use a new index")
        manifest.set_spec("visual", spec)
        taken = set(manifest.documents)
        for node_file in tqdm(node_files, desc="import .node", unit="page", disable=not progress):
            try:
                node = read_node_file(node_file, dim=dim)
                image_file = _find_image(node, node_file, image_root)
                with Image.open(image_file) as image:
                    width, height = image.size
            except (ValueError, OSError) as exc:
                report.failed[str(node_file)] = str(exc)
                continue
            source = str(image_file.resolve())
            existing = manifest.doc_for_source(source)
            doc_id = existing.doc_id if existing else doc_id_for(image_file, taken)
            taken.add(doc_id)
            sha1 = hashlib.sha1(node_file.read_bytes()).hexdigest()
            rel_image = Path("pages") / doc_id / f"1{image_file.suffix.lower()}"
            (index_dir / rel_image).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(image_file, index_dir / rel_image)
            rel_seg = Path("segments") / "visual" / f"{doc_id}.{sha1[:12]}.npy"
            atomic_save_npy(index_dir / rel_seg, node.embedding.astype(np.float16))
            page_id = make_page_id(doc_id, 1)
            record = PageRecord(page_id=page_id, doc_id=doc_id, page_number=1, image_path=rel_image.as_posix(),
                                width=width, height=height, source_path=source,
                                extra={"upstream_node": node_file.name})
            entry = DocumentEntry(doc_id=doc_id, source_path=source, sha1=sha1, num_pages=1, kind="image",
                                  page_ids=[page_id], segments={"visual": {"file": rel_seg.as_posix(),
                                                                           "counts": [int(node.embedding.shape[0])]}})
            (report.updated if existing else report.added).append(doc_id)
            manifest.remove_document(doc_id)
            manifest.add_document(entry, [record])
            report.pages += 1
        manifest.save(index_dir)
    return report
