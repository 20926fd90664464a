"""The ApiClient the executor and `gpuplat cluster check` talk through: which configuration it loads."""

from __future__ import annotations

import os
from typing import Any

from ..base import ExecutorError


def api_client(kubeconfig: str = "", context: str = "", pool_size: int = 64) -> Any:
    """An ApiClient: from `kubeconfig`, else in-cluster, else the default kubeconfig."""
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig, context=context or None, client_configuration=cfg)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)
        else:
            config.load_kube_config(context=context or None, client_configuration=cfg)
    except (config.ConfigException, OSError, TypeError) as exc:
        raise ExecutorError(f"cannot load the Kubernetes configuration: {exc}") from exc
    cfg.connection_pool_maxsize = pool_size
    return client.ApiClient(cfg)
