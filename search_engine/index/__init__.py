"""The on-disk index: a manifest, page images, and per-document embedding segments."""
