"""Shared fixtures.  Without a GPU, kernels run through the Triton interpreter on CPU
tensors; the switch must be set before Triton is first imported."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def stored_site(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The site of the stored runs, built once for the whole session by ``build()`` and served
    on localhost (see :class:`sitekit.StoredSite`).  Read it, never write to it: a test that
    changes a site copies it first."""
    from sitekit import ROOT, StoredSite, served

    from publish.site import build

    site = tmp_path_factory.mktemp("stored") / "site"
    site.mkdir()
    with served(site) as url:
        report = build(ROOT, site, site_url=url + "/")  # as `python build.py --serve` does
        yield StoredSite(site, url, report)
