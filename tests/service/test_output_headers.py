"""What the service sends with a run's files: bytes to download, never a page in the Jupyter origin."""

from __future__ import annotations

from typing import Any

from ..conftest import Api

PAGE = "<script>fetch('/api/contents')</script>"


async def test_an_html_output_is_served_as_bytes_to_download(api: Api, jp_fetch: Any) -> None:
    # Without a working_dir the run starts in its artifact directory: relative files are its outputs.
    code = f"open('report \"1\".html', 'w').write({PAGE!r})"
    run = await api.submit(command=["python", "-c", code])
    await api.wait_status(run["id"], "succeeded")
    listed = await api.ok("GET", f"runs/{run['id']}/outputs")
    assert 'report "1".html' in [f["path"] for f in listed["outputs"]]
    resp = await jp_fetch(
        "gpuplat", "api", "runs", run["id"], "outputs", 'report "1".html',
        headers={"Authorization": "token tok-alice"},
    )  # fmt: skip
    assert resp.body.decode() == PAGE
    assert resp.headers["Content-Type"] == "application/octet-stream"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["Content-Disposition"] == "attachment; filename*=UTF-8''report%20%221%22.html"


async def test_a_wrong_method_names_the_allowed_ones(jp_fetch: Any) -> None:
    resp = await jp_fetch(
        "gpuplat", "api", "runs", method="DELETE", raise_error=False, headers={"Authorization": "token tok-alice"}
    )
    assert resp.code == 405
    assert resp.headers["Allow"] == "GET, POST"
