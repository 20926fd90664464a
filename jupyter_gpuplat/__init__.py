"""jupyter-gpuplat: shared, enforced GPU queues for JupyterLab.

This module stays import-light: the Jupyter server imports it to find the
extension points, and run launchers must not pay for the whole platform.
"""

__version__ = "0.1.0"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-gpuplat"}]


def _jupyter_server_extension_points() -> list[dict[str, object]]:
    from .service.extension import GpuPlat

    return [{"module": "jupyter_gpuplat", "app": GpuPlat}]


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext jupyter_gpuplat`: the %gpu_submit family of magics."""
    from .notebook.magics import GpuMagics

    ipython.register_magics(GpuMagics)  # type: ignore[attr-defined]
