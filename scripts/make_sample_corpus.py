"""Write the bundled sample corpus (4 PDFs + rag_dataset.json) used by the demo, tests and benchmarks.

Usage: python scripts/make_sample_corpus.py [OUT_DIR]   (default: data/sample_corpus/pdf)
"""
from __future__ import annotations

import argparse

from search_engine.sample_corpus import generate_sample_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default="data/sample_corpus/pdf")
    parser.add_argument("--overwrite", action="store_true", help="redraw PDFs that already exist")
    args = parser.parse_args()
    corpus = generate_sample_corpus(args.out_dir, overwrite=args.overwrite)
    for path in corpus.files:
        print(path)
    print(f"{len(corpus.qa)} questions -> {corpus.dataset_path}")


if __name__ == "__main__":
    main()
