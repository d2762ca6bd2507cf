"""Train faiss quantisers and move their tables in and out as numpy, without faiss's `std::vector` proxies.

Why this exists: faiss and PyMuPDF are both SWIG modules, and SWIG modules built with the same
runtime share one type table. Whichever module registers its shadow class for `std::vector<float>`
last owns that type for every module, so once `import pymupdf` runs after `import faiss`, faiss
hands back `pymupdf.mupdf.vectorf` objects: `faiss.Kmeans.train`, `faiss.vector_to_array` and
`faiss.copy_array_to_vector` then fail with a bare AssertionError. A search server that loads a
compressed index and then ingests a PDF (or a test run in that order) hits this. The functions here
only pass numpy arrays and raw `float*` pointers (`swig_ptr` / `rev_swig_ptr`) across the boundary,
whose wrappers carry no shadow class, so the import order no longer matters.
"""
from __future__ import annotations

import numpy as np


def spherical_kmeans(sample: np.ndarray, k: int, *, niter: int, seed: int,
                     min_points_per_centroid: int | None = None,
                     max_points_per_centroid: int | None = None) -> np.ndarray:
    """(k, dim) float32 unit-norm centroids of `sample` — what `faiss.Kmeans(..., spherical=True)` trains.

    The centroids are read back from the inner-product index faiss's clustering leaves them in
    (`reconstruct_n` fills a numpy array), not from `Clustering.centroids` (a `std::vector<float>`).
    """
    import faiss

    sample = np.ascontiguousarray(sample, np.float32)
    params = faiss.ClusteringParameters()
    params.niter = niter
    params.seed = seed
    params.spherical = True
    params.verbose = False
    if min_points_per_centroid is not None:
        params.min_points_per_centroid = min_points_per_centroid
    if max_points_per_centroid is not None:
        params.max_points_per_centroid = max_points_per_centroid
    clustering = faiss.Clustering(sample.shape[1], k, params)
    index = faiss.IndexFlatIP(sample.shape[1])
    clustering.train(sample, index)
    return np.asarray(index.reconstruct_n(0, index.ntotal), np.float32)


def pq_table(pq) -> np.ndarray:
    """(M, 2**nbits, dsub) float32 copy of a trained `faiss.ProductQuantizer`'s sub-centroids."""
    import faiss

    shape = (int(pq.M), int(pq.ksub), int(pq.dsub))
    flat = faiss.rev_swig_ptr(pq.get_centroids(0, 0), shape[0] * shape[1] * shape[2])
    return np.array(flat, np.float32).reshape(shape)


def pq_from_table(table: np.ndarray, nbits: int):
    """A `faiss.ProductQuantizer` holding `table` ((M, 2**nbits, dsub) sub-centroids), ready to encode."""
    import faiss

    m, ksub, dsub = table.shape
    if ksub != 1 << nbits:
        raise ValueError(f"a {nbits}-bit product quantiser has {1 << nbits} sub-centroids, the table has {ksub}")
    pq = faiss.ProductQuantizer(m * dsub, m, nbits)
    for sub in range(m):
        pq.set_params(faiss.swig_ptr(np.ascontiguousarray(table[sub], np.float32)), sub)
    return pq


def linear_transform_matrix(transform, dim: int) -> np.ndarray:
    """(d_out, dim) float32 matrix A of a bias-free trained faiss linear transform (y = A x), e.g. an OPQ rotation.

    Read by applying the transform to the identity (row i of the result is A e_i, a column of A), not
    from `transform.A` (a `std::vector<float>`).
    """
    if getattr(transform, "have_bias", False):
        raise ValueError("the transform has a bias; its matrix alone does not describe it")
    return np.ascontiguousarray(transform.apply_py(np.eye(dim, dtype=np.float32)).T, np.float32)
