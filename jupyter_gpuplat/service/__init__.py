"""The REST + streaming API served from the Jupyter server."""
