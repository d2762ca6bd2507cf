#!/usr/bin/env python
"""Residual-codec fidelity on the benchmark corpus, with nothing else in the way.

Why: the compressed fast path loses recall in the decoded scores, not in its candidates. This script
isolates the codec: N benchmark pages (make_bench_corpus's generator, in RAM), the four query sets
(50 queries each, as make_bench_corpus makes them), and for each codec the recall@10 of brute-force
MaxSim over *all* decoded pages against exact MaxSim over the originals, plus mean cos(decoded,
original), cos of the decoded residual, training time and encoding CPU per token. A codec that
cannot reach a recall here cannot reach it in the index either.

    python scripts/bench_codecs.py 1000 pq:32:8,opq:32:8,pq:32:9,pq:32:10,pq:64:8,rq:32:8:4

Codec grammar here: pq:M:BITS, opq:M:BITS (OPQ rotation + PQ), rq:M:BITS[:BEAM] (faiss
ResidualQuantizer), lsq:M:BITS (faiss LocalSearchQuantizer). One thread; several GiB of RAM at 1k pages.
"""

import os
import sys
import time
from typing import Annotated

os.environ.setdefault("OMP_NUM_THREADS", "1")
import faiss  # noqa: E402
import numpy as np  # noqa: E402
import typer  # noqa: E402

# A sibling script: scripts/ is first on sys.path when this file runs (`python scripts/bench_codecs.py`).
from make_bench_corpus import DEFAULT_NPZ, QUERY_SETS, load_base, synth_pages  # noqa: E402

from search_engine.index.centroids import Codebook, default_num_centroids  # noqa: E402
from search_engine.infra.cli_exit import exit_status  # noqa: E402

faiss.omp_set_num_threads(1)
app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})


@app.command(help=(__doc__ or "").splitlines()[0], epilog="Codec grammar: pq:M:BITS, opq:M:BITS (OPQ rotation + "
             "PQ), rq:M:BITS[:BEAM] (faiss ResidualQuantizer), lsq:M:BITS (faiss LocalSearchQuantizer).")
def bench(
    pages: Annotated[int, typer.Argument(help="benchmark pages to generate (in RAM)")],
    codecs: Annotated[str, typer.Argument(help="comma-separated codec specs, e.g. pq:32:8,opq:32:8,rq:32:8:4")],
) -> None:
    """Train and apply each codec; print one line of fidelity and recall per codec."""
    N = pages
    codec_specs = codecs.split(",")
    base = load_base(DEFAULT_NPZ)
    vecs, counts = [], []
    for first in range(0, N, 1000):
        v, c = synth_pages(base, min(1000, N - first), np.random.default_rng([0, first]), 0.03)
        vecs.append(v.astype(np.float32))
        counts.append(c)
    X = np.concatenate(vecs)
    counts = np.concatenate(counts)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    print(N, "pages", X.shape, flush=True)
    rng = np.random.default_rng(1)

    # queries as make_bench_corpus.make_queries does
    def page(i):
        return X[starts[i] : starts[i] + counts[i]]

    Q = {}
    for kind in QUERY_SETS:
        r = np.random.default_rng([1, QUERY_SETS.index(kind)])
        qs = []
        for _ in range(50):
            t = int(r.integers(N))
            src = [t]
            if kind == "multipage":
                src += r.choice(N, 2, replace=False).tolist()
                shares = [10, 5, 5]
            elif kind == "half-unmatched":
                shares = [10]
            else:
                shares = [20]
            q = np.concatenate([page(s)[r.choice(counts[s], sh, replace=False)] for s, sh in zip(src, shares)])
            q = q + r.standard_normal(q.shape).astype(np.float32) * (0.125 if kind == "noisy" else 0.05)
            if kind == "half-unmatched":
                q = np.concatenate([q, r.standard_normal((10, 128)).astype(np.float32)])
            qs.append(q / np.linalg.norm(q, axis=1, keepdims=True))
        Q[kind] = np.stack(qs).astype(np.float32)

    def topk(T):
        out = {}
        for kind, qs in Q.items():
            qt = qs.reshape(-1, 128)
            sims = T @ qt.T
            tb = np.maximum.reduceat(sims, starts, axis=0)  # pages x qtok
            sc = tb.reshape(N, 50, 20).sum(2).T
            out[kind] = np.argsort(-sc, 1)[:, :10]
        return out

    exact = topk(X)
    ncent = default_num_centroids(X.shape[0])
    samp = X[rng.choice(X.shape[0], min(262144, X.shape[0]), replace=False)]
    t = time.process_time()
    cb = Codebook.train(samp, ncent)
    print("centroids", ncent, time.process_time() - t, flush=True)
    codes = cb.assign(X)
    R = X - cb.centroids[codes]
    Rs = samp - cb.centroids[cb.assign(samp)]
    print("residual norm", np.linalg.norm(R, axis=1).mean(), flush=True)
    for spec in codec_specs:
        t0 = time.process_time()
        kind = spec.split(":")[0]
        arg = spec.split(":")[1:]
        if kind == "pq":
            m, nb = int(arg[0]), int(arg[1])
            q = faiss.ProductQuantizer(128, m, nb)
            q.train(Rs)
            nbytes = m * nb / 8
        elif kind == "opq":
            m, nb = int(arg[0]), int(arg[1])
            opq = faiss.OPQMatrix(128, m)
            opq.niter = 20
            opq.train(Rs)
            pq = faiss.ProductQuantizer(128, m, nb)
            pq.train(opq.apply(Rs))
            nbytes = m * nb / 8
        elif kind == "rq":
            m, nb = int(arg[0]), int(arg[1])
            q = faiss.ResidualQuantizer(128, m, nb)
            q.max_beam_size = int(arg[2]) if len(arg) > 2 else 5
            q.train(Rs)
            nbytes = m * nb / 8
        elif kind == "lsq":
            m, nb = int(arg[0]), int(arg[1])
            q = faiss.LocalSearchQuantizer(128, m, nb)
            q.train(Rs[:50000])
            nbytes = m * nb / 8
        ttrain = time.process_time() - t0
        t1 = time.process_time()
        if kind == "opq":
            c = pq.compute_codes(opq.apply(R))
            tenc = time.process_time() - t1
            D = opq.reverse_transform(pq.decode(c))
        else:
            c = q.compute_codes(R)
            tenc = time.process_time() - t1
            D = q.decode(c)
        T = cb.centroids[codes] + D
        cos = (np.sum(T * X, 1) / np.linalg.norm(T, axis=1)).mean()
        rcos = (np.sum(D * R, 1) / np.maximum(np.linalg.norm(D, axis=1) * np.linalg.norm(R, axis=1), 1e-9)).mean()
        T /= np.linalg.norm(T, axis=1, keepdims=True)
        got = topk(T)
        rec = {k: np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got[k], exact[k])]) for k in Q}
        print(
            f"{spec:12s} B/tok={2 + nbytes:5.1f} cos={cos:.4f} rescos={rcos:.3f} train={ttrain:.0f}s "
            f"enc={tenc / X.shape[0] * 1e6:.2f}us/tok "
            + " ".join(f"{k}={v:.3f}" for k, v in rec.items()),
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    """The exit status of one run on `argv` (None: the process's arguments)."""
    return exit_status(app, argv, prog_name="bench_codecs.py")


if __name__ == "__main__":
    sys.exit(main())
